"""Evidence for notational slips of the source documents, each read both ways.

Every test computes the reading the course adopts from first principles (a loop, a
closed form, a count), compares it with attncore, and shows that a wrong variant
(another normaliser, another covariance, another width) gives a different answer.
"""

import math

import numpy as np
import pytest

import attncore
from attncore._kernels import exp_limit_features, positive_random_features, taylor_features


def test_softmax_normaliser_has_its_own_bound_index():
    """a_ij = exp(q_i.k_j) / sum_l exp(q_i.k_l): a loop with a separate index l matches attncore.

    The post's sum_j uses the free letter j as the bound index too; the bound j shadows the free
    one, so its value is this softmax, and a letter of its own removes the clash.  A normaliser over
    the wrong axis (the queries) gives other weights, whose rows do not sum to 1.
    """
    rng = np.random.default_rng(0)
    n, m, d = 5, 7, 4
    q, k = rng.normal(size=(n, d)), rng.normal(size=(m, d))
    loop = np.empty((n, m))
    for i in range(n):
        normaliser = sum(math.exp(float(q[i] @ k[l])) for l in range(m))
        for j in range(m):
            loop[i, j] = math.exp(float(q[i] @ k[j])) / normaliser
    weights = attncore.attention_weights(q, k, scale=1.0)
    np.testing.assert_allclose(weights, loop, rtol=1e-12, atol=0)
    scores = np.exp(q @ k.T)  # (n, m)
    wrong_axis = scores / scores.sum(axis=0, keepdims=True)
    assert np.max(np.abs(weights - wrong_axis)) > 0.05
    assert np.max(np.abs(wrong_axis.sum(axis=1) - 1)) > 0.05


@pytest.mark.parametrize("tokens", [1, 3, 8, 21])
def test_feature_width_is_set_by_the_order_not_by_the_sequence_length(tokens):
    """The post's n is both the sequence length and the truncation order, its m both the number of
    random features and the series index: the four are independent.  The width of each feature
    map is fixed by the head size and the order (or the feature count), whatever the number of
    tokens, and the series index runs over the blocks of one feature vector.
    """
    rng = np.random.default_rng(1)
    d = 3
    x = 0.3 * rng.normal(size=(tokens, d))
    for order in (0, 1, 2, 3):
        phi = taylor_features(x, order)
        assert phi.shape == (tokens, sum(d**p for p in range(order + 1)))
        # block p of the feature vector is the p-th tensor power over sqrt(p!): its inner products
        # are the p-th term of the series, so the index p of the series is not a count of tokens
        np.testing.assert_allclose(phi @ phi.T, sum((x @ x.T) ** p / math.factorial(p) for p in range(order + 1)),
                                   rtol=1e-12, atol=1e-14)
    for power in (1, 2, 3):
        assert exp_limit_features(x, power).shape == (tokens, (d + 1) ** power)
    for features in (5, 40):
        omega = rng.normal(size=(features, d))
        assert positive_random_features(x, omega).shape == (tokens, features)


def _expected_product(q, k, cov):
    """E over omega ~ N(0, cov) of exp(omega.q - |q|^2/2) exp(omega.k - |k|^2/2), in closed form."""
    s = q + k
    return math.exp(0.5 * float(s @ cov @ s) - 0.5 * float(q @ q) - 0.5 * float(k @ k))


def test_performer_covariance_is_the_identity_not_all_ones():
    """With omega ~ N(0, I_d) the expectation is exp(q.k), and attncore's features estimate it
    without bias; with the all-ones covariance 11^T (omega = z 1) it is something else.
    """
    rng = np.random.default_rng(2)
    d = 4
    q, k = 0.4 * rng.normal(size=d), 0.4 * rng.normal(size=d)
    target = math.exp(float(q @ k))
    assert _expected_product(q, k, np.eye(d)) == pytest.approx(target, rel=1e-12)
    ones = _expected_product(q, k, np.ones((d, d)))
    assert abs(ones / target - 1) > 0.05

    # Monte Carlo with attncore's features, in independent blocks for an error bar
    blocks, per_block = 40, 5000
    for omega_of, expected in (
        (lambda: rng.normal(size=(per_block, d)), target),
        (lambda: rng.normal(size=(per_block, 1)) * np.ones((1, d)), ones),
    ):
        estimates = []
        for _ in range(blocks):
            omega = omega_of()
            fq = positive_random_features(q[None, :], omega)[0]
            fk = positive_random_features(k[None, :], omega)[0]
            estimates.append(float(fq @ fk))
        mean = float(np.mean(estimates))
        stderr = float(np.std(estimates, ddof=1) / math.sqrt(blocks))
        assert abs(mean - expected) < 5 * stderr + 1e-12
    assert abs(ones - target) > 10 * stderr
