"""Normalisations, FFN and the transformer block: loops, axes and token-wise structure."""

import math
import statistics

import numpy as np
import pytest
from hypothesis import given, strategies as st

from attncore import (
    BlockParams,
    batch_norm,
    causal_mask,
    ffn,
    init_block_params,
    instance_norm,
    layer_norm,
    multi_head_attention,
    rms_norm,
    transformer_block,
)
from strategies import dtypes, normal, permutations, seeds, tol
from messages import raises_message


def standardize_list(values, eps):
    mu = statistics.fmean(values)
    var = statistics.pvariance(values, mu)
    return [(x - mu) / math.sqrt(var + eps) for x in values]


def test_layer_norm_matches_loop(rng):
    x, g, b = rng.normal(size=(2, 3, 5)), rng.normal(size=5), rng.normal(size=5)
    ref = np.array([[[gi * yi + bi for yi, gi, bi in zip(standardize_list(list(tok), 1e-5), g, b)] for tok in seq] for seq in x])
    np.testing.assert_allclose(layer_norm(x, g, b), ref, rtol=1e-12, atol=1e-12)


def test_rms_norm_matches_loop(rng):
    x, g = rng.normal(size=(3, 5)), rng.normal(size=5)
    ref = np.array([[gi * xi / math.sqrt(sum(t * t for t in tok) / 5 + 1e-6) for xi, gi in zip(tok, g)] for tok in x])
    np.testing.assert_allclose(rms_norm(x, g), ref, rtol=1e-12)


def test_instance_norm_matches_loop(rng):
    x = rng.normal(size=(2, 4, 3))
    ref = np.empty_like(x)
    for s in range(2):
        for c in range(3):
            ref[s, :, c] = standardize_list(list(x[s, :, c]), 1e-5)
    np.testing.assert_allclose(instance_norm(x), ref, rtol=1e-12, atol=1e-12)


def test_batch_norm_matches_loop(rng):
    x = rng.normal(size=(2, 4, 3))
    ref = np.empty_like(x)
    for c in range(3):
        ref[..., c] = np.reshape(standardize_list(list(x[..., c].ravel()), 1e-5), (2, 4))
    np.testing.assert_allclose(batch_norm(x), ref, rtol=1e-12, atol=1e-12)


@given(seed=seeds, b=st.integers(1, 4), n=st.integers(1, 6), dtype=dtypes)
def test_layer_norm_independent_of_batch_and_length(seed, b, n, dtype):
    """LN's output for a token is the same whatever else is in the batch or sequence."""
    x = normal(np.random.default_rng(seed), (b, n, 5), dtype)
    np.testing.assert_allclose(layer_norm(x)[0, 0], layer_norm(x[:1, :1])[0, 0], **tol(dtype))
    np.testing.assert_allclose(rms_norm(x)[0, 0], rms_norm(x[:1, :1])[0, 0], **tol(dtype))


def test_batch_norm_depends_on_batch(rng):
    x = rng.normal(size=(3, 4, 5))
    assert not np.allclose(batch_norm(x)[0], batch_norm(x[:1])[0])
    assert not np.allclose(instance_norm(x)[0, 0], instance_norm(x[:, :2])[0, 0])


def test_norm_shape_errors():
    with raises_message(ValueError, "gamma", names=["x"], shapes=[(5,), (4,), (2, 5)]):
        layer_norm(np.zeros((2, 5)), np.ones(4))
    with raises_message(ValueError, "x", shapes=["(..., n, d)", (5,)]):
        instance_norm(np.zeros(5))
    with raises_message(ValueError, "eps", values=[0, -1.0], says="out of range"):
        layer_norm(np.zeros((2, 5)), eps=-1.0)


def test_ffn_matches_loop(rng):
    x, w1, b1, w2, b2 = rng.normal(size=(3, 4)), rng.normal(size=(4, 6)), rng.normal(size=6), rng.normal(size=(6, 4)), rng.normal(size=4)
    ref = np.array([[sum(max(0.0, sum(tok[a] * w1[a, j] for a in range(4)) + b1[j]) * w2[j, c] for j in range(6)) + b2[c] for c in range(4)] for tok in x])
    np.testing.assert_allclose(ffn(x, w1, b1, w2, b2), ref, rtol=1e-12)
    with raises_message(ValueError, "w2", names=["w1"], shapes=[(6, 4), (6, 3)]):
        ffn(x, w1, b1, np.zeros((6, 3)), None)


