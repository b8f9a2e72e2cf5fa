"""softmax: against exact arithmetic, at the edges, and its invariants."""

import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

from attncore import softmax
from strategies import batch_shapes, dtypes, lengths, normal, permutations, seeds, tol
from messages import raises_message


def softmax_exact(row, temperature=1.0):
    """The softmax of one row in 50-digit arithmetic, without any shift trick."""
    with mpmath.workdps(50):
        e = [mpmath.exp(mpmath.mpf(float(x)) / temperature) for x in row]
        total = mpmath.fsum(e)
        return np.array([float(v / total) for v in e])


@pytest.mark.parametrize(
    "row",
    [[1.0, 2.0, 3.0], [1000.0, 0.0], [-1e4, -1e4], [-1e4, -1e4 + 1.0, 3.0], [0.0], [700.0, 710.0, 720.0]],
)
@pytest.mark.parametrize("temperature", [1.0, 0.5, 7.0])
def test_matches_exact_arithmetic(row, temperature):
    got = softmax(np.array(row), temperature=temperature)
    np.testing.assert_allclose(got, softmax_exact(row, temperature), rtol=1e-13, atol=1e-300)


def test_huge_logits_are_finite_and_exact():
    assert softmax(np.array([1000.0, 0.0])).tolist() == [1.0, 0.0]
    assert softmax(np.array([-1e4, -1e4])).tolist() == [0.5, 0.5]
    assert softmax(np.array([-1e4, -1e4], dtype=np.float32)).dtype == np.float32


def test_masked_entries_are_exactly_zero(rng):
    x = rng.normal(size=(3, 5))
    mask = np.array([True, False, True, True, False])
    w = softmax(x, mask=mask)
    assert np.all(w[:, ~mask] == 0.0)
    # The kept entries are the softmax of the kept logits alone.
    np.testing.assert_allclose(w[:, mask], softmax(x[:, mask]), rtol=1e-14)


def test_fully_masked_row_is_zero_not_nan(rng):
    x = rng.normal(size=(2, 4))
    mask = np.array([[False] * 4, [True, True, False, False]])
    w = softmax(x, mask=mask)
    assert np.all(w[0] == 0.0)
    assert np.isclose(w[1].sum(), 1.0)
    assert not np.any(np.isnan(w))


def test_minus_inf_acts_as_mask():
    w = softmax(np.array([0.0, -np.inf, 0.0]))
    assert w.tolist() == [0.5, 0.0, 0.5]
    assert softmax(np.array([-np.inf, -np.inf])).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_input_raises(bad):
    with raises_message(ValueError, "x", values=[1, "(1,)"], shapes=[(2,)], says=["finite", "masked"]):
        softmax(np.array([0.0, bad]))


@pytest.mark.parametrize("temperature", [0.0, -1.0, np.inf, np.nan])
def test_bad_temperature_raises(temperature):
    with raises_message(ValueError, "temperature", values=[str(temperature)]):
        softmax(np.array([0.0, 1.0]), temperature=temperature)


def test_tiny_temperature_tends_to_hardmax():
    x = np.array([0.3, 2.0, 1.0])
    assert softmax(x, temperature=1e-300).tolist() == [0.0, 1.0, 0.0]
    # Tied maxima share the weight equally.
    assert softmax(np.array([2.0, 2.0, 1.0]), temperature=1e-300).tolist() == [0.5, 0.5, 0.0]


def test_other_axis(rng):
    x = rng.normal(size=(4, 3))
    np.testing.assert_allclose(softmax(x, axis=0), softmax(x.T).T, rtol=1e-15)


def test_input_is_not_modified(rng):
    x = rng.normal(size=(3, 4))
    before = x.copy()
    softmax(x, mask=np.ones((3, 4), dtype=bool), temperature=2.0)
    assert np.array_equal(x, before)


def test_integer_input_gives_float64():
    assert softmax(np.array([1, 2, 3])).dtype == np.float64


@pytest.mark.parametrize("bad", [np.array([True, False]), np.array([1 + 1j, 0])])
def test_non_real_input_raises_type_error(bad):
    with raises_message(TypeError, "x", dtypes=[bad.dtype], shapes=[(2,)], says="real"):
        softmax(bad)


def test_mask_errors():
    x = np.zeros((2, 3))
    with raises_message(TypeError, "mask", dtypes=["float64"], shapes=[(2, 3)], says="boolean", remedy=("pass", "bias")):
        softmax(x, mask=np.ones((2, 3)))
    with raises_message(ValueError, "mask", names=["x"], shapes=[(2, 2), (2, 3)], says="broadcast"):
        softmax(x, mask=np.ones((2, 2), dtype=bool))
    # A mask may not enlarge the result.
    with raises_message(ValueError, "mask", names=["x"], shapes=[(2, 3), (3,)], says="broadcast"):
        softmax(np.zeros(3), mask=np.ones((2, 3), dtype=bool))


def test_empty_axis_raises():
    with raises_message(ValueError, "x", names=["axis"], values=[1], shapes=[(2, 0)], says="not empty"):
        softmax(np.zeros((2, 0)))


# ---- properties -----------------------------------------------------------

@given(seed=seeds, batch=batch_shapes, m=lengths, dtype=dtypes, scale=st.sampled_from([0.1, 1.0, 30.0]))
def test_rows_are_distributions(seed, batch, m, dtype, scale):
    x = normal(np.random.default_rng(seed), batch + (m,), dtype, scale)
    w = softmax(x)
    assert w.dtype == dtype and w.shape == x.shape
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, **tol(dtype))


@given(seed=seeds, batch=batch_shapes, m=lengths, c=st.floats(-1e3, 1e3))
def test_shift_invariance(seed, batch, m, c):
    x = normal(np.random.default_rng(seed), batch + (m,), np.float64)
    np.testing.assert_allclose(softmax(x + c), softmax(x), rtol=1e-9, atol=1e-12)


@given(seed=seeds, m=lengths, dtype=dtypes)
def test_masked_weights_zero_and_rest_normalised(seed, m, dtype):
    rng = np.random.default_rng(seed)
    x = normal(rng, (3, m), dtype, 5.0)
    mask = rng.random((3, m)) < 0.6
    w = softmax(x, mask=mask)
    assert np.all(w[~mask] == 0)
    sums = w.sum(axis=-1)
    has_key = mask.any(axis=-1)
    np.testing.assert_allclose(sums[has_key], 1.0, **tol(dtype))
    assert np.all(sums[~has_key] == 0)


@given(seed=seeds, m=st.integers(2, 7), data=st.data())
def test_softmax_commutes_with_permutations(seed, m, data):
    perm = data.draw(permutations(m))
    x = normal(np.random.default_rng(seed), (2, m), np.float64)
    # Equal up to the order of the floating-point sum in the denominator.
    np.testing.assert_allclose(softmax(x[:, perm]), softmax(x)[:, perm], rtol=1e-14)
