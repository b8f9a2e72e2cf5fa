"""attncore.kernels: feature maps of exp(q . k) and linear attention.

Independent routes: explicit loops over tokens and indices, closed forms of
the kernels, and Monte Carlo means with tolerances from the exact variances.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attncore._kernels import (
    MAX_FEATURE_ENTRIES,
    exp_limit_features,
    gaussian_features,
    linear_attention,
    linear_attention_weights,
    positive_random_features,
    taylor_features,
    trig_random_features,
)
from strategies import batch_shapes, dtypes, lengths, normal, seeds, tol, widths
from messages import raises_message


def loop_linear_attention(q, k, v, phi, causal):
    """out_i = sum_j (phi(q_i).phi(k_j)) v_j / sum_j phi(q_i).phi(k_j), one token at a time."""
    out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        fi = phi(q[i : i + 1])[0]
        num, den = np.zeros(v.shape[1]), 0.0
        for j in range(k.shape[0]):
            if causal and j > i:
                continue
            s = float(np.dot(fi, phi(k[j : j + 1])[0]))
            num += s * v[j]
            den += s
        out[i] = num / den
    return out


@given(seeds, lengths, widths, st.integers(1, 9), st.booleans(), st.integers(1, 5))
def test_linear_attention_equals_loop(seed, n, d, m, causal, chunk):
    rng = np.random.default_rng(seed)
    q, k, v = (0.5 * rng.standard_normal((n, d)) for _ in range(3))
    w = gaussian_features(m, d, rng)
    phi = lambda x: positive_random_features(x, w)  # noqa: E731
    expected = loop_linear_attention(q, k, v, phi, causal)
    np.testing.assert_allclose(linear_attention(q, k, v, phi, causal=causal, chunk=chunk), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(linear_attention_weights(q, k, phi, causal=causal) @ v, expected, rtol=1e-10, atol=1e-12)


@given(seeds, lengths, widths, batch_shapes, dtypes, st.booleans())
def test_linear_attention_equals_explicit_matrix_batched(seed, n, d, batch, dtype, causal):
    rng = np.random.default_rng(seed)
    q, k, v = (normal(rng, batch + (n, d), dtype, 0.5) for _ in range(3))
    w = gaussian_features(8, d, rng).astype(dtype)
    phi = lambda x: positive_random_features(x, w)  # noqa: E731
    out = linear_attention(q, k, v, phi, causal=causal, chunk=3)
    assert out.shape == batch + (n, d) and out.dtype == dtype
    explicit = linear_attention_weights(q, k, phi, causal=causal) @ v
    np.testing.assert_allclose(out, explicit, **tol(dtype))


def test_noncausal_cross_attention_lengths():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 2))
    phi = lambda x: taylor_features(0.3 * x, 2)  # noqa: E731
    np.testing.assert_allclose(linear_attention(q, k, v, phi), loop_linear_attention(q, k, v, phi, False), rtol=1e-11)


def test_stabilizers_do_not_change_linear_attention():
    """A positive factor per query cancels; one common factor for all keys cancels."""
    rng = np.random.default_rng(2)
    q, k, v = 2.0 * rng.normal(size=(3, 6, 4))
    w = gaussian_features(32, 4, rng)
    fq = positive_random_features(q, w, stabilizer="row")
    fk = positive_random_features(k, w, stabilizer="global")
    assert np.allclose(fq.max(axis=-1), 1 / math.sqrt(32)) and np.isclose(fk.max(), 1 / math.sqrt(32))
    row = lambda x: positive_random_features(x, w, stabilizer="row")  # noqa: E731
    glob = lambda x: positive_random_features(x, w, stabilizer="global")  # noqa: E731
    exact = {}
    for causal in (False, True):
        exact[causal] = linear_attention(q, k, v, lambda x: positive_random_features(x, w), causal=causal)
        stable = linear_attention(q, k, v, row, causal=causal, chunk=4, key_feature_map=glob)
        np.testing.assert_allclose(stable, exact[causal], rtol=1e-10)
        weights = linear_attention_weights(q, k, row, causal=causal, key_feature_map=glob)
        np.testing.assert_allclose(weights @ v, exact[causal], rtol=1e-10)
        # The per-row factor is NOT allowed on the keys: it changes the output (same mask as the reference).
        wrong = linear_attention(q, k, v, row, causal=causal, key_feature_map=row)
        assert not np.allclose(wrong, exact[causal], rtol=1e-6)


@given(seeds, st.integers(1, 64), st.integers(1, 10), st.floats(0.0, 30.0), st.booleans(), st.booleans())
def test_stabilized_linear_attention_is_finite_up_to_norm_30(seed, d, n, radius, orthogonal, causal):
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((3, n, d))
    q *= radius / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-300)
    k *= radius / np.maximum(np.linalg.norm(k, axis=1, keepdims=True), 1e-300)
    w = gaussian_features(64, d, rng, orthogonal=orthogonal)
    out = linear_attention(
        q, k, v, lambda x: positive_random_features(x, w, stabilizer="row"), causal=causal, chunk=3,
        key_feature_map=lambda x: positive_random_features(x, w, stabilizer="global"),
    )
    assert np.all(np.isfinite(out))
    # A weighted average of the values: inside their range per column.
    assert np.all(out <= v.max(axis=0) + 1e-9) and np.all(out >= v.min(axis=0) - 1e-9)


def test_unstabilized_linear_attention_can_be_nan_at_norm_30():
    """The documented failure: finite features whose products underflow give 0/0."""
    rng = np.random.default_rng(10)
    q, k, v = rng.standard_normal((3, 8, 16))
    q *= 30 / np.linalg.norm(q, axis=1, keepdims=True)
    k *= 30 / np.linalg.norm(k, axis=1, keepdims=True)
    w = gaussian_features(64, 16, rng)
    assert np.all(np.isfinite(positive_random_features(q, w)))
    with np.errstate(all="ignore"):
        out = linear_attention(q, k, v, lambda x: positive_random_features(x, w))
    assert np.any(np.isnan(out))


@pytest.mark.parametrize("m, d", [(1, 1), (5, 3), (8, 4), (64, 16), (100, 64)])
def test_orthogonal_features_are_orthogonal_within_each_block(m, d):
    w = gaussian_features(m, d, np.random.default_rng(m + d), orthogonal=True)
    assert w.shape == (m, d)
    for start in range(0, m, d):
        block = w[start : start + d]
        gram = block @ block.T
        off = gram - np.diag(np.diag(gram))
        assert np.max(np.abs(off)) < 1e-12 * np.max(np.diag(gram))


def test_orthogonal_rows_have_chi_norms():
    """|w|^2 ~ chi^2_d: mean d and variance 2d, each within 6 standard errors.

    For chi^2_d the cumulants are k_r = 2^(r-1) (r-1)! d, so the fourth central moment is
    mu_4 = 48 d + 12 d^2 and the sample variance has standard error sqrt((mu_4 - (2d)^2) / m).
    Fixed norms sqrt(d) (variance 0) or Gaussian rows rescaled to norm sqrt(d) fail.
    """
    d, m = 8, 40_000
    sq = np.sum(gaussian_features(m, d, np.random.default_rng(3), orthogonal=True) ** 2, axis=1)
    assert abs(sq.mean() - d) < 6 * math.sqrt(2 * d / m)
    mu4 = 48 * d + 12 * d**2
    assert abs(sq.var() - 2 * d) < 6 * math.sqrt((mu4 - (2 * d) ** 2) / m)
    # Binned goodness of fit against the chi^2_8 cdf (closed form for even d):
    # P(X <= x) = 1 - exp(-x/2) sum_{j < d/2} (x/2)^j / j!.
    cdf = lambda x: 1 - math.exp(-x / 2) * sum((x / 2) ** j / math.factorial(j) for j in range(d // 2))  # noqa: E731
    edges = [0.0, 3.0, 5.0, 7.0, 9.0, 12.0, 16.0, math.inf]
    probs = np.diff([cdf(e) if math.isfinite(e) else 1.0 for e in edges])
    counts = np.histogram(sq, bins=edges)[0]
    chi2 = float(np.sum((counts - m * probs) ** 2 / (m * probs)))
    assert chi2 < 30  # 6 degrees of freedom: P(chi^2_6 > 30) < 1e-4
    # Rows of different blocks are not orthogonal (the blocks are independent).
    w = gaussian_features(2 * d, d, np.random.default_rng(4), orthogonal=True)
    assert abs(w[0] @ w[d]) > 1e-6


@given(seeds, st.integers(1, 64), st.floats(0.0, 30.0))
def test_positive_features_positive_and_finite_up_to_norm_30(seed, d, radius):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, d))
    x *= radius / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)
    for orthogonal in (False, True):
        w = gaussian_features(64, d, rng, orthogonal=orthogonal)
        for stabilizer in (None, "row", "global"):
            f = positive_random_features(x, w, stabilizer=stabilizer)
            assert f.shape == (4, 64)
            assert np.all(np.isfinite(f)) and np.all(f > 0)


def test_positive_features_closed_form_per_entry():
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(6, 4))
    f = positive_random_features(x, w)
    for i, j in itertools.product(range(3), range(6)):
        assert math.isclose(f[i, j], math.exp(x[i] @ w[j] - x[i] @ x[i] / 2) / math.sqrt(6), rel_tol=1e-12)


@pytest.mark.parametrize("features", [positive_random_features, trig_random_features])
def test_random_features_are_unbiased(features):
    """Mean of many single-feature estimates vs exp(q.k), within 5 standard errors of the exact variance."""
    q, k = np.array([[0.4, -0.3, 0.2]]), np.array([[-0.1, 0.5, 0.3]])
    s, m = (q @ k.T).item(), 200_000
    w = gaussian_features(m, 3, np.random.default_rng(6))
    estimate = (features(q, w) @ features(k, w).T).item()
    if features is positive_random_features:
        var = math.exp(2 * s) * (math.exp(np.sum((q + k) ** 2)) - 1)
    else:
        var = math.exp(2 * s) * (math.cosh(np.sum((q - k) ** 2)) - 1)
    assert abs(estimate - math.exp(s)) < 5 * math.sqrt(var / m)


def test_positive_feature_relative_variance_is_exp_norm_of_sum_minus_one():
    """Single-feature variance of the package's features vs e^{|q+k|^2} - 1 (Chapter 4's regime argument).

    At |q+k|^2 = 1.5 the Monte Carlo variance of 400,000 single features is within 10% of the
    closed form; the wrong exponents |q+k|^2 / 2 and |q|^2 + |k|^2 are more than 30% off.
    """
    q, k = np.array([[0.9, 0.2, 0.0]]), np.array([[0.2, 0.5, -0.4]])
    u2 = float(np.sum((q + k) ** 2))
    m = 400_000
    w = gaussian_features(m, 3, np.random.default_rng(8))
    z = (positive_random_features(q, w) * positive_random_features(k, w))[0] * m  # single-feature estimates
    measured = z.var() / math.exp(2 * (q @ k.T).item())
    assert abs(measured / math.expm1(u2) - 1) < 0.1
    for wrong in (math.expm1(u2 / 2), math.expm1(float(np.sum(q**2) + np.sum(k**2)))):
        assert abs(measured / wrong - 1) > 0.3


def test_trig_normaliser_can_be_non_positive_positive_never():
    """At logit scale 1 (d = 64) trigonometric features give rows with a normaliser <= 0; positive never."""
    rng = np.random.default_rng(9)
    q, k = rng.normal(size=(2, 64, 64)) * 64**-0.25
    w_pos, w_trig = gaussian_features(128, 64, rng), gaussian_features(64, 64, rng)  # equal width 128
    den_pos = positive_random_features(q, w_pos) @ positive_random_features(k, w_pos).sum(axis=0)
    den_trig = trig_random_features(q, w_trig) @ trig_random_features(k, w_trig).sum(axis=0)
    assert np.all(den_pos > 0)
    assert np.any(den_trig <= 0)


def test_ratio_estimate_is_exact_for_equal_values():
    """With all values equal the numerator is c times the normaliser: the output is c for every draw."""
    rng = np.random.default_rng(10)
    q, k = rng.normal(size=(2, 5, 4))
    v = np.full((5, 3), 2.5)
    w = gaussian_features(3, 4, rng)
    out = linear_attention(q, k, v, lambda x: positive_random_features(x, w))
    assert np.allclose(out, 2.5, rtol=1e-12, atol=0)


@pytest.mark.parametrize("features", [positive_random_features, trig_random_features])
def test_orthogonal_random_features_are_unbiased(features):
    """Orthogonal features: the blocks of d rows are independent, so the block means give the error bar.

    The estimate is the mean of m/d independent block means; it must lie within 5 of their
    standard errors of exp(q.k).  (Rows made orthogonal but with fixed norms sqrt(d) are
    biased here by more than that: checked as a control.)
    """
    d, blocks = 4, 50_000
    q, k = np.array([[0.5, -0.4, 0.3, 0.2]]), np.array([[0.3, 0.6, -0.2, 0.4]])
    target = math.exp((q @ k.T).item())
    w = gaussian_features(d * blocks, d, np.random.default_rng(11), orthogonal=True)

    def block_means(omega):
        fq, fk = features(q, omega)[0], features(k, omega)[0]
        terms = fq * fk * (fq.size if features is positive_random_features else fq.size // 2)
        if features is trig_random_features:
            terms = terms[: d * blocks] + terms[d * blocks :]
        return terms.reshape(blocks, d).mean(axis=1)

    means = block_means(w)
    assert abs(means.mean() - target) < 5 * means.std(ddof=1) / math.sqrt(blocks)
    if features is positive_random_features:
        fixed = w * (math.sqrt(d) / np.linalg.norm(w, axis=1, keepdims=True))
        biased = block_means(fixed)
        assert abs(biased.mean() - target) > 5 * biased.std(ddof=1) / math.sqrt(blocks)


def test_trig_features_shape_and_formula():
    rng = np.random.default_rng(7)
    x, w = rng.normal(size=(2, 3)), rng.normal(size=(5, 3))
    f = trig_random_features(x, w)
    assert f.shape == (2, 10)
    r = np.exp(np.sum(x**2, axis=1) / 2)[:, None] / math.sqrt(5)
    np.testing.assert_allclose(f, np.concatenate([np.cos(x @ w.T), np.sin(x @ w.T)], axis=1) * r, rtol=1e-12)


def taylor_by_indices(x, order):
    """phi(x) built entry by entry from the index tuples (i_1..i_p)."""
    entries = []
    for p in range(order + 1):
        for idx in itertools.product(range(len(x)), repeat=p):
            entries.append(math.prod(x[i] for i in idx) / math.sqrt(math.factorial(p)))
    return np.array(entries)


@given(seeds, st.integers(1, 4), st.integers(0, 4))
def test_taylor_features_match_index_construction_and_series(seed, d, order):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, d))
    fq = taylor_features(q[None], order)[0]
    assert fq.shape == (sum(d**p for p in range(order + 1)),)
    np.testing.assert_allclose(fq, taylor_by_indices(q, order), rtol=1e-12, atol=1e-14)
    s = float(q @ k)
    series = sum(s**p / math.factorial(p) for p in range(order + 1))
    assert math.isclose(float(fq @ taylor_features(k[None], order)[0]), series, rel_tol=1e-10, abs_tol=1e-10)


@given(seeds, st.integers(1, 4), st.integers(1, 4))
def test_exp_limit_features_match_power(seed, d, n):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 3, d))
    fq, fk = exp_limit_features(q, n), exp_limit_features(k, n)
    assert fq.shape == (3, (d + 1) ** n)
    np.testing.assert_allclose(fq @ fk.T, (1 + q @ k.T / n) ** n, rtol=1e-10, atol=1e-10)


def test_exp_limit_features_are_not_positive_but_even_power_kernel_is():
    q, k = np.array([[3.0, 0.0]]), np.array([[-3.0, 0.0]])  # q.k = -9 < -n for n = 3
    assert (exp_limit_features(q, 3) @ exp_limit_features(k, 3).T).item() < 0
    assert (exp_limit_features(q, 4) @ exp_limit_features(k, 4).T).item() > 0


def test_odd_taylor_order_makes_negative_weights_even_does_not():
    q, k = np.array([[2.0, 0.0]]), np.array([[2.0, 0.0], [-2.0, 0.0]])  # q.k = 4 and -4
    for order in range(1, 8):
        a = linear_attention_weights(q, k, lambda x, order=order: taylor_features(x, order))
        assert (np.min(a) < 0) == (order % 2 == 1)


def test_linear_attention_rank_at_most_feature_dimension():
    rng = np.random.default_rng(8)
    q, k = rng.normal(size=(2, 40, 4)) * 0.5
    for m in (1, 3, 7, 15):
        w = gaussian_features(m, 4, rng)
        a = linear_attention_weights(q, k, lambda x, w=w: positive_random_features(x, w))
        assert np.linalg.matrix_rank(a) <= m
    a = linear_attention_weights(q, k, lambda x: taylor_features(x, 1))  # D = 1 + 4
    assert np.linalg.matrix_rank(a) <= 5


def test_causal_mask_lifts_the_rank_bound():
    """With one constant feature the causal matrix is lower-triangular with a positive diagonal: full rank."""
    rng = np.random.default_rng(9)
    q, k = rng.normal(size=(2, 12, 3))
    a = linear_attention_weights(q, k, lambda x: np.ones(x.shape[:-1] + (1,)), causal=True)
    assert np.linalg.matrix_rank(a) == 12


def test_size_limits_raise_instead_of_allocating():
    x = np.zeros((10, 64))
    with raises_message(ValueError, "max_entries", shapes=[(10, 64)], values=[2**24]):
        taylor_features(x, 4)  # 10 * (1 + 64 + ... + 64^4) > 2^24
    with raises_message(ValueError, "max_entries", shapes=[(10, 64)], values=[2**24]):
        exp_limit_features(x, 4)  # 10 * 65^4 > 2^24
    assert taylor_features(x, 3).shape == (10, 1 + 64 + 64**2 + 64**3)
    with raises_message(ValueError, "max_entries", shapes=[(1, 3)], values=[13, 12]):
        taylor_features(np.zeros((1, 3)), 2, max_entries=12)
    assert MAX_FEATURE_ENTRIES == 2**24


@pytest.mark.parametrize(
    "call, error, name, facts",
    [
        (lambda: gaussian_features(0, 3, np.random.default_rng()), ValueError, "m", dict(values=[1, 0], says="out of range")),
        (lambda: gaussian_features(2, 2.5, np.random.default_rng()), TypeError, "d", dict(values=[2.5], says="integer")),
        (lambda: gaussian_features(2, 3, 0), TypeError, "rng", dict(options=["numpy.random.Generator"], values=["int"])),
        (lambda: positive_random_features(np.zeros((2, 3)), np.zeros((4, 2))), ValueError, "omega",
         dict(names=["x"], shapes=["(m, 3)", (4, 2), (2, 3)])),
        (lambda: positive_random_features(np.zeros((2, 3)), np.zeros((4, 3)), stabilizer="max"), ValueError, "stabilizer",
         dict(values=["max"], options=["row", "global"])),
        (lambda: trig_random_features(np.zeros(3), np.zeros((4, 3))), ValueError, "x", dict(shapes=["(..., n, d)", (3,)])),
        (lambda: taylor_features(np.zeros((2, 3)), -1), ValueError, "order", dict(values=[0, -1], says="out of range")),
        (lambda: exp_limit_features(np.zeros((2, 3)), 0), ValueError, "n", dict(values=[1, 0], says="out of range")),
        (lambda: linear_attention(np.zeros((2, 3)), np.zeros((4, 3)), np.zeros((4, 1)), np.exp, causal=True), ValueError, "causal",
         dict(names=["q", "k"], values=[2, 4])),
        (lambda: linear_attention(np.zeros((2, 3)), np.zeros((4, 3)), np.zeros((5, 1)), np.exp), ValueError, "v",
         dict(names=["k"], shapes=["(..., 4, v)", (5, 1), (4, 3)])),
        (lambda: linear_attention(np.zeros((2, 3)), np.zeros((4, 3)), np.zeros((4, 1)), lambda x: x[..., :1, :]), ValueError,
         "feature_map(q)", dict(shapes=["(..., 2, D)", (1, 3)])),
        (lambda: linear_attention(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 1)), np.exp, chunk=0), ValueError, "chunk",
         dict(values=[1, 0], says="out of range")),
        (lambda: linear_attention(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 1)), np.exp, key_feature_map=1), TypeError,
         "key_feature_map", dict(values=["callable", "int"])),
        (lambda: linear_attention(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 1)), np.exp, key_feature_map=lambda x: x[..., :2]),
         ValueError, "key_feature_map(k)", dict(shapes=["(..., 2, 3)", (2, 2)])),
    ],
)
def test_bad_input_is_rejected(call, error, name, facts):
    with raises_message(error, name, **facts):
        call()
