"""What an error message must do, checked as facts rather than as words.

The guide's rule: bad input gets a ``ValueError``/``TypeError`` that names the argument, the
expected and the actual shape or dtype (or value), and the remedy where there is one.  The
tests check exactly those facts, so a message can be reworded freely as long as it keeps
them, and a message that drops one (or names the wrong argument, or the wrong shape) fails:

* ``name``, ``names``: each argument appears as a whole word (``"x"`` is not found in
  ``"xx"`` or in ``"XXxXX"``); a one-letter name is not found inside a shape spec such as
  ``(..., n, d)``, so ``n`` must be named outside it; ``not_names``: arguments that must not be
  named (a map that was not used, another argument);
* ``shapes``: a tuple is an actual shape, found as numpy prints it (``(4,)``, ``(2, 3)``); a
  string is an expected shape spec or axis label (``"(..., n, d)"``, ``"2n-1"``); either is
  found as a whole token, with the spaces inside it ignored;
* ``dtypes``: each dtype's name appears as a word (``float32``);
* ``values``: each value appears as a whole token (``5`` is not found in ``15``, ``0.5`` or
  ``5e3``); a string value as a whole word, quoted or not;
* ``options``: each valid choice appears (the remedy of a bad choice);
* ``says``: each key of :data:`SAYS` (what is wrong, e.g. ``"out of range"``) is expressed by
  one of the phrasings the key allows;
* ``remedy``: ``(kind, *objects)``; some clause of the message (the text between ``;`` or
  sentence ends) proposes a remedy of the ``kind`` (a key of :data:`REMEDIES`) and names each of
  the objects (the arguments to change, or the dtype to pass).

Every message is also shorter than :data:`MAX_MESSAGE` characters (arrays are described, never
printed whole).  No test pins a message's exact words: no chapter or notebook quotes one (a
page that did would get a test of that quotation beside it).
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import numpy as np
import pytest

#: Longest message (characters): shapes and a few entries, never a whole array.
MAX_MESSAGE = 500

#: What is wrong, each as the phrasings that say it (regular expressions, any one suffices).
SAYS = {
    "out of range": r"out of range|outside|not in|must (?:lie|be) (?:in|between)|beyond|exceeds|too (?:large|big|small)|"
                    r"\bnegative\b|>=|<=|\bbelow\b|\babove\b",
    "missing": r"missing|absent|repeat|duplicate|more than once|exactly once|twice",
    "1-d": r"1-d|1-D|one-dimensional|one axis|1 axis|ndim 1|rank 1|vector",
    "odd": r"\bodd\b|2\s*[nK]\s*\+\s*1|2\s*n\s*-\s*1",
    "even": r"\beven\b|multiple of 2|divisible by 2",
    "divisible": r"divisib|divide|divisor|multiple of|a \* b = n",
    "square": r"square|\(\.\.\.,\s*(\w),\s*\1\)|\(\s*(\w),\s*\2\)",
    "overflow": r"overflow|too (?:large|big)|beyond the largest|exceed|larger than the largest|not representable|\binf\b",
    "not representable": r"not representable|cannot be represented|rounds to (?:0|zero|inf)|overflow|underflow",
    "reciprocal": r"reciprocal|1\s*/",
    "finite": r"NaN|\binf\b|finite",
    "integer": r"integer|\bint\b",
    "boolean": r"\bbool(?:ean)?\b|True or False",
    "real": r"real|float|number",
    "not empty": r"at least one|non-?empty|empty|no entr|no rows|\bzero\b",
    "at least two": r"at least (?:two|2)|two or more|more than one|>= 2",
    "held out": r"hold(?:s)? out|held out|left out|at least one .*(?:False|out)",
    "undefined": r"undefined|not defined|cannot|can't|no default",
    "diverged": r"diverg|blew up|not finite|nan|inf",
    "broadcast": r"broadcast",
    "different": r"differ|mismatch|not the same|unequal|do not match",
    "masked": r"mask",
    "smallest": r"smallest|minimum|most negative|-9223372036854775808|-2\*\*63",
    "normaliser": r"normali[sz]er|denominator",
    "numerator": r"numerator",
    "variance": r"variance|constant|zero spread",
}

#: Remedies, as the phrasings that propose them (regular expressions, any one suffices).
REMEDIES = {
    "shrink": r"\bdown\b|\b(?:reduce|smaller|shrink|divide|rescale|lower)",
    "pass": r"\b(?:pass|use|give|supply|provide|instead|set)\b",
    "wider": r"\b(?:pass|use|cast|convert|instead)\b|\bwider\b",
    "lower": r"\b(?:lower|reduce|smaller|decrease)",
    "pad": r"\b(?:pad|truncate|crop|cut|trim)",
}

_SPEC = re.compile(r"(?<![\w\])])\(\s*(?:(?:\.\.\.|[\w+\-*/]+)\s*(?:,\s*(?:\.\.\.|[\w+\-*/]+)\s*)*,?\s*)?\)")
_CLAUSES = re.compile(r";|\. ")


def _word(text: str) -> str:
    """``text`` as a pattern that matches it only as a whole token."""
    head = r"(?<!\w)" if re.match(r"\w", text) else ""
    tail = r"(?!\w)" if re.search(r"\w$", text) else ""
    return head + re.escape(text) + tail


def _number(value) -> str:
    """A number as a pattern that does not match inside another number (5 in 15, 0.5 or 5e3)."""
    return r"(?<![\w\-])(?<!\d\.)" + re.escape(str(value)) + r"(?![\w]|\.\d)"


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def message_of(error) -> str:
    """The message of an exception or of ``pytest.raises``'s ``ExceptionInfo``."""
    return str(getattr(error, "value", error))


