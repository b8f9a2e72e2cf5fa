"""Validation at the boundary: one place that turns bad input into clear errors.

Every public function of :mod:`attncore` calls these helpers before computing,
so a wrong shape or dtype raises an error that names the argument, the expected
shape and the actual one, instead of being broadcast into a wrong answer.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

ShapeSpec = Sequence["int | str"]


def _format_spec(spec: ShapeSpec) -> str:
    inner = ", ".join(str(s) for s in spec)
    return f"({inner},)" if len(spec) == 1 else f"({inner})"


def as_float_array(x, name: str) -> np.ndarray:
    """Return ``x`` as a real floating array, keeping float16/32/64 as they are.

    Integers become float64 (as in numpy's own true division); booleans, complex
    numbers and objects raise ``TypeError`` because none of them is a valid
    activation, weight or score.
    """
    arr = np.asarray(x)
    if arr.dtype.kind == "f":
        return arr
    if arr.dtype.kind in "iu":
        return arr.astype(np.float64)
    raise TypeError(
        f"{name} must be an array of real numbers, got dtype {arr.dtype} "
        f"(shape {arr.shape})"
    )


def check_shape(x: np.ndarray, name: str, spec: ShapeSpec) -> None:
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
        raise ValueError(
            f"{name} must have shape {_format_spec(spec)}, got shape {x.shape}"
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


def check_mask(mask, target: tuple[int, ...], target_name: str) -> np.ndarray:
    """Return ``mask`` as a boolean array that broadcasts to ``target``.

    Masks are boolean on purpose: an additive float mask (``0`` / ``-inf``) and a
    "may attend" mask mean opposite things, so a non-boolean mask is a
    ``TypeError`` rather than a guess.
    """
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise TypeError(
            f"mask must be a boolean array (True = may attend), got dtype "
            f"{arr.dtype} (shape {arr.shape}); pass additive scores as bias instead"
        )
    check_broadcastable(arr, "mask", target, target_name)
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


def check_positive(value: float, name: str) -> float:
    """Return ``value`` as a float, raising ``ValueError`` unless finite and > 0."""
    value = float(value)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def check_finite(x: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` if ``x`` holds NaN or ``+inf`` (``-inf`` is allowed)."""
    # NaN < inf is False, so one comparison catches both NaN and +inf.
    if not np.all(x < np.inf):
        raise ValueError(
            f"{name} must not contain NaN or +inf (shape {x.shape}); "
            "use a boolean mask (or -inf) to remove entries"
        )


def check_count(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int: ``TypeError`` unless an integer, ``ValueError`` below ``minimum``.

    For lengths, widths and counts (``n``, ``d``, ``num_heads``...); booleans and
    floats are not counts.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value
