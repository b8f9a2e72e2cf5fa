"""attncore._softmax: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import re
import warnings
import sys

import numpy as np
import pytest

from attncore import attention_weights, softmax
from strength import raises_naming, traced_peak

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
    with raises_naming(ValueError, "temperature"):
        softmax(x, temperature=0.0)
    with raises_naming(TypeError, "temperature"):
        softmax(x, temperature="1")


def test_temperature_is_checked_in_the_compute_dtype_with_its_reciprocal():
    """float32 (and float16) logits are divided by T in float32: T = 1e-50 is 0 there, and T = 1e-39
    is a float32 subnormal whose reciprocal overflows; float64 has the same edge at 1e-310.  Kills
    check_real(temperature, ..., work, ...) => dtype None or omitted (float64), and reciprocal=True =>
    None, False or omitted."""
    for dtype in (np.float32, np.float16):
        x = np.zeros(3, dtype)
        with raises_naming(ValueError, "temperature", "not representable in float32"):
            softmax(x, temperature=1e-50)
        with raises_naming(ValueError, "temperature", "float32", "reciprocal"):
            softmax(x, temperature=1e-39)
    with raises_naming(ValueError, "temperature", "float64", "reciprocal"):
        softmax(np.zeros(3), temperature=1e-310)
    assert softmax(np.array([0.0, 1.0], np.float32), temperature=1e-30)[1] == 1  # a normal float32 T is fine


def test_an_axis_out_of_range_names_x():
    """Kills check_axis(axis, z.ndim, "x") => None, "XXxXX", "X"."""
    with pytest.raises(ValueError, match=r"^axis = 2 is out of range for x with 2 axes"):
        softmax(np.zeros((2, 3)), axis=2)


def test_a_mask_that_does_not_broadcast_names_mask_and_x():
    x = np.zeros((2, 3))
    with raises_naming(ValueError, "mask", "shape of x", "(2, 3)"):
        softmax(x, mask=np.ones((2, 2), bool))


def test_weights_keep_the_rescaling_when_the_score_bound_overflows_but_scores_are_small(score_route):
    """|q| |k| ~ 1e40 overflows float32, so attention rescales q by a power of two and passes
    that power on as a temperature; here the scores themselves are small (q and k are nearly
    orthogonal), so dropping the temperature (softmax of the rescaled scores, about uniform)
    gives [0.50, 0.50] instead of the true softmax([1, 0] / sqrt(2)) = [0.67, 0.33]."""
    from attncore import attention, attention_weights

    q = np.array([[1e20, 0.0]], np.float32)
    k = np.array([[1e-20, 1e20], [0.0, 1e20]], np.float32)
    # The true scores, q . k / sqrt(2), in float64: 1/sqrt(2) and 0.
    s = np.array([1.0, 0.0]) / np.sqrt(2.0)
    expected = np.exp(s) / np.exp(s).sum()
    for normalize, ref in (("softmax", expected), ("l2", np.exp(s) / np.linalg.norm(np.exp(s)))):
        a = attention_weights(q, k, normalize=normalize)
        assert np.max(np.abs(a[0] - ref)) < 1e-6, (normalize, a, ref)
    v = np.array([[1.0], [0.0]], np.float32)
    assert abs(attention(q, k, v)[0, 0] - expected[0]) < 1e-6


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
    a row of zeros instead of [0.5, 0.5].  Kills, in _numerators_inplace,
    _shifted_exp_inplace(z, -1, ...) => _shifted_exp_inplace(z, None, ...)."""
    from attncore import attention_weights

    q = np.array([[50.0, 0.0], [0.5, 0.0]])
    k = np.array([[50.0, 0.0], [49.0, 1.0]])
    s = q @ k.T / np.sqrt(2.0)
    for normalize, norm in (("softmax", np.sum), ("l2", np.linalg.norm)):
        a = attention_weights(q, k, normalize=normalize)
        for i in range(2):
            e = np.exp(s[i] - s[i].max())  # the reference: float64, row by row
            np.testing.assert_allclose(a[i], e / norm(e), rtol=1e-12, err_msg=normalize)


