"""Helpers of the tests written to kill surviving mutants (tests/test_strength_*.py); their
messages are checked with tests/messages.py."""

import tracemalloc


def traced_peak(f, *args, **kwargs):
    """``(f(*args, **kwargs), peak)``: the result and the peak of the memory traced while it
    ran (numpy reports its array buffers to tracemalloc), for tests that a copy is not made."""
    tracemalloc.start()
    try:
        result = f(*args, **kwargs)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
