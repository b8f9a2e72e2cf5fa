"""Practice exercises of the course, graded the way the course checks its own code.

``check(exercise, fn)`` runs the reader's ``fn`` on a fixed list of cases (targeted
edge cases first, then random ones drawn with explicit seeds) and compares each
result with attncore's own function.  It stops at the first case that fails and
says what a student can act on: the (small) input, the expected and the returned
value, and the likely mistake, found by running the known wrong variants of the
exercise on the same cases and reporting the one the reader's output matches.

>>> import numpy as np
>>> from attncore.practice import check
>>> def softmax(x, axis=-1):
...     e = np.exp(x - np.max(x, axis=axis, keepdims=True))
...     return e / e.sum(axis=axis, keepdims=True)
>>> result = check("softmax", softmax)
>>> bool(result), result.mistake
(True, None)
>>> def naive(x, axis=-1):
...     e = np.exp(x)
...     return e / e.sum(axis=axis, keepdims=True)
>>> with np.errstate(all="ignore"):
...     wrong = check("softmax", naive)
>>> bool(wrong), wrong.mistake
(False, 'no_max_shift')

The cases are fixed (seeded), so a verdict never changes between runs: a wrong
function cannot pass by luck on one run and fail on the next.  A listed wrong
variant fails on every run (``tests/test_practice.py`` shows it for each one);
an unlisted wrong function passes only if it agrees with the reference on every
case, targeted edge cases included.  Results keep the floating dtype of the input
(float32 in, float32 out; integers are computed in float64).

Only numpy is needed; sympy is imported when a proof exercise is graded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from attncore._exercises import EXERCISE_TABLE

__all__ = ["EXERCISES", "Result", "check"]

#: Each exercise's id and its title, in the order of the practice notebooks.
EXERCISES: dict[str, str] = {name: spec.title for name, spec in EXERCISE_TABLE.items()}

_TODO = "not implemented yet"
# problems found when the values are right: no wrong variant explains them
_RIGHT_VALUES = frozenset({"dtype_changed", "not_boolean", "mutates_input", "not_simplified"})


@dataclass(frozen=True)
class Result:
    """The verdict of :func:`check`: truthy when the function passed.

    ``status`` is ``"passed"``, ``"failed"`` or ``"not implemented"``; ``mistake`` is
    the id of the known mistake the function's output matches (``None`` when it
    passed, or when no known mistake matched); ``str(result)`` is the diagnosis.
    """

    exercise: str
    status: str
    mistake: str | None
    message: str

    def __bool__(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return self.message


def check(exercise: str, fn: Callable[..., Any]) -> Result:
    """Grade ``fn`` on the exercise ``exercise`` (an id of :data:`EXERCISES`).

    Parameters
    ----------
    exercise : str
        The exercise id, e.g. ``"softmax"``, ``"causal_mask"``, ``"attention"``.
    fn : callable
        The reader's function, with the signature the exercise states.

    Returns
    -------
    Result
        Truthy on a pass; ``str()`` of it is one line on a pass, the diagnosis of
        the first failing case otherwise.

    Raises
    ------
    ValueError
        If ``exercise`` is not an exercise id (the message lists them).
    TypeError
        If ``fn`` is not callable.
    """
    if exercise not in EXERCISE_TABLE:
        raise ValueError(f"exercise must be one of {sorted(EXERCISE_TABLE)}, got {exercise!r}")
    if not callable(fn):
        raise TypeError(f"fn must be the function to grade, got {type(fn).__name__}: {fn!r}")
    spec = EXERCISE_TABLE[exercise]
    cases = spec.cases()
    expected = []
    for number, case in enumerate(cases):
        expected.append(spec.run(spec.reference, case))
        got = spec.run(fn, case)
        if isinstance(got.error, NotImplementedError):
            return Result(exercise, "not implemented", None, f"{exercise}: {_TODO} (replace `raise "
                          "NotImplementedError` with your code, then run the cell again)")
        problem = spec.compare(expected[-1], got, case)
        if problem is not None:
            reason = _diagnose(spec, cases[: number + 1], expected, got, problem)
            return Result(exercise, "failed", reason[0],
                          _failure(exercise, spec, case, number, len(cases), expected[-1], got, reason))
    return Result(exercise, "passed", None, f"{exercise}: passed ({len(cases)} cases)")


def _diagnose(spec, cases, expected, got, problem):
    """``(mistake id, explanation)``: the first known wrong variant that agrees with the
    reference on the cases the function passed and with the function on the failing one;
    else the generic problem the comparison found.  Right values in a wrong form (dtype, a
    changed input, a form sympy cannot simplify) are reported as such."""
    if problem[0] in _RIGHT_VALUES:
        return problem
    for mistake in spec.mistakes:
        outputs = [spec.run(mistake.variant, case) for case in cases]
        if all(spec.compare(ref, out, case) is None for ref, out, case in zip(expected, outputs[:-1], cases)) \
                and spec.same(outputs[-1], got, cases[-1]):
            why = mistake.why + (f" (The claims ledger's row {mistake.claim} rejects the same variant.)"
                                 if mistake.claim else "")
            return mistake.id, why
    return problem


def _labelled(label, text):
    """``label`` then ``text``; a text of several lines starts on the next line, indented."""
    if "\n" not in text:
        return label + text
    return label.rstrip() + "\n" + "\n".join("      " + line for line in text.splitlines())


def _failure(exercise, spec, case, number, total, expected, got, reason):
    """The diagnosis printed for the first failing case: input, expected, returned, likely mistake."""
    mistake, why = reason
    lines = [f"{exercise}: not right yet, case {number + 1} of {total} ({case.note})."]
    shown = [(name, spec.show_input(value)) for name, value in zip(spec.params, case.args)]
    if any("\n" in text for _, text in shown):
        lines += [_labelled(f"  input {name} = ", text) for name, text in shown]
    else:
        lines.append("  input:    " + ", ".join(f"{name} = {text}" for name, text in shown))
    lines.append(_labelled("  expected: ", spec.show(expected.value)))
    if got.error is not None:
        lines.append(f"  returned: nothing, it raised {type(got.error).__name__}: {str(got.error)[:200]}")
    else:
        lines.append(_labelled("  returned: ", spec.show(got.value)))
    detail = spec.detail(expected, got)
    if detail:
        lines.append("  " + detail)
    unknown = ("error: read its message against the input above (an axis or a shape your code assumes?)"
               if got.error is not None else "output: compare the expected and returned values.")
    lines.append(f"  likely mistake ({mistake}): {why}" if mistake else f"  {why} No known mistake matches this {unknown}")
    return "\n".join(lines)