def test_numerators_are_unshifted_exactly_when_asked():
    """_numerators_inplace(shift=False) returns exp(z / T) itself and its row sums or norms
    (attention passes shift=False only when it has proved the scores small); with shift=True every
    row's largest numerator is exp(0) = 1.  Kills, in _numerators_inplace, the call
    _shifted_exp_inplace(z, -1, ..., shift=shift, ...) without shift (always shifted), and the
    axis None (shifted by the maximum of the whole matrix)."""
    from attncore._softmax import _numerators_inplace

    z = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]])
    for kind, norm in (("softmax", lambda e: e.sum(-1, keepdims=True)),
                       ("l2", lambda e: np.sqrt((e * e).sum(-1, keepdims=True)))):
        num, den = _numerators_inplace(z.copy(), kind, shift=False, temperature=1.0)
        np.testing.assert_allclose(num, np.exp(z), rtol=1e-15)
        np.testing.assert_allclose(den, norm(np.exp(z)), rtol=1e-14)
        num, den = _numerators_inplace(z.copy(), kind, shift=True, temperature=1.0)
        assert np.array_equal(num.max(axis=-1), [1.0, 1.0]), kind
        np.testing.assert_allclose(num / den, np.exp(z) / norm(np.exp(z)), rtol=1e-14)


def test_relu2_and_none_keep_the_rescaling_when_the_score_bound_overflows(score_route):
    """As above, attention rescales q by 2**-j and passes 2**-j on as the temperature; relu2 and
    "none" must divide by it too: relu(s)^2 / m and exp(s) of the true scores s = [1, 0] / sqrt(2).
    Kills, in _numerators_inplace, `temperature != 1.0 and kind in ("relu2", "none")` =>
    `temperature == 1.0 and ...` or `... and kind not in (...)` (the rescaled scores, 2**j times too
    large, are used), and the kinds misspelt: "XXrelu2XX", "RELU2", "XXnoneXX", "NONE"."""
    from attncore import attention_weights

    q = np.array([[1e20, 0.0]], np.float32)
    k = np.array([[1e-20, 1e20], [0.0, 1e20]], np.float32)
    s = np.array([1.0, 0.0]) / np.sqrt(2.0)
    for normalize, ref in (("relu2", np.maximum(s, 0) ** 2 / 2), ("none", np.exp(s))):
        a = attention_weights(q, k, normalize=normalize)
        assert np.max(np.abs(a[0] - ref)) < 1e-6, (normalize, a, ref)


def test_numerators_divide_relu2_and_none_scores_by_the_temperature():
    """The scores are z / temperature for every kind (the docstring of _numerators_inplace), also
    for temperature 2.  Kills `temperature != 1.0 and ...` => `temperature != 2.0 and ...`."""
    from attncore._softmax import _numerators_inplace

    z = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]])
    for t in (2.0, 0.5):
        num, den = _numerators_inplace(z.copy(), "relu2", temperature=t)
        assert den is None
        np.testing.assert_allclose(num, np.maximum(z / t, 0) ** 2 / 3, rtol=1e-15)
        num, den = _numerators_inplace(z.copy(), "none", temperature=t)
        np.testing.assert_allclose(num, np.exp(z / t), rtol=1e-15)


def test_normalize_none_ignores_a_masked_score_too_large_for_exp():
    """A masked score never reaches exp: query 0 masks key 0, whose score 2000/sqrt(2) would
    overflow exp.  Kills, in _numerators_inplace ("none"), np.copyto(z, -inf, where=~mask) =>
    where=None (copies nothing, so exp overflows and the call raises)."""
    from attncore import attention_weights

    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    k = np.array([[2000.0, 0.0], [1.0, 1.0]])
    mask = np.array([[False, True], [True, True]])
    s = q @ k.T / np.sqrt(2.0)
    got = attention_weights(q, k, mask=mask, normalize="none")
    np.testing.assert_allclose(got, np.where(mask, np.exp(np.where(mask, s, 0.0)), 0.0), rtol=1e-14)