@pytest.mark.parametrize("placement", ["post", "pre"])
def test_block_matches_composition(rng, placement):
    d, h = 8, 2
    p = init_block_params(d, 16, rng)
    x = rng.normal(size=(5, d))
    attn = lambda z: multi_head_attention(z, p.w_q, p.w_k, p.w_v, p.w_o, h, b_q=p.b_q, b_k=p.b_k, b_v=p.b_v, b_o=p.b_o)
    f = lambda z: np.maximum(z @ p.w1 + p.b1, 0) @ p.w2 + p.b2
    ln = lambda z, g, b: g * (z - z.mean(-1, keepdims=True)) / np.sqrt(z.var(-1, keepdims=True) + 1e-5) + b
    if placement == "post":
        hid = ln(x + attn(x), p.gamma1, p.beta1)
        ref = ln(hid + f(hid), p.gamma2, p.beta2)
    else:
        hid = x + attn(ln(x, p.gamma1, p.beta1))
        ref = hid + f(ln(hid, p.gamma2, p.beta2))
    np.testing.assert_allclose(transformer_block(x, p, h, placement=placement), ref, rtol=1e-11, atol=1e-12)


def test_block_errors(rng):
    p = init_block_params(4, 8, rng)
    with raises_message(ValueError, "placement", values=["sandwich"], options=["post", "pre", "branch"]):
        transformer_block(np.zeros((3, 4)), p, 2, placement="sandwich")
    with raises_message(TypeError, "params", options=["BlockParams"], values=["dict"]):
        transformer_block(np.zeros((3, 4)), dict(p._asdict()), 2)
    with raises_message(TypeError, "rng", options=["numpy.random.Generator"], values=["int"]):
        init_block_params(4, 8, 0)


def test_init_without_bias(rng):
    p = init_block_params(4, 8, rng, bias=False)
    assert all(getattr(p, f) is None for f in BlockParams._fields if f.startswith(("b", "beta")))


@given(seed=seeds, n=st.integers(2, 6), placement=st.sampled_from(["post", "pre"]), bias=st.booleans(), data=st.data())
def test_block_is_permutation_equivariant(seed, n, placement, bias, data):
    rng = np.random.default_rng(seed)
    p = init_block_params(6, 12, rng, bias=bias)
    x = rng.normal(size=(n, 6))
    perm = data.draw(permutations(n))
    np.testing.assert_allclose(
        transformer_block(x[perm], p, 3, placement=placement),
        transformer_block(x, p, 3, placement=placement)[perm], rtol=1e-10, atol=1e-12,
    )


@given(seed=seeds, n=st.integers(2, 6), placement=st.sampled_from(["post", "pre"]), data=st.data())
def test_tokens_meet_only_in_attention(seed, n, placement, data):
    """With attention restricted to the diagonal, a block acts on each token alone."""
    rng = np.random.default_rng(seed)
    p = init_block_params(6, 12, rng)
    x = rng.normal(size=(n, 6))
    i = data.draw(st.integers(0, n - 1))
    own = np.eye(n, dtype=bool)
    alone = transformer_block(x[i:i + 1], p, 2, placement=placement)
    np.testing.assert_allclose(transformer_block(x, p, 2, placement=placement, mask=own)[i], alone[0], rtol=1e-10, atol=1e-12)


def test_causal_block_ignores_future(rng):
    p = init_block_params(6, 12, rng)
    x = rng.normal(size=(5, 6))
    x2 = x.copy()
    x2[3:] += 1.0
    a = transformer_block(x, p, 2, mask=causal_mask(5))
    b = transformer_block(x2, p, 2, mask=causal_mask(5))
    np.testing.assert_allclose(a[:3], b[:3], rtol=1e-13, atol=1e-14)
    assert not np.allclose(a[3:], b[3:])
