"""The machinery of :mod:`attncore.practice`: cases, outcomes, comparison and display.

An exercise is a :class:`Spec`: the reference (attncore's own function), the cases
it is graded on, and the known wrong variants (:class:`Mistake`), each with the id
a teacher's script can read and the explanation a student reads.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

MAX_SHOWN = 30  # arrays with more entries are described by shape, dtype and how they were drawn


@dataclass(frozen=True)
class Case:
    """The positional arguments of one call, and a few words on what the case tests."""

    args: tuple
    note: str


@dataclass(frozen=True)
class Outcome:
    """What a call gave: a value, or the exception it raised; ``mutated``: it changed an input."""

    value: Any = None
    error: BaseException | None = None
    mutated: bool = False


@dataclass(frozen=True)
class Mistake:
    """A known wrong variant: ``variant`` has the exercise's signature and computes the mistake.

    ``claim`` names the row of book/claims.yml whose ``catches`` names the same wrong variant.
    """

    id: str
    why: str
    variant: Callable[..., Any]
    claim: str | None = None


def _same_inputs(before, after) -> bool:
    if isinstance(before, np.ndarray):
        return isinstance(after, np.ndarray) and before.shape == after.shape and \
            bool(np.array_equal(before, after, equal_nan=True))
    if isinstance(before, (list, tuple)):
        return len(before) == len(after) and all(_same_inputs(a, b) for a, b in zip(before, after))
    return True


def as_float(x: np.ndarray) -> np.ndarray:
    """Integers and booleans as float64; floating arrays unchanged (the dtype rule of the exercises)."""
    x = np.asarray(x)
    return x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64)


def tolerance(dtype) -> float:
    """Relative tolerance of a right answer computed in ``dtype`` by another route."""
    return 1e-4 if np.finfo(dtype).bits <= 32 else 1e-7


@dataclass(frozen=True)
class Spec:
    """One exercise: ``reference(*case.args)`` is right; ``kind`` is "array", "mask", "index",
    "scalar" or "sympy" (how results are compared)."""

    title: str
    params: tuple[str, ...]
    reference: Callable[..., Any]
    cases: Callable[[], list[Case]]
    mistakes: tuple[Mistake, ...]
    kind: str = "array"
    compare_hook: Callable[..., Any] | None = field(default=None, compare=False)
    values_hook: Callable[..., Any] | None = field(default=None, compare=False)

    def run(self, fn, case: Case) -> Outcome:
        """Call ``fn`` on copies of the case's arguments (numpy warnings off: the values tell)."""
        args = copy.deepcopy(case.args)
        try:
            with np.errstate(all="ignore"):
                value = fn(*args)
        except Exception as error:  # noqa: BLE001 - the reader's code may raise anything
            return Outcome(error=error)
        return Outcome(value=value, mutated=not _same_inputs(case.args, args))

    def compare(self, expected: Outcome, got: Outcome, case: Case):
        """``None`` if ``got`` is right, else ``(mistake id or None, explanation)``."""
        if got.error is not None:
            return None, "your function raised an error on this input (its message is above)."
        if self.compare_hook is not None:
            return self.compare_hook(expected.value, got.value, case)
        return compare_arrays(expected.value, got.value, self.kind) or (
            ("mutates_input", "the result is right, but your function changed its input in place "
             "(for example `x -= x.max()`); write `x = x - ...` so the caller's array is left alone.")
            if got.mutated else None)

    def same(self, variant: Outcome, got: Outcome, case: Case) -> bool:
        """Whether a wrong variant's outcome is the reader's: the same values, or the same error (same type and
        message: the same operation failing on the same shapes)."""
        if variant.error is not None or got.error is not None:
            return type(variant.error) is type(got.error) and str(variant.error) == str(got.error)
        if self.values_hook is not None:
            a, b = self.values_hook(variant.value, case), self.values_hook(got.value, case)
            return a is not None and b is not None and close(a, b, loose=True)
        return close(variant.value, got.value, loose=True)

    def show(self, value) -> str:
        return show(value)

    def show_input(self, value) -> str:
        return show(value)

    def detail(self, expected: Outcome, got: Outcome) -> str:
        return difference(expected.value, got.value, self.kind) if got.error is None else ""


