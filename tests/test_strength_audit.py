"""Checks added by the independent review of the mutants claimed equivalent (see the appendix
"How strong is the evidence"): each kills a mutant that the review found NOT equivalent.

The three differences are in rounding or memory, not in the mathematics, but they are real:

* ``astype(dtype, copy=False)`` on an operand of a matrix product: a copy (``copy=True``, or
  the keyword dropped) changes the memory layout numpy hands to the BLAS.  For a strided
  operand and a single query row, numpy then computes the vector-matrix product with a
  different kernel, and the result differs in the last bits.  The point of ``copy=False`` is
  to leave a large ``k`` or ``omega`` uncopied; the tests check that, with ``tracemalloc``
  (numpy reports its array buffers to it).
* ``n >= 1024`` selects a contiguous copy of ``k^T`` for the score products.  At ``n = 1024``
  a one-row block (a GEMV) gives other bits with the other layout (float64, ``m = 1536``:
  blocks of 341 rows, the last has one), so the threshold is visible; the test checks the
  layout decision itself.
"""

import tracemalloc

import numpy as np
import pytest

from attncore import attention, attention_weights
from attncore._kernels import positive_random_features, trig_random_features


def peak_bytes(f):
    """The peak of the memory traced while ``f()`` runs (numpy's array buffers included)."""
    tracemalloc.start()
    try:
        f()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_attention_weights_does_not_copy_k():
    # One query against 50 000 keys: the scores are 1/16 of the size of k, so a copy of k
    # (astype(..., copy=True)) more than doubles the peak.  Killed: copy=False => copy=True / omitted.
    rng = np.random.default_rng(0)
    k = rng.standard_normal((50_000, 16))
    q = rng.standard_normal((1, 16))
    assert peak_bytes(lambda: attention_weights(q, k)) < 0.5 * k.nbytes


@pytest.mark.parametrize("features", [positive_random_features, trig_random_features])
def test_random_features_do_not_copy_omega(features):
    # One row x against 50 000 projection rows: the features are 1/16 of the size of omega.
    # Killed: omega.T.astype(dtype, copy=False) => copy=True / omitted.
    rng = np.random.default_rng(1)
    omega = 0.1 * rng.standard_normal((50_000, 16))
    x = rng.standard_normal((1, 16))
    assert peak_bytes(lambda: features(x, omega)) < 0.5 * omega.nbytes


def test_attention_uses_contiguous_k_transposed_from_1024_query_rows(monkeypatch):
    # The documented layout switch (5-10% faster score GEMMs) happens at n = 1024, not later.
    # Killed: n >= 1024 => n > 1024 / n >= 1025.
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((1024, 3)), rng.standard_normal((8, 3)), rng.standard_normal((8, 2))
    laid_out = []
    real = np.ascontiguousarray

    def spy(a, *args, **kwargs):
        laid_out.append(np.shape(a))
        return real(a, *args, **kwargs)

    monkeypatch.setattr(np, "ascontiguousarray", spy)
    attention(q[:1023], k, v)
    assert (3, 8) not in laid_out
    attention(q, k, v)
    assert (3, 8) in laid_out
