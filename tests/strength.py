"""Helpers of the tests written to kill surviving mutants (tests/test_strength_*.py)."""

import re
import tracemalloc

import pytest


def raises_naming(exc, name, *fragments):
    """``pytest.raises(exc)`` for an error whose message starts with the argument's name.

    The team rule is that bad input gets an error naming the argument; a message
    that names another argument, or a mangled name, does not pass.  Each of
    ``fragments`` (a shape label such as ``"2n-1"``) must appear in the message too.
    """
    pattern = rf"^{re.escape(name)}(?!\w)" + "".join(rf"(?=.*{re.escape(f)})" for f in fragments)
    return pytest.raises(exc, match=re.compile(pattern, re.S))


def traced_peak(f, *args, **kwargs):
    """``(f(*args, **kwargs), peak)``: the result and the peak of the memory traced while it
    ran (numpy reports its array buffers to tracemalloc), for tests that a copy is not made."""
    tracemalloc.start()
    try:
        result = f(*args, **kwargs)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