def test_no_overflow_warning_escapes():
    """Overflows that the code expects (to -inf before exp, or in exp before its own error) are
    silenced: with warnings as errors the results, and the documented error, are unchanged.
    Kills np.errstate(over="ignore") => over=None (which leaves the warning on) in
    _shifted_exp_inplace (softmax with a tiny temperature), in _numerators_inplace's temperature
    division (relu2 of a true score -7e39 beyond float32) and around its exp ("none"); and the
    message of that error mutated ("XX...XX", upper case)."""
    import warnings

    from attncore import attention_weights

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert softmax(np.array([0.0, -1e300]), temperature=1e-10).tolist() == [1.0, 0.0]
        q = np.array([[1e20, 0.0]], np.float32)
        k = np.array([[-1e20, 0.0], [1e-20, 1e20]], np.float32)
        a = attention_weights(q, k, normalize="relu2")  # scores [-1e40, 1] / sqrt(2): relu2 [0, 1/4]
        assert np.max(np.abs(a[0] - [0.0, 0.25])) < 1e-6, a
        with pytest.raises(ValueError, match=re.escape(
                'a score is too large for exp without a denominator (normalize="none"); scale the scores down')):
            attention_weights(np.array([[2000.0, 0.0]]), np.array([[1.0, 0.0]]), normalize="none")  # exp(1414)


def test_softmax_with_temperature_two():
    """Kills, in _shifted_exp_inplace, `if temperature != 1.0:` => `!= 2.0` (T = 2 not applied)."""
    x = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]])
    e = np.exp(x / 2.0)
    np.testing.assert_allclose(softmax(x, temperature=2.0), e / e.sum(-1, keepdims=True), rtol=1e-14)


def test_unshifted_exp_divides_by_the_temperature():
    """_shifted_exp_inplace(shift=False) is exp(z / T) (its docstring; attention uses shift=False
    only with T = 1 today, so the public route does not reach it).  Kills, in the shift=False branch,
    `if temperature != 1.0` => `== 1.0` and `!= 2.0`, and `z /= T` => `z = T`, `z *= T`, `z /= type(None)`."""
    from attncore._softmax import _shifted_exp_inplace

    z = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]])
    for t in (2.0, 0.5, 1.0):
        got = _shifted_exp_inplace(z.copy(), -1, temperature=t, shift=False)
        np.testing.assert_allclose(got, np.exp(z / t), rtol=1e-15)


def test_numerators_reject_an_unknown_kind_by_name():
    """The public functions check normalize first (check_choice); the helper's own error must say the
    same.  Kills the message of its ValueError replaced by None, ', '.join(None), 'XX, XX'.join(...)."""
    from attncore._softmax import _numerators_inplace

    with pytest.raises(ValueError, match=r"^normalize must be one of softmax, l2, relu2, none, got 'bogus'$"):
        _numerators_inplace(np.zeros((2, 2)), "bogus")


def test_relu2_and_none_scores_restored_beyond_the_range_warn_nothing(monkeypatch):
    """The power-of-two fallback (forced: no wider dtype) divides q by 2**j and passes 2**-j as the
    temperature; relu2 and none divide the scores by it again, and a score beyond float32 (1e39)
    becomes inf there, the correct rounding: relu(s)**2 / m is inf, with no warning, and none
    raises its documented ValueError, not a RuntimeWarning.  Kills in _numerators_inplace
    ``np.errstate(over="ignore")`` -> ``np.errstate(over=None)`` (numpy's overflow warning escapes)."""
    monkeypatch.setattr(attention_module, "_wide_dtype", lambda *args: None)
    f32 = np.float32
    q, k = np.array([[1e20], [2e-19]], f32), np.array([[1e19]], f32)  # scores 1e39 and 2
    with np.errstate(over="warn"), warnings.catch_warnings():  # numpy's default for overflow
        warnings.simplefilter("error")
        a = attention_weights(q, k, scale=1.0, normalize="relu2")
        assert a[0, 0] == np.inf and a.dtype == f32 and abs(a[1, 0] - 4.0) < 1e-5
        with pytest.raises(ValueError, match="too large for exp"):
            attention_weights(q, k, scale=1.0, normalize="none")