def close(a, b, *, loose: bool = False) -> bool:
    """Same shape and values within the tolerance of ``a``'s dtype (``loose``: 1e-3, NaN equal to NaN)."""
    try:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype == object or b.dtype == object:
            return False
        if a.dtype == bool or b.dtype == bool:
            return bool(np.array_equal(a, b))
        a, b = as_float(a), as_float(b)
    except (TypeError, ValueError):
        return False
    # the tolerance of the less precise of the two (float32: 1e-4), taken before both become float64
    tol = 1e-3 if loose else max(tolerance(np.result_type(x.dtype, np.float32)) for x in (a, b))
    a, b = a.astype(np.float64), b.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0)))
    return bool(np.allclose(b, a, rtol=tol, atol=tol * scale, equal_nan=loose))


def compare_arrays(expected, got, kind: str):
    """``None`` if ``got`` equals ``expected`` in shape, values and dtype, else ``(id, explanation)``."""
    e = np.asarray(expected)
    try:
        a = np.asarray(got)
    except (TypeError, ValueError):
        return None, f"it returned {type(got).__name__}, not an array."
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        return None, f"it returned {type(got).__name__} holding {a.dtype} entries, not numbers."
    if a.shape != e.shape:
        return "wrong_shape", (f"the shape is {a.shape}, expected {e.shape}: check which axes you "
                               "reshape, transpose, index or sum over.")
    if kind == "mask":
        return _compare_mask(e, a)
    if not close(e if e.dtype != bool else e.astype(float), a):
        finite = np.isfinite(as_float(a).astype(np.float64))
        if not finite.all() and np.isfinite(as_float(e)).all():
            return "not_finite", ("it returned inf or nan where the answer is finite: an exp "
                                  "overflowed, or something was divided by 0.")
        return None, "the values differ."
    return _compare_dtype(e, a)


def _compare_mask(e, a):
    if not np.array_equal(a.astype(bool) if a.dtype != bool else a, e):
        return None, "the entries differ."
    if a.dtype != bool:
        return "not_boolean", (f"the pattern is right but the dtype is {a.dtype}: return a boolean "
                               "array (for example `np.tri(n, dtype=bool)`); a 0/1 float array used as "
                               "an index or with `~` does something else.")
    return None


def _compare_dtype(e, a):
    if np.issubdtype(e.dtype, np.floating) and a.dtype != e.dtype:
        return "dtype_changed", (f"the values are right but the dtype is {a.dtype}, expected {e.dtype}: "
                                 "keep the input's floating dtype (float32 in, float32 out); do not convert "
                                 "with `np.asarray(x, dtype=float)` or `np.float64(...)`, and take square roots "
                                 "of integers with `math.sqrt` (`np.sqrt(4)` is a float64 scalar, which turns "
                                 "float32 arrays into float64).")
    if np.issubdtype(e.dtype, np.integer) and not np.issubdtype(a.dtype, np.integer):
        return "dtype_changed", f"the values are right but the dtype is {a.dtype}: return integers."
    return None


def show(value) -> str:
    """A short text for a value: small arrays in full, large ones by shape and dtype."""
    if callable(value):
        doc = (getattr(value, "__doc__", None) or "").strip().splitlines()
        return getattr(value, "__name__", "a function") + (f" ({doc[0]})" if doc else "")
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, np.ndarray):
        if value.size > MAX_SHOWN:
            return f"an array of shape {value.shape} ({value.dtype})"
        text = np.array2string(value.astype(int) if value.dtype == bool else value, precision=4,
                               separator=", ", max_line_width=100, floatmode="maxprec")
        return text + ("" if value.dtype == np.float64 else f"  ({value.dtype}"
                       + (", 1 = True)" if value.dtype == bool else ")"))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    return str(value)


def difference(expected, got, kind: str) -> str:
    """One line locating the first wrong entry (for a mask: which query sees which key)."""
    try:
        e, a = np.asarray(expected), np.asarray(got)
    except (TypeError, ValueError):
        return ""
    if e.shape != a.shape or e.ndim == 0 or a.dtype == object:
        return ""
    if kind == "mask" and e.ndim == 2:
        wrong = np.argwhere(a.astype(bool) != e)
        if wrong.size:
            i, j = wrong[0]
            return (f"your mask lets query {i} see key {j}" if e[i, j] == 0 else
                    f"your mask hides key {j} from query {i}, which may see it") + " (rows are queries, columns keys)."
        return ""
    if e.size <= 6:  # the two values are shown in full
        return ""
    with np.errstate(all="ignore"):
        gap = np.abs(as_float(a).astype(np.float64) - as_float(e).astype(np.float64))
    gap = np.where(np.isnan(gap), np.inf, gap)
    index = tuple(int(i) for i in np.unravel_index(np.argmax(gap), gap.shape))
    return f"the largest difference is at index {index}: expected {show(e[index])}, returned {show(a[index])}."


