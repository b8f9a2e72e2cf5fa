"""attncore.probe: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np
import pytest

from attncore.probe import linear_readout
from strength import raises_naming

# Four centred rows whose two columns are orthogonal, of norms 2 and 1: the singular values
# of the (already centred) features are exactly 2 and 1, and so is the spectral norm 2.
F = np.array([[1.0, 0.5], [-1.0, 0.5], [1.0, -0.5], [-1.0, -0.5]])
SECOND = F[:, 1] / np.linalg.norm(F[:, 1])   # unit direction of the smaller singular value


def test_readout_errors_name_the_argument():
    y = np.arange(4.0)
    with raises_naming(TypeError, "features"):
        linear_readout(F > 0, y)
    with raises_naming(ValueError, "features", "(n, d)"):
        linear_readout(np.arange(4.0), y)
    with raises_naming(TypeError, "targets"):
        linear_readout(F, y > 1)
    with raises_naming(ValueError, "targets", "(4,)"):
        linear_readout(F, np.arange(5.0))
    with raises_naming(TypeError, "rcond", "got str"):
        linear_readout(F, y, rcond="0.1")
    with raises_naming(ValueError, "rcond"):
        linear_readout(F, y, rcond=1.0)  # the cut-off must lie strictly inside (0, 1)


def test_readout_cutoff_uses_the_spectral_norm():
    # G = F / 4 has singular values 0.5 and 0.25, spectral norm 0.5, Frobenius norm 0.559.
    # With rcond = 0.45 the cut-off is 0.225 < 0.25: both directions are kept and a target
    # along the second one is read exactly (a cut-off from the Frobenius norm, 0.2516, or from
    # any norm above 0.556, would drop it and predict the mean)
    g = F / 4
    y = 3.0 * SECOND + 5.0
    pred, mse = linear_readout(g, y, rcond=0.45)
    np.testing.assert_allclose(pred, y, rtol=0, atol=1e-12)
    assert mse < 1e-24


def test_readout_drops_a_singular_value_exactly_at_the_cutoff():
    sv = np.linalg.svd(F - F.mean(axis=0), compute_uv=False)
    if not (sv[1] == 0.5 * np.linalg.norm(F, 2)):
        pytest.skip("this LAPACK does not return the singular values 2 and 1 exactly")
    # "at most rcond * ||F||_2 counts as zero": the direction is dropped, the prediction is
    # the mean and the error the variance of the targets
    y = 3.0 * SECOND + 5.0
    pred, mse = linear_readout(F, y, rcond=0.5)
    np.testing.assert_allclose(pred, np.full(4, 5.0), rtol=0, atol=1e-12)
    assert abs(mse - np.var(y)) < 1e-12


def test_readout_of_features_without_columns_is_the_mean():
    y = np.arange(4.0)
    pred, mse = linear_readout(np.zeros((4, 0)), y)
    np.testing.assert_array_equal(pred, np.full(4, 1.5))
    assert mse == np.var(y)
