"""Chapter 2: permutation symmetry of attention, blocks and norms, and what biases do.

Property tests over random shapes, permutations, dtypes and seeds, with and
without the projection biases, plus the counterexamples the chapter relies on.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

from attncore import (
    attention,
    batch_norm,
    causal_mask,
    ffn,
    init_block_params,
    instance_norm,
    inverse_permutation,
    layer_norm,
    multi_head_attention,
    permutation_matrix,
    permute_tokens,
    softmax,
    transformer_block,
)
from attncore._linear import linear
from strategies import batch_shapes, dtypes, normal, permutations, seeds

PLACEMENTS = ["post", "pre", "branch"]

#: Looser than strategies.tol: these compare two evaluations of a deep
#: composition (block, norms) whose roundings differ, not one formula.
_LOOSE = {np.dtype(np.float32): dict(rtol=2e-4, atol=2e-5), np.dtype(np.float64): dict(rtol=1e-9, atol=1e-11)}


def loose(dtype):
    return _LOOSE[np.dtype(dtype)]


def mha_params(rng, d, dtype, bias):
    w = [normal(rng, (d, d), dtype, d**-0.5) for _ in range(4)]
    b = {name: (normal(rng, d, dtype) if bias else None) for name in ("b_q", "b_k", "b_v", "b_o")}
    return w, b


# --- permutation matrices and the document's column convention ---------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_every_permutation_matrix_is_orthogonal_and_inverts(n):
    for perm in itertools.permutations(range(n)):
        p = permutation_matrix(np.array(perm))
        assert np.array_equal(p @ p.T, np.eye(n)) and np.array_equal(p.T @ p, np.eye(n))
        assert np.array_equal(p.T, permutation_matrix(inverse_permutation(np.array(perm))))


@given(st.integers(1, 300).flatmap(permutations))
def test_permutation_matrix_orthogonal_large_n(perm):
    p = permutation_matrix(perm)
    np.testing.assert_array_equal(p @ p.T, np.eye(perm.size))


@given(st.integers(1, 8).flatmap(permutations), seeds)
def test_column_convention_is_transpose(perm, seed):
    """Tokens as columns, sigma(X) = X Pi, is tokens as rows with P = Pi^T on the left."""
    x = np.random.default_rng(seed).normal(size=(perm.size, 3))  # rows = tokens (ours)
    x_doc = x.T  # columns = tokens (the document's)
    pi = np.zeros((perm.size, perm.size))
    pi[perm, np.arange(perm.size)] = 1.0  # column j of X Pi is column perm[j] of X
    np.testing.assert_array_equal(x_doc @ pi, x_doc[:, perm])
    np.testing.assert_array_equal(pi, permutation_matrix(perm).T)
    np.testing.assert_array_equal((x_doc @ pi).T, permutation_matrix(perm) @ x)


# --- softmax and single-head attention -----------------------------------------------------

@given(seeds, st.integers(1, 7).flatmap(permutations), dtypes)
def test_softmax_commutes_with_permutations(seed, perm, dtype):
    x = normal(np.random.default_rng(seed), (2, perm.size), dtype, 3.0)
    np.testing.assert_allclose(softmax(x[:, perm]), softmax(x)[:, perm], rtol=1e-6, atol=1e-7)


@given(seed=seeds, n=st.integers(1, 6), m=st.integers(1, 6), k=st.integers(1, 5), batch=batch_shapes, dtype=dtypes, data=st.data())
def test_attention_query_equivariant_key_value_invariant(seed, n, m, k, batch, dtype, data):
    rng = np.random.default_rng(seed)
    q, kk, v = normal(rng, batch + (n, k), dtype), normal(rng, batch + (m, k), dtype), normal(rng, batch + (m, 3), dtype)
    pn, pm = data.draw(permutations(n)), data.draw(permutations(m))
    out = attention(q, kk, v)
    np.testing.assert_allclose(attention(permute_tokens(q, pn), kk, v), permute_tokens(out, pn), **loose(dtype))
    np.testing.assert_allclose(attention(q, permute_tokens(kk, pm), permute_tokens(v, pm)), out, **loose(dtype))


def test_permuting_keys_without_values_changes_output():
    q, k, v = np.array([[1.0]]), np.array([[0.0], [2.0]]), np.array([[0.0], [1.0]])
    assert not np.allclose(attention(q, k[[1, 0]], v), attention(q, k, v))


def test_causal_mask_breaks_equivariance_unless_permuted_too(rng):
    x = rng.normal(size=(4, 3))
    perm = np.array([3, 1, 0, 2])
    p = permutation_matrix(perm).astype(bool)
    mask = causal_mask(4)
    out = attention(x, x, x, mask=mask)
    assert not np.allclose(attention(x[perm], x[perm], x[perm], mask=mask), out[perm])
    permuted_mask = mask[np.ix_(perm, perm)]  # P M P^T
    np.testing.assert_array_equal(permuted_mask, (p.astype(int) @ mask @ p.T.astype(int)).astype(bool))
    np.testing.assert_allclose(attention(x[perm], x[perm], x[perm], mask=permuted_mask), out[perm], rtol=1e-12, atol=1e-14)


def test_position_dependent_score_bias_breaks_equivariance(rng):
    x = rng.normal(size=(4, 3))
    i = np.arange(4)
    rel = -0.5 * np.abs(i[:, None] - i[None, :])  # depends on positions i, j
    perm = np.array([2, 0, 3, 1])
    out = attention(x, x, x, bias=rel)
    assert not np.allclose(attention(x[perm], x[perm], x[perm], bias=rel), out[perm])


# --- the three projection biases ---------------------------------------------------------------

@given(seed=seeds, n=st.integers(1, 6), m=st.integers(1, 6), k=st.integers(1, 5), batch=batch_shapes, dtype=dtypes, with_bq=st.booleans())
def test_key_bias_cancels(seed, n, m, k, batch, dtype, with_bq):
    rng = np.random.default_rng(seed)
    q, kk, v = normal(rng, batch + (n, k), dtype), normal(rng, batch + (m, k), dtype), normal(rng, batch + (m, 2), dtype)
    if with_bq:
        q = q + normal(rng, k, dtype)
    b_k = normal(rng, k, dtype)
    np.testing.assert_allclose(attention(q, kk + b_k, v), attention(q, kk, v), **loose(dtype))


@given(seed=seeds, n=st.integers(1, 6), m=st.integers(1, 6), k=st.integers(1, 5), batch=batch_shapes, dtype=dtypes)
def test_value_bias_passes_through(seed, n, m, k, batch, dtype):
    rng = np.random.default_rng(seed)
    q, kk, v = normal(rng, batch + (n, k), dtype), normal(rng, batch + (m, k), dtype), normal(rng, batch + (m, 3), dtype)
    b_v = normal(rng, 3, dtype)
    np.testing.assert_allclose(attention(q, kk, v + b_v), attention(q, kk, v) + b_v, **loose(dtype))


def test_query_bias_changes_output():
    """Counterexample: one query, two keys; b_Q tilts the weights towards key 2."""
    q, k, v = np.array([[0.0]]), np.array([[0.0], [1.0]]), np.array([[0.0], [1.0]])
    np.testing.assert_allclose(attention(q, k, v), [[0.5]])
    shifted = attention(q + 1.0, k, v)  # weights softmax(0, 1): output e/(1+e)
    np.testing.assert_allclose(shifted, [[np.e / (1 + np.e)]], rtol=1e-15)


@given(seed=seeds, n=st.integers(2, 6), h=st.integers(1, 3), dtype=dtypes)
def test_query_bias_in_kernel_of_key_weights_has_no_effect(seed, n, h, dtype):
    """b_Q adds c_j W_K^(h) b_Q^(h)T to the scores of head h; it vanishes when that is 0 in every head."""
    rng = np.random.default_rng(seed)
    kw = 2
    d = h * kw
    x, w_q, w_o = normal(rng, (n, d), dtype), normal(rng, (d, d), dtype), normal(rng, (d, d), dtype)
    w_v = normal(rng, (d, d), dtype)
    w_k = normal(rng, (d, d), dtype)
    b_q = np.zeros(d, dtype)
    for head in range(h):
        col = head * kw + int(rng.integers(kw))  # one column of this head's block
        w_k[:, col] = 0.0  # W_K^(h) e_col = 0
        b_q[col] = normal(rng, (), dtype)
    args = (x, w_q, w_k, w_v, w_o, h)
    np.testing.assert_allclose(multi_head_attention(*args, b_q=b_q), multi_head_attention(*args), **loose(dtype))


def test_query_bias_whole_kernel_condition_is_not_enough_for_two_heads(rng):
    """W_K b_Q^T = 0 overall, but not head by head: the two-head output changes."""
    d = 4
    x = rng.normal(size=(5, d))
    w = [rng.normal(size=(d, d)) for _ in range(4)]
    w[1][:, 2] = -w[1][:, 0]
    b_q = np.array([1.0, 0.0, 1.0, 0.0])
    np.testing.assert_allclose(w[1] @ b_q, 0.0, atol=1e-15)
    np.testing.assert_allclose(multi_head_attention(x, *w, 1, b_q=b_q), multi_head_attention(x, *w, 1), rtol=1e-12, atol=1e-13)
    assert not np.allclose(multi_head_attention(x, *w, 2, b_q=b_q), multi_head_attention(x, *w, 2))


@given(seed=seeds, n=st.integers(1, 6), h=st.integers(1, 3), kw=st.integers(1, 3), batch=batch_shapes, dtype=dtypes)
def test_multi_head_key_bias_cancels_value_bias_is_constant(seed, n, h, kw, batch, dtype):
    rng = np.random.default_rng(seed)
    d = h * kw
    x = normal(rng, batch + (n, d), dtype)
    w, b = mha_params(rng, d, dtype, bias=True)
    base = multi_head_attention(x, *w, h, b_q=b["b_q"])
    np.testing.assert_allclose(multi_head_attention(x, *w, h, b_q=b["b_q"], b_k=b["b_k"]), base, **loose(dtype))
    with_v = multi_head_attention(x, *w, h, b_q=b["b_q"], b_v=b["b_v"])
    np.testing.assert_allclose(with_v, base + b["b_v"] @ w[3], **loose(dtype))


# --- shared biases and token-wise layers cannot break the symmetry --------------------------

@given(seed=seeds, n=st.integers(1, 7), batch=batch_shapes, dtype=dtypes, bias=st.booleans(), data=st.data())
def test_linear_with_shared_bias_commutes_with_permutations(seed, n, batch, dtype, bias, data):
    rng = np.random.default_rng(seed)
    x, w = normal(rng, batch + (n, 4), dtype), normal(rng, (4, 3), dtype)
    b = normal(rng, 3, dtype) if bias else None
    perm = data.draw(permutations(n))
    np.testing.assert_allclose(linear(permute_tokens(x, perm), w, b), permute_tokens(linear(x, w, b), perm), **loose(dtype))


def test_per_token_bias_breaks_equivariance(rng):
    """A bias that differs between positions (a positional encoding) does break it."""
    x, w = rng.normal(size=(3, 2)), rng.normal(size=(2, 2))
    per_token = rng.normal(size=(3, 2))
    perm = np.array([1, 2, 0])
    assert not np.allclose(x[perm] @ w + per_token, (x @ w + per_token)[perm])


@given(seed=seeds, n=st.integers(1, 7), d=st.integers(1, 6), batch=batch_shapes, dtype=dtypes, affine=st.booleans(), data=st.data())
def test_norms_are_token_permutation_equivariant(seed, n, d, batch, dtype, affine, data):
    rng = np.random.default_rng(seed)
    x = normal(rng, batch + (n, d), dtype)
    g, b = (normal(rng, d, dtype), normal(rng, d, dtype)) if affine else (None, None)
    perm = data.draw(permutations(n))
    xp = permute_tokens(x, perm)
    for norm in (layer_norm, instance_norm):
        np.testing.assert_allclose(norm(xp, g, b), permute_tokens(norm(x, g, b), perm), **loose(dtype))
    if x.ndim >= 3:
        np.testing.assert_allclose(batch_norm(xp, g, b), permute_tokens(batch_norm(x, g, b), perm), **loose(dtype))


@given(seed=seeds, n=st.integers(1, 7), f=st.integers(1, 8), batch=batch_shapes, dtype=dtypes, bias=st.booleans(), data=st.data())
def test_ffn_is_token_permutation_equivariant(seed, n, f, batch, dtype, bias, data):
    rng = np.random.default_rng(seed)
    x = normal(rng, batch + (n, 4), dtype)
    w1, w2 = normal(rng, (4, f), dtype), normal(rng, (f, 4), dtype)
    b1, b2 = (normal(rng, f, dtype), normal(rng, 4, dtype)) if bias else (None, None)
    perm = data.draw(permutations(n))
    np.testing.assert_allclose(ffn(permute_tokens(x, perm), w1, b1, w2, b2), permute_tokens(ffn(x, w1, b1, w2, b2), perm), **loose(dtype))


# --- LayerNorm and BatchNorm against a bias -------------------------------------------------------

@given(seed=seeds, b=st.integers(2, 4), n=st.integers(1, 5), d=st.integers(1, 6), dtype=dtypes)
def test_batch_norm_removes_any_bias(seed, b, n, d, dtype):
    rng = np.random.default_rng(seed)
    x, bias = normal(rng, (b, n, d), dtype), normal(rng, d, dtype)
    np.testing.assert_allclose(batch_norm(x + bias), batch_norm(x), **loose(dtype))


@given(seed=seeds, n=st.integers(1, 5), d=st.integers(1, 6), c=st.floats(-3, 3), dtype=dtypes)
def test_layer_norm_removes_bias_along_ones(seed, n, d, c, dtype):
    rng = np.random.default_rng(seed)
    x, bias = normal(rng, (n, d), dtype), normal(rng, d, dtype)
    np.testing.assert_allclose(layer_norm(x + dtype(c)), layer_norm(x), **loose(dtype))
    # in general LN removes exactly the component of the bias along the all-ones vector
    centred = bias - bias.mean()
    np.testing.assert_allclose(layer_norm(x + bias), layer_norm(x + centred), **loose(dtype))


def test_layer_norm_keeps_a_generic_bias(rng):
    x = rng.normal(size=(3, 4))
    bias = np.array([1.0, -1.0, 0.0, 0.0])  # not a multiple of (1, 1, 1, 1)
    assert not np.allclose(layer_norm(x + bias), layer_norm(x))


# --- whole blocks ------------------------------------------------------------------------------

def test_branch_block_matches_composition(rng):
    """The document's form X + LN(Attn(X)), then X + LN(FFN(X)), composed by hand."""
    d, h = 8, 2
    p = init_block_params(d, 16, rng)
    x = rng.normal(size=(2, 5, d))
    attn = multi_head_attention(x, p.w_q, p.w_k, p.w_v, p.w_o, h, b_q=p.b_q, b_k=p.b_k, b_v=p.b_v, b_o=p.b_o)

    def ln(z, g, b):
        mu = z.mean(-1, keepdims=True)
        return g * (z - mu) / np.sqrt(((z - mu) ** 2).mean(-1, keepdims=True) + 1e-5) + b

    hid = x + ln(attn, p.gamma1, p.beta1)
    ref = hid + ln(np.maximum(hid @ p.w1 + p.b1, 0) @ p.w2 + p.b2, p.gamma2, p.beta2)
    np.testing.assert_allclose(transformer_block(x, p, h, placement="branch"), ref, rtol=1e-11, atol=1e-12)