def assert_message(error, name=None, *, names=(), not_names=(), shapes=(), dtypes=(), values=(), options=(), says=(),
                   remedy=None, no_remedy=None):
    """Assert the facts a message must state (see the module docstring); returns the message.

    ``no_remedy=(kind, *objects)``: no clause proposes that remedy (e.g. float64 for float64 input).
    """
    message = message_of(error)
    assert len(message) < MAX_MESSAGE, f"message of {len(message)} characters: {message[:200]}..."
    outside_specs = _SPEC.sub(" ", message)
    for arg in ([name] if name is not None else []) + list(names):
        # a plain identifier is looked for outside the shape specs, a compound name as written
        where = outside_specs if re.fullmatch(r"\w+", arg) else message
        assert re.search(_word(arg), where), f"argument {arg!r} not named in {message!r}"
    for arg in not_names:
        assert not re.search(_word(arg), message), f"{arg!r} named in {message!r}"
    for shape in shapes:
        want = _squeeze(str(tuple(shape)) if not isinstance(shape, str) else shape)
        pattern = r"\s*".join(re.escape(c) for c in want)
        pattern = (r"(?<!\w)" if re.match(r"\w", want) else r"(?<![\w)])") + pattern + r"(?![\w(])"
        assert re.search(pattern, message), f"shape {shape!r} not in {message!r}"
    for dtype in dtypes:
        assert re.search(_word(np.dtype(dtype).name), message), f"dtype {np.dtype(dtype).name} not in {message!r}"
    for value in values:
        pattern = _word(value) if isinstance(value, str) else _number(value)
        assert re.search(pattern, message), f"value {value!r} not in {message!r}"
    for option in options:
        assert re.search(_word(option), message), f"option {option!r} not in {message!r}"
    for key in [says] if isinstance(says, str) else says:
        assert re.search(SAYS[key], message), f"{message!r} does not say {key!r}"
    if remedy is not None:
        kind, *objects = remedy
        clauses = [c for c in _CLAUSES.split(message) if re.search(REMEDIES[kind], c)]
        assert any(all(re.search(_word(o), c) for o in objects) for c in clauses), \
            f"{message!r} proposes no remedy {kind!r} naming {objects}"
    if no_remedy is not None:
        kind, *objects = no_remedy
        clauses = [c for c in _CLAUSES.split(message) if re.search(REMEDIES[kind], c)]
        assert not any(all(re.search(_word(o), c) for o in objects) for c in clauses), \
            f"{message!r} proposes the remedy {kind!r} naming {objects}, which does not apply"
    return message


@contextmanager
def raises_message(error, name=None, **facts):
    """``pytest.raises(error)`` whose message states ``facts`` (:func:`assert_message`)."""
    with pytest.raises(error) as info:
        yield info
    assert_message(info, name, **facts)
