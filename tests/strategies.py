"""Hypothesis strategies shared by the property tests."""

import numpy as np
from hypothesis import strategies as st

dtypes = st.sampled_from([np.float32, np.float64])
seeds = st.integers(min_value=0, max_value=2**32 - 1)
lengths = st.integers(min_value=1, max_value=7)
widths = st.integers(min_value=1, max_value=6)
batch_shapes = st.lists(st.integers(min_value=1, max_value=3), min_size=0, max_size=2).map(tuple)


@st.composite
def permutations(draw, n):
    """A permutation of range(n) as an int array."""
    return np.array(draw(st.permutations(range(n))), dtype=np.intp)


def normal(rng, shape, dtype, scale=1.0):
    """Standard normal numbers from ``rng`` with the given shape and dtype."""
    return (scale * rng.standard_normal(shape)).astype(dtype)


#: Tolerances per dtype for comparisons against an independent route.
_TOL = {
    np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6),
    np.dtype(np.float64): dict(rtol=1e-11, atol=1e-12),
}


def tol(dtype):
    """``rtol``/``atol`` keyword arguments suited to ``dtype``."""
    return _TOL[np.dtype(dtype)]