@given(seed=seeds, n=st.integers(1, 6), h=st.integers(1, 3), kw=st.integers(1, 3), batch=batch_shapes,
       placement=st.sampled_from(PLACEMENTS), bias=st.booleans(), dtype=dtypes, data=st.data())
def test_block_equivariant_every_placement(seed, n, h, kw, batch, placement, bias, dtype, data):
    rng = np.random.default_rng(seed)
    d = h * kw
    p = init_block_params(d, 2 * d, rng, bias=bias, dtype=dtype)
    x = normal(rng, batch + (n, d), dtype)
    perm = data.draw(permutations(n))
    np.testing.assert_allclose(
        transformer_block(permute_tokens(x, perm), p, h, placement=placement),
        permute_tokens(transformer_block(x, p, h, placement=placement), perm), **loose(dtype),
    )


@given(seed=seeds, n=st.integers(1, 5), m=st.integers(1, 6), h=st.integers(1, 3), bias=st.booleans(), dtype=dtypes, data=st.data())
def test_cross_attention_equivariant_in_queries_invariant_in_context(seed, n, m, h, bias, dtype, data):
    rng = np.random.default_rng(seed)
    d = 2 * h
    x, ctx = normal(rng, (n, d), dtype), normal(rng, (m, d), dtype)
    w, b = mha_params(rng, d, dtype, bias)
    pn, pm = data.draw(permutations(n)), data.draw(permutations(m))
    out = multi_head_attention(x, *w, h, context=ctx, **b)
    np.testing.assert_allclose(multi_head_attention(x[pn], *w, h, context=ctx[pm], **b), out[pn], **loose(dtype))


