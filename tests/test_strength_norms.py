"""attncore._norms: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np
import pytest

from attncore import batch_norm, instance_norm, layer_norm, rms_norm
from strength import raises_naming

NORMS = {"layer_norm": layer_norm, "rms_norm": rms_norm, "instance_norm": instance_norm,
         "batch_norm": batch_norm}
# the fewest axes each accepts: features for the per-token norms, tokens and features otherwise
CORE = {"layer_norm": "(..., d)", "rms_norm": "(..., d)", "instance_norm": "(..., n, d)",
        "batch_norm": "(..., b, d)"}


@pytest.mark.parametrize("name", NORMS)
def test_too_few_axes_and_bad_types_are_errors_naming_x(name):
    norm = NORMS[name]
    with raises_naming(ValueError, "x", CORE[name]):
        norm(np.float64(1.0))
    with raises_naming(TypeError, "x"):
        norm(np.array([["a", "b"]]))
    with raises_naming(ValueError, "x"):
        norm(np.array([[1.0, np.nan]]))


@pytest.mark.parametrize("name", NORMS)
def test_bad_eps_is_an_error_naming_eps(name):
    x = np.arange(6.0).reshape(2, 3)
    with raises_naming(ValueError, "eps", ">= 0"):
        NORMS[name](x, eps=-1e-5)
    with raises_naming(TypeError, "eps"):
        NORMS[name](x, eps="0.1")
    assert np.all(np.isfinite(NORMS[name](x, eps=0.0)))


@pytest.mark.parametrize("name", ["layer_norm", "instance_norm", "batch_norm"])
def test_a_gamma_or_beta_of_the_wrong_length_names_itself_and_x(name):
    x = np.arange(6.0).reshape(2, 3)
    with raises_naming(ValueError, "gamma", "to match x of shape (2, 3)"):
        NORMS[name](x, gamma=np.ones(4))
    with raises_naming(ValueError, "beta", "to match x of shape (2, 3)"):
        NORMS[name](x, beta=np.ones(2))