def _parts(value, n):
    """``value`` as a list of ``n`` arrays (a tuple or list of them, a NamedTuple too), else ``None``."""
    if not isinstance(value, (tuple, list)) or len(value) != n:
        return None
    try:
        return [np.asarray(v) for v in value]
    except (TypeError, ValueError):
        return None


def _kind(value) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__ + (f" of shape {value.shape}" if isinstance(value, np.ndarray) else "")


@dataclass(frozen=True)
class GradSpec(Spec):
    """An exercise whose result is a tuple of arrays, one per name in ``fields`` (``dq, dk, dv``...).

    Each array is compared as in :class:`Spec`; a diagnosis names the field at fault, and a
    wrong variant matches when every one of its arrays matches the reader's.
    """

    fields: tuple[str, ...] = ()

    def compare(self, expected: Outcome, got: Outcome, case: Case):
        if got.error is not None:
            return super().compare(expected, got, case)
        parts = _parts(got.value, len(self.fields))
        if parts is None:
            return None, (f"return the {len(self.fields)} gradients ({', '.join(self.fields)}) as a tuple; "
                          f"it returned {_kind(got.value)}.")
        found = [(name, compare_arrays(e, a, "array")) for name, e, a in zip(self.fields, expected.value, parts)]
        found = [(name, p) for name, p in found if p is not None]
        # wrong values first: a right value in the wrong dtype is reported only when nothing else is wrong
        found.sort(key=lambda item: item[1][0] == "dtype_changed")
        if found:
            name, (mistake, why) = found[0]
            return mistake, f"{name}: {why}"
        return ("mutates_input", "the gradients are right, but your function changed an input in place "
                "(for example `g *= a`); write `g = g * a` so the caller's arrays are left alone.") \
            if got.mutated else None

    def same(self, variant: Outcome, got: Outcome, case: Case) -> bool:
        """Same arrays; or the same error (same type and message: the same operation on the same shapes)."""
        if variant.error is not None or got.error is not None:
            return type(variant.error) is type(got.error) and str(variant.error) == str(got.error)
        a, b = _parts(variant.value, len(self.fields)), _parts(got.value, len(self.fields))
        return a is not None and b is not None and all(close(x, y, loose=True) for x, y in zip(a, b))

    def show(self, value) -> str:
        parts = _parts(value, len(self.fields))
        if parts is None:
            return show(value)
        lines = []
        for name, part in zip(self.fields, parts):
            first, *rest = show(part).splitlines() or [""]
            lines += [f"{name} = {first}"] + [" " * (len(name) + 3) + line for line in rest]
        return "\n".join(lines)

    def detail(self, expected: Outcome, got: Outcome) -> str:
        parts = _parts(got.value, len(self.fields)) if got.error is None else None
        if parts is None:
            return ""
        right = [name for name, e, a in zip(self.fields, expected.value, parts) if close(e, a)]
        wrong = [name for name in self.fields if name not in right]
        return "wrong: " + ", ".join(wrong) + ("; right: " + ", ".join(right) if right else "") + "."


def _shapes(value, n):
    """``value`` as a tuple of ``n`` shapes (tuples of ints), else ``None``."""
    if not isinstance(value, (tuple, list)) or len(value) != n:
        return None
    out = []
    for shape in value:
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in shape):
            return None
        out.append(tuple(int(s) for s in shape))
    return tuple(out)


@dataclass(frozen=True)
class ShapeSpec(Spec):
    """An exercise whose result is a tuple of shapes, one per name in ``fields``."""

    fields: tuple[str, ...] = ()

    def compare(self, expected: Outcome, got: Outcome, case: Case):
        if got.error is not None:
            return super().compare(expected, got, case)
        shapes = _shapes(got.value, len(self.fields))
        if shapes is None:
            return None, (f"return a tuple of {len(self.fields)} shapes ({', '.join(self.fields)}), each a "
                          f"tuple of ints; it returned {got.value!r:.80}.")
        for name, e, a in zip(self.fields, _shapes(expected.value, len(self.fields)), shapes):
            if e != a:
                return None, f"the shape of {name} is {e}, not {a}."
        return None

    def same(self, variant: Outcome, got: Outcome, case: Case) -> bool:
        if variant.error is not None or got.error is not None:
            return type(variant.error) is type(got.error)
        a = _shapes(variant.value, len(self.fields))
        return a is not None and a == _shapes(got.value, len(self.fields))

    def show(self, value) -> str:
        shapes = _shapes(value, len(self.fields))
        if shapes is None:
            return show(value)
        return ", ".join(f"{name} {shape}" for name, shape in zip(self.fields, shapes))

    def detail(self, expected: Outcome, got: Outcome) -> str:
        return ""