def test_key_bias_matters_when_rope_is_applied_after_it():
    """The key bias cancels for scores q k_j^T, not when RoPE rotates k_j + b_K by position j."""
    from attncore import rope

    rng = np.random.default_rng(31)
    n, d = 6, 4
    q, k, v = rng.normal(size=(n, d)), rng.normal(size=(n, d)), rng.normal(size=(n, 2))
    b_k = rng.normal(size=d)
    plain = attention(q, k + b_k, v) - attention(q, k, v)
    before = attention(rope(q), rope(k + b_k), v) - attention(rope(q), rope(k), v)
    after = attention(rope(q), rope(k) + b_k, v) - attention(rope(q), rope(k), v)
    # independent route: the extra score of key j is q_i R_{j-i}^T b_K^T (b_K rotated by (j - i) theta), computed by a loop
    theta = 10000.0 ** (-np.arange(d // 2) * 2 / d)
    for i in range(n):
        extra = []
        for j in range(n):
            rb = np.empty(d)
            for p in range(d // 2):
                c, s = np.cos((j - i) * theta[p]), np.sin((j - i) * theta[p])
                x0, x1 = b_k[2 * p], b_k[2 * p + 1]
                rb[2 * p], rb[2 * p + 1] = c * x0 - s * x1, s * x0 + c * x1
            extra.append(q[i] @ rb / np.sqrt(d))
        scores = rope(q)[i] @ rope(k).T / np.sqrt(d) + np.array(extra)
        w = np.exp(scores - scores.max())
        np.testing.assert_allclose(attention(rope(q), rope(k + b_k), v)[i], (w / w.sum()) @ v, rtol=1e-10, atol=1e-12)
    assert np.max(np.abs(plain)) < 1e-12 and np.max(np.abs(after)) < 1e-12
    assert np.max(np.abs(before)) > 1e-3
