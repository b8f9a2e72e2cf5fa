"""Checks added by the independent review of the mutants claimed equivalent (see the appendix
"How strong is the evidence"): each kills a mutant that the review found NOT equivalent.

The differences are in memory, not in the mathematics, but they are real: an operand cast
with ``astype(dtype, copy=False)`` is not copied when it already has the dtype, and the point
is to leave a large ``k``, ``v`` or ``omega`` uncopied.  A copy (``copy=True``, or the keyword
dropped) more than doubles the peak of the memory traced while the call runs (numpy reports
its array buffers to ``tracemalloc``), which is what the tests below measure:

* ``attention_weights`` does not copy ``k``;
* ``positive_random_features`` and ``trig_random_features`` do not copy ``omega``;
* ``attention`` with ``normalize="none"`` (no appended column) does not copy ``k`` or ``v``.
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


