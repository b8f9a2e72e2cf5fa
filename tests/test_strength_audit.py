"""Checks added by the independent review of the mutants claimed equivalent (see the appendix
"How strong is the evidence"): each kills a mutant that the review found NOT equivalent.

The three differences are in rounding or memory, not in the mathematics, but they are real:

* ``astype(dtype, copy=False)`` on an operand of a matrix product: a copy (``copy=True``, or
  the keyword dropped) changes the memory layout numpy hands to the BLAS.  For a strided
  operand and a single query row, numpy then computes the vector-matrix product with a
  different kernel, and the result differs in the last bits.  The point of ``copy=False`` is
  to leave a large ``k`` or ``omega`` uncopied; the tests check that, with ``tracemalloc``
  (numpy reports its array buffers to it).
* ``attention`` drops the power ``2**gain`` that scales ``v`` when ``min |v| >= e**(B+1) T``
  (Notes: "g = 0 saves scaling V").  Keeping it (``gain = 1``, or a stricter test: ``>``,
  ``+ 2``, ``eps`` for ``log T``) changes the rounding of outputs that cancel into the
  subnormals (float64, one query, two keys, values near ``1e-307`` whose weighted sum
  cancels: e.g. ``-2.42e-322`` becomes ``-2.47e-322``), so the test checks that ``v`` is not
  scaled, at the boundary itself too.
* ``n >= 1024`` selects a contiguous copy of ``k^T`` for the score products.  At ``n = 1024``
  a one-row block (a GEMV) gives other bits with the other layout (float64, ``m = 1536``:
  blocks of 341 rows, the last has one), so the threshold is visible; the test checks the
  layout decision itself.
"""

import numpy as np
import pytest

from attncore import attention, attention_weights
from attncore._kernels import positive_random_features, trig_random_features
from strength import traced_peak


def peak_bytes(f):
    """The peak of the memory traced while ``f()`` runs (numpy's array buffers included)."""
    return traced_peak(f)[1]


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


def test_attention_does_not_copy_k_or_v():
    # One query, 50 000 keys, normalize="none" (no appended column, no power 2**gain): nothing
    # of the size of k is needed.  Killed: q, k, v = (a.astype(work, copy=False) ...) => copy=True / omitted
    # (for a strided k or v and one query row the copy also changes the bits: numpy's vector-matrix
    # product of a strided operand is not the BLAS one).
    rng = np.random.default_rng(3)
    k, v = rng.standard_normal((50_000, 16)), rng.standard_normal((50_000, 1))
    q = rng.standard_normal((1, 16))
    assert peak_bytes(lambda: attention(q, k, v, normalize="none")) < 0.5 * k.nbytes


