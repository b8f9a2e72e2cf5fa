"""attncore._softmax: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import warnings
import sys

import numpy as np
import pytest

from attncore import attention_weights, softmax
from messages import raises_message
from strength import traced_peak

attention_module = sys.modules["attncore._attention"]


@pytest.fixture(params=["wide", "power of two"])
def score_route(request, monkeypatch):
    """Both ways attention handles a score bound beyond the largest float: scores formed in a
    wider dtype, and the power-of-two fallback that passes a temperature to the normalisation
    (dtypes with none wider), forced here by offering no wider dtype."""
    if request.param == "power of two":
        monkeypatch.setattr(attention_module, "_wide_dtype", lambda *args: None)
    return request.param


def test_bad_temperature_is_an_error_naming_temperature():
    x = np.arange(3.0)
    with raises_message(ValueError, "temperature"):
        softmax(x, temperature=0.0)
    with raises_message(TypeError, "temperature"):
        softmax(x, temperature="1")


def test_temperature_is_checked_in_the_compute_dtype_with_its_reciprocal():
    """float32 (and float16) logits are divided by T in float32: T = 1e-50 is 0 there, and T = 1e-39
    is a float32 subnormal whose reciprocal overflows; float64 has the same edge at 1e-310.  Kills
    check_real(temperature, ..., work, ...) => dtype None or omitted (float64), and reciprocal=True =>
    None, False or omitted."""
    for dtype in (np.float32, np.float16):
        x = np.zeros(3, dtype)
        with raises_message(ValueError, "temperature", values=[1e-50], dtypes=["float32"], says="not representable"):
            softmax(x, temperature=1e-50)
        with raises_message(ValueError, "temperature", values=[1e-39], dtypes=["float32"], says="reciprocal"):
            softmax(x, temperature=1e-39)
    with raises_message(ValueError, "temperature", values=[1e-310], dtypes=["float64"], says="reciprocal"):
        softmax(np.zeros(3), temperature=1e-310)
    assert softmax(np.array([0.0, 1.0], np.float32), temperature=1e-30)[1] == 1  # a normal float32 T is fine


def test_an_axis_out_of_range_names_x():
    """Kills check_axis(axis, z.ndim, "x") => None, "XXxXX", "X"."""
    with raises_message(ValueError, "x", names=["axis"], values=[2], says="out of range"):
        softmax(np.zeros((2, 3)), axis=2)


def test_a_mask_that_does_not_broadcast_names_mask_and_x():
    x = np.zeros((2, 3))
    with raises_message(ValueError, "mask", names=["x"], shapes=[(2, 2), (2, 3)], says="broadcast"):
        softmax(x, mask=np.ones((2, 2), bool))


def test_softmax_works_in_the_compute_dtype_not_in_float64():
    """float32 logits are computed in float32 and float16 ones in float32 (compute_dtype), so the
    working memory is one float32 copy of the input: a float64 working copy would double it (and
    need a third copy to round the result back).  numpy reports its buffers to tracemalloc."""
    x = np.random.default_rng(0).normal(size=(64, 1024))
    for dtype, copies in ((np.float32, 1), (np.float16, 4)):  # float16: a float16 copy, float32 work, result
        xx = x.astype(dtype)
        y, peak = traced_peak(softmax, xx)
        assert y.dtype == dtype
        assert peak < (copies + 0.5) * xx.nbytes, (dtype, peak / xx.nbytes)


def test_each_row_is_shifted_by_its_own_maximum():
    """Query 0 scores about 1768 and query 1 about 0.35: shifting every row by the largest score
    of the whole matrix (max over all axes instead of the last) underflows row 1 to exp(-1768) = 0,
    a row of zeros instead of [0.5, 0.5]."""

    q = np.array([[50.0, 0.0], [0.5, 0.0]])
    k = np.array([[50.0, 0.0], [49.0, 1.0]])
    s = q @ k.T / np.sqrt(2.0)
    for normalize, norm in (("softmax", np.sum), ("l2", np.linalg.norm)):
        a = attention_weights(q, k, normalize=normalize)
        for i in range(2):
            e = np.exp(s[i] - s[i].max())  # the reference: float64, row by row
            np.testing.assert_allclose(a[i], e / norm(e), rtol=1e-12, err_msg=normalize)


def test_normalize_none_ignores_a_masked_score_too_large_for_exp():
    """A masked score never reaches exp: query 0 masks key 0, whose score 2000/sqrt(2) would
    overflow exp (without the mask the call raises)."""

    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    k = np.array([[2000.0, 0.0], [1.0, 1.0]])
    mask = np.array([[False, True], [True, True]])
    s = q @ k.T / np.sqrt(2.0)
    got = attention_weights(q, k, mask=mask, normalize="none")
    np.testing.assert_allclose(got, np.where(mask, np.exp(np.where(mask, s, 0.0)), 0.0), rtol=1e-14)


def test_no_overflow_warning_escapes():
    """Overflows that the code expects (to -inf before exp, or in a score or exp before its own
    error) are silenced: with warnings as errors the results, and the documented errors, are
    unchanged (softmax with a tiny temperature; a relu2 score beyond float32; exp without a
    denominator)."""

    from attncore import attention_weights

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert softmax(np.array([0.0, -1e300]), temperature=1e-10).tolist() == [1.0, 0.0]
        q = np.array([[1e20, 0.0]], np.float32)
        k = np.array([[-1e20, 0.0], [1e-20, 1e20]], np.float32)
        with raises_message(ValueError, "scores", names=["q", "k", "scale", "bias"], dtypes=["float32"], says="overflow",
                            remedy=("shrink", "q", "k", "bias")):
            attention_weights(q, k, normalize="relu2")  # the score -1e40 / sqrt(2) is beyond float32
        with raises_message(ValueError, "exp", names=["normalize"], values=["none"], dtypes=["float64"], says="overflow"):
            attention_weights(np.array([[2000.0, 0.0]]), np.array([[1.0, 0.0]]), normalize="none")  # exp(1414)


def test_softmax_with_temperature_two():
    """The logits are divided by T = 2 (a rule that skipped T = 2 as if it were 1 would fail)."""
    x = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]])
    e = np.exp(x / 2.0)
    np.testing.assert_allclose(softmax(x, temperature=2.0), e / e.sum(-1, keepdims=True), rtol=1e-14)


