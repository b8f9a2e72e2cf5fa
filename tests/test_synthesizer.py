"""attncore.synthesizer: loops, invariants, dependence structure, costs and errors."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from attncore import attention, softmax
from attncore._synthesizer import (
    FORMS,
    TILINGS,
    dense_features,
    dense_scores,
    factorized_dense_scores,
    factorized_random_scores,
    mixture_scores,
    mixture_weights,
    random_scores,
    synthesizer_attention,
    synthesizer_costs,
)
from strategies import batch_shapes, lengths, seeds, widths
from messages import raises_message


def relu(z):
    return z if z > 0 else 0.0


def dense_loop(x, w1, b1, w2, b2):
    """relu(x w1 + b1) w2 + b2 for one sequence, entry by entry."""
    n, d = x.shape
    f, e = w2.shape
    out = np.zeros((n, e))
    for i in range(n):
        hidden = [relu(sum(x[i, p] * w1[p, h] for p in range(d)) + b1[h]) for h in range(f)]
        for j in range(e):
            out[i, j] = sum(hidden[h] * w2[h, j] for h in range(f)) + b2[j]
    return out


def factorized_loop(fa, fb, tiling, form):
    """Factorized Dense scores from the index formulas, one entry at a time."""
    n, a = fa.shape
    b = fb.shape[1]

    def col(j, width, times):  # which factor column feeds expanded column j
        return j % width if tiling == "tile" else j // times

    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            left = fa[i, col(j, a, b)]
            right = fb[i, col(j, b, a)] if form == "as_written" else fb[j, col(i, b, a)]
            out[i, j] = left * right
    return out


def test_dense_matches_loop(rng):
    n, d, f = 5, 3, 4
    x, w1, b1 = rng.normal(size=(n, d)), rng.normal(size=(d, f)), rng.normal(size=f)
    w2, b2 = rng.normal(size=(f, n)), rng.normal(size=n)
    np.testing.assert_allclose(dense_scores(x, w1, w2, b1=b1, b2=b2), dense_loop(x, w1, b1, w2, b2), rtol=1e-12, atol=1e-12)


def test_dense_is_query_times_constant_keys(rng):
    """B = Q K^T with Q = [relu(x w1 + b1), 1] and K = [w2^T, b2]: K ignores the input."""
    n, d, f = 6, 4, 5
    w1, b1, w2, b2 = rng.normal(size=(d, f)), rng.normal(size=f), rng.normal(size=(f, n)), rng.normal(size=n)
    keys = np.hstack([w2.T, b2[:, None]])
    for _ in range(3):
        x = rng.normal(size=(n, d))
        queries = np.hstack([np.maximum(x @ w1 + b1, 0), np.ones((n, 1))])
        np.testing.assert_allclose(dense_scores(x, w1, w2, b1=b1, b2=b2), queries @ keys.T, rtol=1e-12, atol=1e-12)


@given(seeds, st.integers(2, 7), batch_shapes)
def test_dense_row_depends_on_own_token_only(seed, n, batch):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=batch + (n, 3))
    w1, w2 = rng.normal(size=(3, 4)), rng.normal(size=(4, n))
    t = int(rng.integers(n))
    y = x.copy()
    y[..., t, :] += 1.0 + rng.random(3)
    changed = np.any(dense_scores(y, w1, w2) != dense_scores(x, w1, w2), axis=-1)  # (..., n)
    others = np.delete(changed, t, axis=-1)
    assert not others.any()


@pytest.mark.parametrize(
    "call",
    [
        lambda rng: dense_scores(rng.normal(size=(5, 3)), rng.normal(size=(3, 4)), rng.normal(size=(4, 6))),
        lambda rng: random_scores(rng.normal(size=(6, 6)), 5),
        lambda rng: factorized_random_scores(rng.normal(size=(6, 2)), rng.normal(size=(6, 2)), 5),
        lambda rng: synthesizer_attention(rng.normal(size=(5, 3)), rng.normal(size=(6, 6)), rng.normal(size=(3, 2))),
    ],
    ids=["dense", "random", "factorized-random", "attention"],
)
def test_other_length_is_a_clear_error(rng, call):
    # the facts: the length given (5), the length the parameters fix (6) or the shape they need
    with raises_message(ValueError, values=[5, 6]):
        call(rng)


def test_length_error_names_the_reason(rng):
    with raises_message(ValueError, "r", values=[4, 7], shapes=[(4, 4)], remedy=("pad", "4")):
        random_scores(rng.normal(size=(4, 4)), 7)


def test_random_scores_rejects_non_square(rng):
    with raises_message(ValueError, "r", shapes=[(3, 4)], says="square"):
        random_scores(rng.normal(size=(3, 4)), 3)


@given(seeds, st.integers(1, 9), st.integers(1, 9))
def test_factorized_random_rank_bound(seed, n, k):
    rng = np.random.default_rng(seed)
    r1, r2 = rng.normal(size=(n, k)), rng.normal(size=(n, k))
    b = factorized_random_scores(r1, r2, n)
    assert b.shape == (n, n)
    assert np.linalg.matrix_rank(b) <= min(k, n)
    # the independent route: the sum of k outer products
    np.testing.assert_allclose(b, sum(np.outer(r1[:, c], r2[:, c]) for c in range(k)), rtol=1e-12, atol=1e-12)


def test_factorized_random_with_full_rank_reaches_any_matrix(rng):
    """Constant Q, K of width r give rank <= r; with r >= n every R is reached (R = R I^T)."""
    n = 5
    r = rng.normal(size=(n, n))
    np.testing.assert_array_equal(factorized_random_scores(r, np.eye(n), n), r)
    assert np.linalg.matrix_rank(r) == n
    assert max(np.linalg.matrix_rank(factorized_random_scores(rng.normal(size=(n, 2)), rng.normal(size=(n, 2)), n)) for _ in range(20)) == 2


def test_width_n_minus_1_reaches_any_fixed_map(rng):
    """Fixed queries of width n - 1 reach softmax(R) (one-layer) and R itself (two-layer, H >= 0)."""
    n = 6
    r, ones = rng.normal(size=(n, n)), np.ones(n)
    u = np.linalg.solve(r.T, ones)
    shifted = r - np.outer(u / (u @ u), ones)  # 1^T R^{-1} s = 1: rank n - 1, same softmax as R
    us, ss, vts = np.linalg.svd(shifted)
    b_thin = factorized_random_scores(us[:, : n - 1] * ss[: n - 1], vts[: n - 1].T, n)
    np.testing.assert_allclose(softmax(b_thin), softmax(r), atol=1e-12)
    assert np.abs(b_thin - r).max() > 1e-3  # the scores differ: only the map is reached
    w = np.linalg.solve(r, ones)
    b2 = w / (w @ w)  # b2 R^{-1} 1 = 1: R - 1 b2 has rank n - 1
    ua, sa, vta = np.linalg.svd(r - np.outer(ones, b2))
    a_part, w2 = ua[:, : n - 1] * sa[: n - 1], vta[: n - 1]
    t_shift = -a_part.min(axis=0)
    h = a_part + t_shift  # (n, n - 1), nonnegative, so relu(h I) = h
    scores = dense_scores(h, np.eye(n - 1), w2, b2=b2 - t_shift @ w2)
    np.testing.assert_allclose(scores, r, atol=1e-10)


@pytest.mark.parametrize("tiling", TILINGS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("a,b", [(2, 3), (3, 2), (2, 2), (4, 2), (1, 5)])
def test_factorized_dense_matches_index_formula(rng, tiling, form, a, b):
    n = a * b
    fa, fb = rng.normal(size=(n, a)), rng.normal(size=(n, b))
    np.testing.assert_array_equal(
        factorized_dense_scores(fa, fb, tiling=tiling, form=form), factorized_loop(fa, fb, tiling, form)
    )


def test_tile_and_repeat_differ(rng):
    fa, fb = rng.normal(size=(6, 2)), rng.normal(size=(6, 3))
    tile = factorized_dense_scores(fa, fb, tiling="tile")
    repeat = factorized_dense_scores(fa, fb, tiling="repeat")
    assert not np.allclose(tile, repeat)


@pytest.mark.parametrize("ab", [(2, 3), (3, 2), (4, 4), (3, 5), (2, 8), (4, 6), (8, 8)])
def test_factorized_dense_rank_is_its_distinct_column_count(rng, ab):
    """As written, the rank is the number of distinct column pairs, counted from the index
    formulas (lcm(a, b) tiled, a + b - gcd(a, b) repeated): max(a, b) when one divides the
    other, full only for coprime tiling; the transposed form has full rank. A claim that the
    as-written product has rank n at power-of-two lengths fails at (4, 4), (2, 8), (8, 8)."""
    a, b = ab
    n = a * b
    fa, fb = rng.normal(size=(n, a)), rng.normal(size=(n, b))
    pairs = {"tile": {(j % a, j % b) for j in range(n)}, "repeat": {(j // b, j // a) for j in range(n)}}
    assert len(pairs["tile"]) == math.lcm(a, b) and len(pairs["repeat"]) == a + b - math.gcd(a, b)
    for tiling in TILINGS:
        rank = np.linalg.matrix_rank(factorized_dense_scores(fa, fb, tiling=tiling))
        assert rank == len(pairs[tiling]), tiling
        if a % b == 0 or b % a == 0:
            assert rank == max(a, b) < n
        transposed = factorized_dense_scores(fa, fb, tiling=tiling, form="transposed")
        assert np.linalg.matrix_rank(transposed) == n


def test_factorized_dense_shapes_and_batch(rng):
    fa, fb = rng.normal(size=(2, 3, 6, 2)), rng.normal(size=(6, 3))
    assert factorized_dense_scores(fa, fb).shape == (2, 3, 6, 6)


def test_factorized_dense_needs_a_times_b_equal_n(rng):
    with raises_message(ValueError, "f_a", names=["f_b"], values=[2, 4, 6], says="divisible"):
        factorized_dense_scores(rng.normal(size=(6, 2)), rng.normal(size=(6, 2)))
    with raises_message(ValueError, "tiling", values=["kron"], options=["tile", "repeat"]):
        factorized_dense_scores(rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), tiling="kron")
    with raises_message(ValueError, "form", values=["T"], options=["as_written", "transposed"]):
        factorized_dense_scores(rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), form="T")


@pytest.mark.parametrize("tiling", TILINGS)
@given(seed=seeds, ab=st.sampled_from([(2, 2), (2, 3), (3, 2), (2, 4)]))
def test_factorized_dense_dependence_by_perturbation(tiling, seed, ab):
    """As written, token t moves row t only; transposed, it moves row t and column t."""
    a, b = ab
    n = a * b
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    # a large first-layer bias keeps every relu active, so moving a token moves its factor rows
    big = np.full(4, 50.0)
    wa = (rng.normal(size=(3, 4)), rng.normal(size=(4, a)))
    wb = (rng.normal(size=(3, 4)), rng.normal(size=(4, b)))
    t = int(rng.integers(n))
    y = x.copy()
    y[t] += 1.0
    for form in FORMS:
        def scores(z, form=form):
            fa = dense_features(z, *wa, b1=big)
            fb = dense_features(z, *wb, b1=big)
            return factorized_dense_scores(fa, fb, tiling=tiling, form=form)

        changed = scores(y) != scores(x)
        allowed = np.zeros((n, n), dtype=bool)
        allowed[t] = True
        if form == "transposed":
            allowed[:, t] = True
        assert not (changed & ~allowed).any()
        off_row_column = np.delete(changed[:, t], t)  # column t without entry (t, t)
        if form == "transposed":
            assert off_row_column.any()  # the transpose makes other queries depend on token t
        else:
            assert not off_row_column.any()


@given(seeds, st.integers(1, 6))
def test_mixture_weights_sum_to_one(seed, count):
    logits = np.random.default_rng(seed).normal(scale=5.0, size=count)
    alpha = mixture_weights(logits)
    assert np.all(alpha > 0)
    assert math.isclose(alpha.sum(), 1.0, rel_tol=0, abs_tol=1e-12)


@given(seeds, st.integers(1, 4), lengths)
def test_mixture_matches_loop_and_is_affine(seed, count, n):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=count)
    parts = [rng.normal(size=(n, n)) for _ in range(count)]
    alpha = np.exp(logits - logits.max())
    alpha /= alpha.sum()
    expected = sum(w * p for w, p in zip(alpha, parts))
    np.testing.assert_allclose(mixture_scores(parts, logits), expected, rtol=1e-10, atol=1e-12)
    # weights summing to 1: a common constant added to every part passes through unchanged
    np.testing.assert_allclose(mixture_scores([p + 3.0 for p in parts], logits), expected + 3.0, rtol=1e-10, atol=1e-12)


def test_mixture_errors(rng):
    with raises_message(ValueError, "logits", values=[1, 2]):
        mixture_scores([np.zeros((3, 3))], np.zeros(2))
    with raises_message(ValueError, shapes=[(3, 3), (4, 4)], says="different"):
        mixture_scores([np.zeros((3, 3)), np.zeros((4, 4))], np.zeros(2))


@given(seeds, st.integers(1, 6), widths, batch_shapes)
def test_vanilla_scores_give_attention(seed, n, d, batch):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=batch + (n, d))
    wq, wk, wv = (rng.normal(size=(d, d)) for _ in range(3))
    q, k = x @ wq, x @ wk
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    np.testing.assert_allclose(synthesizer_attention(x, scores, wv), attention(q, k, x @ wv), rtol=1e-9, atol=1e-10)


@given(seeds, st.integers(1, 7), st.booleans())
def test_identical_tokens_give_identical_outputs(seed, n, causal):
    """The probe of identical tokens: a row-stochastic mixing of identical rows is that row."""
    rng = np.random.default_rng(seed)
    x = np.tile(rng.normal(size=4), (n, 1))
    mask = np.tril(np.ones((n, n), dtype=bool)) if causal else None
    wv = rng.normal(size=(4, 3))
    for scores in (rng.normal(scale=4.0, size=(n, n)), dense_scores(x, rng.normal(size=(4, 5)), rng.normal(size=(5, n)))):
        y = synthesizer_attention(x, scores, wv, mask=mask)
        np.testing.assert_allclose(y, np.tile(x[0] @ wv, (n, 1)), rtol=1e-9, atol=1e-12)


def circulant_scores(rho, shifts):
    n = len(rho)
    return np.array([[rho[(i - j) % n] + shifts[i] for j in range(n)] for i in range(n)])


@given(seeds, st.integers(1, 7))
def test_circulant_random_is_a_circular_convolution(seed, n):
    rng = np.random.default_rng(seed)
    rho, shifts = rng.normal(size=n), rng.normal(size=n)
    x, wv = rng.normal(size=(n, 3)), rng.normal(size=(3, 2))
    kernel = np.exp(rho - rho.max())
    kernel /= kernel.sum()
    values = x @ wv
    conv = np.array([[sum(kernel[s] * values[(i - s) % n, c] for s in range(n)) for c in range(2)] for i in range(n)])
    np.testing.assert_allclose(synthesizer_attention(x, random_scores(circulant_scores(rho, shifts), n), wv), conv, rtol=1e-10, atol=1e-12)


@given(seeds, st.integers(2, 7))
def test_circulant_random_commutes_with_cyclic_shift(seed, n):
    rng = np.random.default_rng(seed)
    r = circulant_scores(rng.normal(size=n), rng.normal(size=n))
    x, wv = rng.normal(size=(n, 3)), rng.normal(size=(3, 2))
    np.testing.assert_allclose(
        synthesizer_attention(np.roll(x, 1, axis=0), r, wv), np.roll(synthesizer_attention(x, r, wv), 1, axis=0), rtol=1e-10, atol=1e-12
    )


def test_generic_random_is_not_a_convolution(rng):
    n = 5
    r, x, wv = rng.normal(size=(n, n)), rng.normal(size=(n, 3)), rng.normal(size=(3, 2))
    a = softmax(r)
    toeplitz = all(np.isclose(a[i, j], a[i + 1, j + 1]) for i in range(n - 1) for j in range(n - 1))
    assert not toeplitz
    assert not np.allclose(synthesizer_attention(np.roll(x, 1, axis=0), r, wv), np.roll(synthesizer_attention(x, r, wv), 1, axis=0))


def toeplitz_from_offsets(kappa):
    """The n x n Toeplitz matrix A_ij = kappa_{i-j}, kappa indexed -(n-1), ..., n-1."""
    n = (len(kappa) + 1) // 2
    return np.array([[kappa[i - j + n - 1] for j in range(n)] for i in range(n)])


@given(seeds, st.integers(2, 7))
def test_positive_row_stochastic_toeplitz_is_circulant(seed, n):
    """Toeplitz with equal row sums forces kappa_s = kappa_{s-n}: sample that set, check periodicity."""
    rng = np.random.default_rng(seed)
    # the linear map kappa -> (sum of row i+1) - (sum of row i), i = 0..n-2, built column by column
    basis = np.eye(2 * n - 1)
    diffs = np.array([np.diff(toeplitz_from_offsets(e).sum(axis=1)) for e in basis]).T  # (n-1, 2n-1)
    _, sing, vt = np.linalg.svd(diffs)
    null = vt[int(np.sum(sing > 1e-10)):]  # orthonormal basis of the null space, (n, 2n-1)
    assert null.shape == (n, 2 * n - 1)
    kappa = rng.normal(size=n) @ null  # a random Toeplitz matrix with equal row sums
    kappa = kappa + 1.0 - kappa.min()  # constants stay in the null space: now positive
    a = toeplitz_from_offsets(kappa)
    a /= a[0].sum()  # row-stochastic, all rows sum to 1
    np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-12)
    for s in range(1, n):
        assert math.isclose(kappa[s + n - 1], kappa[s - 1], rel_tol=1e-9)  # kappa_s == kappa_{s-n}
    # and it is the softmax of circulant scores with the kernel of its first column
    kernel = a[:, 0]
    np.testing.assert_allclose(softmax(circulant_scores(np.log(kernel), np.zeros(n))), a, rtol=1e-10)


def test_permutation_symmetry_per_variant(rng):
    n, d = 5, 3
    x, wv = rng.normal(size=(n, d)), rng.normal(size=(d, 2))
    perm = np.array([2, 0, 4, 1, 3])
    w1, w2 = rng.normal(size=(d, 4)), rng.normal(size=(4, n))
    wq, wk = rng.normal(size=(d, d)), rng.normal(size=(d, d))

    def vanilla(z):
        return (z @ wq) @ (z @ wk).T / math.sqrt(d)

    r = rng.normal(size=(n, n))
    equivariant = {}
    for name, score in [("vanilla", vanilla), ("dense", lambda z: dense_scores(z, w1, w2)), ("random", lambda z: r)]:
        equivariant[name] = np.allclose(synthesizer_attention(x[perm], score(x[perm]), wv), synthesizer_attention(x, score(x), wv)[perm])
    assert equivariant == {"vanilla": True, "dense": False, "random": False}
    # the one equivariant family of Random scores: a row shift plus a constant on the diagonal
    special = rng.normal(size=(n, 1)) + 2.5 * np.eye(n)
    assert np.allclose(synthesizer_attention(x[perm], special, wv), synthesizer_attention(x, special, wv)[perm])


class CountingOps:
    """Products done by loops, counting one FLOP per multiplication and one per addition.

    A dot product of length p is counted as p multiplications and p additions
    (accumulating into 0), the convention of ``synthesizer_costs``.  Biases, relu, the
    1/sqrt(d_k) scale and the softmax are done with numpy and not counted, as documented;
    ``bias`` makes a bias array that is used but, like every variant's biases, not counted.
    """

    def __init__(self):
        self.flops = 0
        self.params = 0

    def param(self, array):
        self.params += array.size
        return array

    def bias(self, array):
        return array

    def matmul(self, left, right):
        rows, inner = left.shape
        cols = right.shape[1]
        out = np.zeros((rows, cols))
        for i in range(rows):
            for j in range(cols):
                acc = 0.0
                for p in range(inner):
                    acc = acc + left[i, p] * right[p, j]
                    self.flops += 2
                out[i, j] = acc
        return out

    def multiply(self, left, right):  # elementwise
        self.flops += left.size
        return left * right

    def scale(self, c, array):
        self.flops += array.size
        return c * array

    def add(self, left, right):
        self.flops += left.size
        return left + right


def counted_scores(ops, name, x, rng, *, f, k, rank, a):
    """One forward pass of the scores of variant `name`, every product counted."""
    n, d = x.shape
    b = n // a

    def dense(width):
        w1, b1 = ops.param(rng.normal(size=(d, f))), ops.bias(rng.normal(size=f))
        w2, b2 = ops.param(rng.normal(size=(f, width))), ops.bias(rng.normal(size=width))
        return ops.matmul(np.maximum(ops.matmul(x, w1) + b1, 0.0), w2) + b2, (w1, b1, w2, b2)

    if name == "vanilla":  # query and key maps with biases, which are not counted, as Dense's
        wq, wk = ops.param(rng.normal(size=(d, k))), ops.param(rng.normal(size=(d, k)))
        bq, bk = ops.bias(rng.normal(size=k)), ops.bias(rng.normal(size=k))
        scores = ops.matmul(ops.matmul(x, wq) + bq, (ops.matmul(x, wk) + bk).T) / math.sqrt(k)
        return scores, (x @ wq + bq) @ (x @ wk + bk).T / math.sqrt(k)
    if name == "dense":
        scores, weights = dense(n)
        return scores, dense_scores(x, weights[0], weights[2], b1=weights[1], b2=weights[3])
    if name == "random":
        r = ops.param(rng.normal(size=(n, n)))
        return r, random_scores(r, n)
    if name == "fixed random":
        r = rng.normal(size=(n, n))  # not trainable: no parameters
        return r, random_scores(r, n)
    if name == "factorized dense":
        # one hidden layer shared by the two factors, then output layers of widths a and b
        fab, w = dense(a + b)
        fa, fb = fab[:, :a], fab[:, a:]
        scores = ops.multiply(np.tile(fa, (1, b)), np.tile(fb, (1, a)))
        h = dense_features(x, w[0], w[2], b1=w[1], b2=w[3])
        ref = factorized_dense_scores(h[:, :a], h[:, a:])
        return scores, ref
    if name == "factorized random":
        r1, r2 = ops.param(rng.normal(size=(n, rank))), ops.param(rng.normal(size=(n, rank)))
        return ops.matmul(r1, r2.T), factorized_random_scores(r1, r2, n)
    other = name.split(" + ")[0]
    first, first_ref = counted_scores(ops, other, x, rng, f=f, k=k, rank=rank, a=a)
    second, second_ref = counted_scores(ops, "vanilla", x, rng, f=f, k=k, rank=rank, a=a)
    logits = ops.param(rng.normal(size=2))
    alpha = mixture_weights(logits)
    scores = ops.add(ops.scale(alpha[0], first), ops.scale(alpha[1], second))
    return scores, mixture_scores([first_ref, second_ref], logits)


def test_costs_against_counting_arrays(rng):
    """Count parameters and FLOPs in an instrumented forward pass of every variant."""
    n, d, f, k, v, rank, a = 6, 4, 3, 2, 3, 2, 2
    costs = synthesizer_costs(n, d, k=k, v=v, f=f, a=a, rank=rank)
    x = rng.normal(size=(n, d))
    for name, cost in costs.items():
        ops = CountingOps()
        scores, reference = counted_scores(ops, name, x, rng, f=f, k=k, rank=rank, a=a)
        np.testing.assert_allclose(scores, reference, rtol=1e-12, atol=1e-12)  # the pass counted is the real one
        assert (ops.params, ops.flops) == (cost["score_params"], cost["score_flops"]), name
        w_v = ops.param(rng.normal(size=(d, v)))
        out = ops.matmul(softmax(scores), ops.matmul(x, w_v))
        np.testing.assert_allclose(out, synthesizer_attention(x, reference, w_v), rtol=1e-10, atol=1e-12)
        assert (ops.params, ops.flops) == (cost["params"], cost["flops"]), name


@pytest.mark.parametrize("n, d, a, rank", [(64, 512, 8, 8), (12, 6, 3, 2), (7, 3, 7, 1)])
def test_score_parameters_are_the_papers(n, d, a, rank):
    """With f = d, the score parameters of the paper's overview of the variants (its Table 1):
    d^2 + d n for Dense, n^2 for Random, d^2 + d (a + b) for Factorized Dense, 2 n k for
    Factorized Random (its k is our rank), no biases; and 2 d^2 for vanilla attention at k = d."""
    b = n // a
    paper = {"vanilla": 2 * d**2, "dense": d**2 + d * n, "random": n**2, "fixed random": 0,
             "factorized dense": d**2 + d * (a + b), "factorized random": 2 * n * rank}
    costs = synthesizer_costs(n, d, k=d, f=d, a=a, rank=rank)
    assert {name: costs[name]["score_params"] for name in paper} == paper


def test_costs_default_factor_width():
    assert synthesizer_costs(12, 4)["factorized dense"]["score_params"] == synthesizer_costs(12, 4, a=4)["factorized dense"]["score_params"]
    with raises_message(ValueError, "a", names=["n"], values=[12, 5], says="divisible"):
        synthesizer_costs(12, 4, a=5)


@pytest.mark.parametrize("f, seed", [(2, 0), (2, 1), (2, 2), (3, 0), (3, 1)])
def test_factorized_dense_from_one_hidden_layer_has_the_rank_of_its_products(f, seed):
    """Both factors come from one hidden layer h = relu(x W1 + b1) of width f, so every column of the
    as-written scores (a product of two affine functions of h, row by row) lies in the span of the
    f(f+1)/2 products h_p h_q, the f entries h_p and 1: rank at most f(f+1)/2 + f + 1; the
    transposed form, a sum of (f + 1)^2 separable products, at most (f + 1)^2; Dense's own scores
    h W2 + b2 at most f + 1. At f = 2, n = 15 these draws reach 6 and 9 of 15, the chapter's
    numbers (relu can zero a unit on some tokens, so other draws may fall lower). The claim "full
    rank for coprime tiling" holds for free factors only, and fails here."""
    rng = np.random.default_rng(seed)
    a, b, n, d = 3, 5, 15, 6
    x, w1, b1 = rng.normal(size=(n, d)), rng.normal(size=(d, f)), rng.normal(size=f)
    f_a = dense_features(x, w1, rng.normal(size=(f, a)), b1=b1, b2=rng.normal(size=a))
    f_b = dense_features(x, w1, rng.normal(size=(f, b)), b1=b1, b2=rng.normal(size=b))
    bounds = (f * (f + 1) // 2 + f + 1, (f + 1) ** 2)
    ranks = tuple(np.linalg.matrix_rank(factorized_dense_scores(f_a, f_b, tiling="tile", form=form))
                  for form in ("as_written", "transposed"))
    assert all(r <= bound for r, bound in zip(ranks, bounds)) and ranks[0] < n, (ranks, bounds)
    assert f != 2 or ranks == (6, 9)
    dense = dense_scores(x, w1, rng.normal(size=(f, n)), b1=b1, b2=rng.normal(size=n))
    assert np.linalg.matrix_rank(dense) <= f + 1 < n


@given(seed=seeds, n=st.integers(3, 7))
def test_mixtures_with_vanilla_keep_token_to_token(seed, n):
    """D+V and R+V keep entry (i, j) a function of token j; Dense and Random do not read token j."""
    rng = np.random.default_rng(seed)
    d, k = 3, 2
    x = rng.normal(size=(n, d))
    w_q, w_k = rng.normal(size=(2, d, k))
    w1, w2, r = rng.normal(size=(d, 4)), rng.normal(size=(4, n)), rng.normal(size=(n, n))
    logits = rng.normal(size=2)

    def vanilla(x):  # by hand: the loop over pairs, not attncore
        return np.array([[x[i] @ w_q @ w_k.T @ x[j] / math.sqrt(k) for j in range(n)] for i in range(n)])

    t = int(rng.integers(n))
    y = x.copy()
    y[t] += 1.0 + rng.random(d)
    others = np.arange(n) != t
    for pure in (lambda x: random_scores(r, n), lambda x: dense_scores(x, w1, w2)):
        assert np.array_equal(pure(y)[others, t], pure(x)[others, t])
    for pure in (lambda x: random_scores(r, n), lambda x: dense_scores(x, w1, w2)):
        mixed = [mixture_scores([pure(z), vanilla(z)], logits) for z in (x, y)]
        alpha = mixture_weights(logits)
        expected = alpha[1] * (vanilla(y) - vanilla(x))[others, t]
        np.testing.assert_allclose((mixed[1] - mixed[0])[others, t], expected, rtol=1e-9, atol=1e-12)
        assert np.abs(expected).max() > 0
