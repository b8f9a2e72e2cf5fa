"""Validation at the boundary: one place that turns bad input into clear errors.

Every public function of :mod:`attncore` calls these helpers before computing,
so bad input raises an error that names the argument the caller passed, shows
its value or shape, and says what was expected, instead of being broadcast or
rounded into a wrong answer.  The policy (CONTRIBUTING.md, "What bad input
gets"):

* ``TypeError`` for the wrong kind of thing (a string or bool where a number
  is expected, a float where a count is expected, a non-float dtype),
  ``ValueError`` for the right kind with a wrong value or shape;
* every message names the argument and is short: arrays are described by
  dtype, shape and at most a few entries (:func:`describe`), never printed
  whole;
* NaN, ``+inf`` and ``-inf`` are rejected unless the function documents a
  meaning (``-inf`` in a score or bias means "masked"; ``finite="-inf"``);
* counts are true integers (Python ``int`` or numpy integer, never ``bool``);
* scalars are real numbers, checked in the dtype they are used in.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Sequence

import numpy as np

ShapeSpec = Sequence["int | str"]

#: Longest description of a value in a message (characters).
MAX_DESCRIPTION = 60


def _format_spec(spec: ShapeSpec) -> str:
    inner = ", ".join(str(s) for s in spec)
    return f"({inner},)" if len(spec) == 1 else f"({inner})"


def _clip(text: str, limit: int = MAX_DESCRIPTION) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(value) -> str:
    """A short description of ``value`` for an error message (at most ~100 characters).

    Arrays are described by dtype and shape (and their first entries when
    small); scalars and strings by their ``repr``, clipped.
    """
    if isinstance(value, np.ndarray):
        if value.size <= 6:
            with np.printoptions(threshold=6, precision=4):
                body = _clip(np.array2string(value, separator=", ").replace("\n", ""))
            return f"array {body} (dtype {value.dtype}, shape {value.shape})"
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    if isinstance(value, (list, tuple)) and len(value) > 6:
        return f"a {type(value).__name__} of length {len(value)}"
    return _clip(repr(value))


def as_float_array(x, name: str, spec: ShapeSpec | None = None, *, finite: bool | str = True,
                   match: tuple[str, np.ndarray] | None = None) -> np.ndarray:
    """Return ``x`` as a real floating array, keeping float16/32/64 as they are.

    Integers become float64 (as in numpy's own true division); booleans,
    complex numbers, strings and objects raise ``TypeError`` because none of
    them is a valid activation, weight or score.  With ``spec`` the shape is
    checked (:func:`check_shape`); ``finite=True`` rejects NaN and
    ``+-inf``, ``finite="-inf"`` allows ``-inf`` (a documented "masked"),
    ``finite=False`` checks nothing.  ``match=(other_name, other)`` names the
    argument whose shape ``spec`` was taken from, so that a mismatch names both.
    """
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as error:  # ragged nested sequences
        raise TypeError(f"{name} must be an array of real numbers, got {describe(x)} ({_clip(str(error))})") from None
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.float64)
    elif arr.dtype.kind != "f":
        raise TypeError(
            f"{name} must be an array of real numbers (float or int), got dtype {arr.dtype} "
            f"(shape {arr.shape})"
        )
    if spec is not None:
        check_shape(arr, name, spec, match=match)
    if finite:
        check_finite(arr, name, neg_inf=finite == "-inf")
    return arr


def check_shape(x: np.ndarray, name: str, spec: ShapeSpec, *, match: tuple[str, np.ndarray] | None = None) -> None:
    """Raise ``ValueError`` unless ``x.shape`` matches ``spec``.

    ``spec`` lists the expected axes: an ``int`` must match exactly, a ``str``
    (an axis letter such as ``"n"``) matches any length, and a leading ``"..."``
    admits any number of batch axes in front.
    """
    batch = len(spec) > 0 and spec[0] == "..."
    core = list(spec[1:]) if batch else list(spec)
    ok = x.ndim >= len(core) if batch else x.ndim == len(core)
    if ok:
        tail = x.shape[x.ndim - len(core):]
        ok = all(not isinstance(want, int) or want == got for want, got in zip(core, tail))
    if not ok:
        against = f" (to match {match[0]} of shape {match[1].shape})" if match is not None else ""
        raise ValueError(
            f"{name} must have shape {_format_spec(spec)}, got shape {x.shape}{against}"
        )


def check_broadcastable(x: np.ndarray, name: str, target: tuple[int, ...], target_name: str) -> None:
    """Raise ``ValueError`` unless ``x`` broadcasts to ``target`` without enlarging it."""
    try:
        ok = np.broadcast_shapes(x.shape, target) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} of shape {x.shape} does not broadcast to the shape of "
            f"{target_name}, {tuple(target)}"
        )


def check_mask(mask, target: tuple[int, ...], target_name: str, name: str = "mask") -> np.ndarray:
    """Return ``mask`` as a boolean array that broadcasts to ``target``.

    Masks are boolean on purpose: an additive float mask (``0`` / ``-inf``) and a
    "may attend" mask mean opposite things, so a non-boolean mask is a
    ``TypeError`` rather than a guess.
    """
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise TypeError(
            f"{name} must be a boolean array (True = may attend), got dtype "
            f"{arr.dtype} (shape {arr.shape}); pass additive scores as bias instead"
        )
    check_broadcastable(arr, name, target, target_name)
    return arr


def batch_shape(*named: tuple[str, np.ndarray, int]) -> tuple[int, ...]:
    """Broadcast the leading (batch) axes of several arrays, naming them on failure.

    Each entry is ``(name, array, core_ndim)``: the last ``core_ndim`` axes are
    the array's own, the rest are batch axes.
    """
    shapes = [arr.shape[: arr.ndim - core] for _, arr, core in named]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listing = ", ".join(f"{name} {arr.shape}" for name, arr, _ in named)
        raise ValueError(f"batch axes do not broadcast: {listing}") from None


def check_real(value, name: str, dtype=np.float64, *, minimum=None, positive: bool = False,
               reciprocal: bool = False):
    """Return the real scalar ``value`` as a number of ``dtype``, or raise.

    ``TypeError`` unless ``value`` is a real number (``int``, ``float`` or a
    numpy real scalar; not ``bool``, not a string).  ``ValueError`` unless it
    is finite, ``> 0`` with ``positive``, ``>= minimum`` when given, and still
    finite (and still ``> 0`` with ``positive``, and with a finite reciprocal
    with ``reciprocal``) once rounded to ``dtype``, the dtype the computation
    will use: ``1e-46`` is 0 in float32 and ``1e5`` is ``inf`` in float16.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {describe(value)}")
    as_float = float(value)
    if not np.isfinite(as_float):
        raise ValueError(f"{name} must be a finite number, got {describe(value)}")
    if positive and not as_float > 0:
        raise ValueError(f"{name} must be a number > 0, got {describe(value)}")
    if minimum is not None and as_float < minimum:
        raise ValueError(f"{name} must be a number >= {minimum}, got {describe(value)}")
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        cast = dtype.type(as_float)
        bad = not np.isfinite(cast) or (as_float != 0 and cast == 0)
        if reciprocal and not bad:
            bad = not np.isfinite(dtype.type(1) / cast)
    if bad:
        what = "and its reciprocal finite and nonzero " if reciprocal else "and nonzero "
        raise ValueError(
            f"{name} = {describe(value)} is not representable in {dtype}, the dtype it is used in "
            f"(it must be finite {what if as_float != 0 else ''}there; "
            f"{dtype} spans {np.finfo(dtype).tiny:.3g} to {np.finfo(dtype).max:.3g})"
        )
    return cast


def check_positive(value, name: str, dtype=np.float64) -> float:
    """Return ``value`` as a float, raising unless a real number, finite and > 0 in ``dtype``."""
    return float(check_real(value, name, dtype, positive=True))


def check_fits(x: np.ndarray, name: str, dtype) -> None:
    """Raise ``ValueError`` if a finite entry of ``x`` overflows when cast to ``dtype``."""
    dtype = np.dtype(dtype)
    if x.dtype.itemsize <= dtype.itemsize or x.size == 0:
        return
    big = np.finfo(dtype).max
    finite = np.isfinite(x)
    # |x| > max rounds to inf unless it lies within half an ulp of max; be strict.
    if np.any(np.abs(x, where=finite, out=np.zeros(x.shape, x.dtype)) > big):
        raise ValueError(
            f"{name} ({x.dtype}, shape {x.shape}) has entries beyond the largest {dtype} "
            f"number {big:.4g}, and {dtype} is the dtype it is used in"
        )


def check_finite(x: np.ndarray, name: str, *, neg_inf: bool = False) -> None:
    """Raise ``ValueError`` if ``x`` holds NaN or ``+-inf`` (``-inf`` allowed with ``neg_inf``)."""
    if neg_inf:
        # NaN < inf is False, so one comparison catches both NaN and +inf.
        ok = bool((x < np.inf).all())
    else:
        ok = bool(np.isfinite(x).all())
    if not ok:
        bad = np.isnan(x) | (x == np.inf) if neg_inf else ~np.isfinite(x)
        count = int(np.count_nonzero(bad))
        first = tuple(int(i) for i in np.argwhere(bad)[0]) if x.ndim else ()
        value = x[first] if x.ndim else x[()]
        what = "NaN or +inf (-inf is allowed: it means masked)" if neg_inf else "NaN, +inf or -inf"
        raise ValueError(
            f"{name} must not contain {what}; got {count} such "
            f"entr{'y' if count == 1 else 'ies'} (the first, {float(value)}, at index {first}) "
            f"in an array of shape {x.shape}"
        )


def _integer(value, name: str) -> int:
    """``value`` as a Python int: ``TypeError`` unless an integer (``bool`` and floats are not)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {describe(value)}") from None


def check_count(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int: ``TypeError`` unless an integer, ``ValueError`` below ``minimum``.

    For lengths, widths and counts (``n``, ``d``, ``num_heads``...); booleans,
    floats (even ``2.0``) and strings are not counts.
    """
    value = _integer(value, name)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_bool(value, name: str) -> bool:
    """Return ``value`` as a bool: ``TypeError`` unless ``True`` or ``False`` (Python or numpy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {describe(value)}")
    return bool(value)


def check_choice(value, name: str, choices) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``choices`` (compared with ``==``, strings only)."""
    if not (isinstance(value, str) or value is None) or value not in choices:
        listing = ", ".join(str(c) for c in choices)
        raise ValueError(f"{name} must be one of {listing}, got {describe(value)}")


def check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    """Return ``dtype`` as a numpy floating dtype, ``TypeError`` for any other."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a numpy floating dtype, got {describe(dtype)}") from None
    if dt.kind != "f":
        raise TypeError(f"{name} must be a floating dtype (float16, float32, float64...), got {dt}")
    return dt


def check_generator(rng, name: str = "rng") -> None:
    """Raise ``TypeError`` unless ``rng`` is a ``numpy.random.Generator``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator, got {type(rng).__name__}")


def check_axis(axis, ndim: int, name: str) -> int:
    """Return ``axis`` as a non-negative axis of an array of ``ndim`` axes called ``name``.

    ``TypeError`` unless an integer (not a bool); ``ValueError`` out of range.
    """
    axis = _integer(axis, "axis")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis = {axis} is out of range for {name} with {ndim} axes (need {-ndim} <= axis < {ndim})")
    return axis % ndim
