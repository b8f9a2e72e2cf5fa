"""attncore._norms: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np
import pytest

from attncore import batch_norm, instance_norm, layer_norm, rms_norm
from messages import raises_message

NORMS = {"layer_norm": layer_norm, "rms_norm": rms_norm, "instance_norm": instance_norm,
         "batch_norm": batch_norm}
# the fewest axes each accepts: features for the per-token norms, tokens and features otherwise
CORE = {"layer_norm": "(..., d)", "rms_norm": "(..., d)", "instance_norm": "(..., n, d)",
        "batch_norm": "(..., b, d)"}


@pytest.mark.parametrize("name", NORMS)
def test_too_few_axes_and_bad_types_are_errors_naming_x(name):
    norm = NORMS[name]
    with raises_message(ValueError, "x", shapes=[CORE[name], ()]):
        norm(np.float64(1.0))
    with raises_message(TypeError, "x"):
        norm(np.array([["a", "b"]]))
    with raises_message(ValueError, "x"):
        norm(np.array([[1.0, np.nan]]))


@pytest.mark.parametrize("name", NORMS)
def test_bad_eps_is_an_error_naming_eps(name):
    x = np.arange(6.0).reshape(2, 3)
    with raises_message(ValueError, "eps", values=[0, -1e-05], says="out of range"):
        NORMS[name](x, eps=-1e-5)
    with raises_message(TypeError, "eps"):
        NORMS[name](x, eps="0.1")
    assert np.all(np.isfinite(NORMS[name](x, eps=0.0)))


@pytest.mark.parametrize("name", ["layer_norm", "instance_norm", "batch_norm"])
def test_a_gamma_or_beta_of_the_wrong_length_names_itself_and_x(name):
    x = np.arange(6.0).reshape(2, 3)
    with raises_message(ValueError, "gamma", names=["x"], shapes=["(2, 3)"]):
        NORMS[name](x, gamma=np.ones(4))
    with raises_message(ValueError, "beta", names=["x"], shapes=["(2, 3)"]):
        NORMS[name](x, beta=np.ones(2))


# ---- survivors of _standardize and layer_norm (2026-11-23) --------------------------------------

import warnings  # noqa: E402


def _plain(x, eps):
    """(x - mean) / sqrt(var + eps) over the last axis in float64, the textbook formula."""
    x = np.asarray(x, np.float64)
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("shape", [(3, 0), (2, 3, 0), (2, 0, 3), (0, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_norms_of_empty_groups_are_empty_and_warn_nothing(shape, dtype):
    # d = 0, no tokens or no sequences: nothing to normalise, an empty result of the input's
    # shape and dtype, and no "Mean of empty slice" warning (every norm let one escape for the
    # shapes that empty its groups). Kills the early return in _standardize dropped or inverted.
    for norm in (layer_norm, rms_norm, instance_norm, batch_norm):
        out = norm(np.zeros(shape, dtype))
        assert out.shape == shape and out.dtype == dtype, norm.__name__


def test_layer_norm_scales_each_token_by_its_own_size():
    # tokens at 1e-300 and 1e+300 in one array, eps = 0: each becomes exactly (1, -1). Kills the
    # power-of-two scale taken over the whole array (axis=None or the axis dropped: the small
    # token's squares underflow) and a scale of at least 1 (initial=1: its squares underflow too)
    x = np.array([[1e-300, -1e-300], [1e300, -1e300], [3.0, -3.0]])
    np.testing.assert_allclose(layer_norm(x, eps=0.0), np.array([[1.0, -1.0]] * 3), rtol=1e-15, atol=0)


def test_layer_norm_of_tiny_tokens_with_eps_and_of_constant_tokens_without_warnings():
    # max |x| = 1e-200: eps in the units of the scaled token overflows float64 (the documented
    # fallback factor 2**p / sqrt(eps) takes over); a constant token with eps = 0 divides 0 by 0.
    # Neither may warn, and the results are the textbook ones. Kills over= or divide="ignore"
    # dropped, and every change to the fallback factor (None, 1 * sqrt(eps), 2 / sqrt(eps), p dropped).
    x = np.array([[1e-200, -1e-200, 2e-200], [1.0, 2.0, 3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = layer_norm(x)
        zero = layer_norm(np.full((2, 3), 7.0), eps=0.0)
    np.testing.assert_allclose(got, _plain(x, 1e-5), rtol=1e-12, atol=0)
    assert np.all(np.abs(got[0]) > 1e-199)  # not flushed to 0
    np.testing.assert_array_equal(zero, np.zeros((2, 3)))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_layer_norm_keeps_the_dtype_and_adds_eps_in_float64(dtype):
    # eps = 1e-46 is 0 in float16 and float32 but not in float64, where it is added: it is
    # accepted. Kills the eps check done in x's own dtype (np.result_type(x, ) for
    # np.result_type(x, np.float64)) and the result cast to None (float64) instead of x.dtype.
    x = np.array([[1.0, 2.0, 4.0]], dtype)
    out = layer_norm(x, eps=1e-46)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.astype(np.float64), _plain(x, 0.0), rtol=2 * float(np.finfo(dtype).eps) * 4)


def _plain_long(x, eps):
    x = np.asarray(x, np.longdouble)
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + np.longdouble(eps))


def test_float32_tokens_whose_variance_is_comparable_to_a_subnormal_eps():
    # var = 2.3e-40 and eps = 1e-40, a subnormal in float32 (1e-40 rounds to 9.99995e-41 there);
    # eps is added in float64, so the float32 result is within a few units of the exact one.
    # Kills the statistics computed in x's own dtype (np.result_type(work, ) for
    # np.result_type(work, np.float64)), where eps loses 5e-6 of itself.
    x = np.array([[1e-20, -1e-20, 3e-20]], np.float32)
    out = layer_norm(x, eps=1e-40)
    assert out.dtype == np.float32
    ref = _plain_long(x, 1e-40)
    assert np.max(np.abs(out - ref)) <= 4 * float(np.finfo(np.float32).eps)


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps,
                    reason="long double is float64 on this platform")
def test_long_double_tokens_are_normalised_in_long_double():
    # "float32, float64 and longer types are computed in their own precision": the statistics
    # of long double input stay long double. Kills them taken in float64 (np.result_type(None,
    # np.float64), np.result_type(np.float64), .astype(None) for .astype(stats)).
    x = np.array([[1, 2, 4, 7]], np.longdouble) / 3
    out = layer_norm(x)
    assert out.dtype == np.longdouble
    assert np.max(np.abs(out - _plain_long(x, 1e-5))) <= 16 * np.finfo(np.longdouble).eps


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_float64_gamma_beyond_the_compute_dtype_is_an_error(dtype):
    # float16 and float32 tokens are computed in float32, so gamma = 1e39 (float64) overflows:
    # the documented ValueError naming gamma. Kills the normalised tokens handed to _affine in
    # float64 (the factor cast to None instead of the compute dtype), where gamma would fit.
    x = np.array([[1.0, 2.0, 4.0]], dtype)
    with raises_message(ValueError, "gamma", dtypes=["float32"]):
        layer_norm(x, gamma=np.full(3, 1e39))
    with raises_message(ValueError, "beta", dtypes=["float32"]):
        layer_norm(x, beta=np.full(3, -1e39))
