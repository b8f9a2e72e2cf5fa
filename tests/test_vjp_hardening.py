"""Hardening of the backward passes, one test per kind of defect (each fails on the code before it).

* a derivative rebuilt from a quantity that underflows (relu2's weights) is taken from the scores;
* sums over many entries accumulate in at least float64 and are rounded once (float16 tables);
* a result beyond its dtype is the documented ValueError, never ``inf``;
* layer norm's backward is scale-robust like its forward, and its messages say what happened;
* the vjps raise the forward's documented errors, overflow included, naming the argument at fault.

Independent routes: closed forms (the relu2 derivative ``2 g relu(s) / m``, sums of constants).
"""

from __future__ import annotations

import numpy as np
import pytest

import attncore as ac


def test_relu2_derivative_does_not_underflow_with_its_weights():
    rng = np.random.default_rng(0)
    s, g = 1e-200 * np.abs(rng.normal(size=(3, 4))), rng.normal(size=(3, 4))  # relu(s)^2 / m underflows to 0
    want = 2 * g * s / 4  # d/ds of s^2 / m, s > 0
    np.testing.assert_allclose(ac.normalize_vjp(s, g, normalize="relu2"), want, rtol=1e-12)
    mask = rng.random((3, 4)) < 0.5
    np.testing.assert_allclose(ac.normalize_vjp(s, g, normalize="relu2", mask=mask), np.where(mask, want, 0), rtol=1e-12)
    q, k, v, go = 1e-100 * rng.normal(size=(3, 2)), 1e-100 * rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    dbias = ac.attention_bias_vjp(q, k, v, go, normalize="relu2", scale=1.0, causal=True).dbias
    scores = np.where(np.tril(np.ones((3, 4), bool)), q @ k.T, 0)
    np.testing.assert_allclose(dbias, 2 * (go @ v.T) * np.maximum(scores, 0) / 4, rtol=1e-12)
    assert np.abs(dbias).max() > 0


def test_tables_of_float16_gradients_sum_in_float32_or_wider():
    g = np.full((64, 64, 1), 0.1, np.float16)  # one offset gathers up to 4096 entries with clip = 1
    table = ac.shaw_relative_embeddings_vjp(g, 1)
    counts = np.array([64 * 63 / 2, 64, 64 * 63 / 2])  # offsets -1 (clipped), 0, +1 (clipped)
    assert table.dtype == np.float16
    np.testing.assert_array_equal(table[:, 0], (counts * float(np.float16(0.1))).astype(np.float16))
    diag = ac.relative_bias_vjp(np.full((2048, 2), 0.1, np.float16))  # the main diagonal has 2 entries, the rest 1
    assert diag.dtype == np.float16
    big = ac.relative_bias_vjp(np.full((4096, 4096), 0.01, np.float16)[None])  # diagonal 0: 4096 * 0.01 = 41
    assert big[0, 4095] == np.float16(4096 * float(np.float16(0.01)))


@pytest.mark.parametrize("call", [
    lambda: ac.relative_bias_vjp(np.full((512, 512), 300.0, np.float16)),  # a diagonal sums to 153,600 > 65504
    lambda: ac.shaw_relative_embeddings_vjp(np.full((512, 512, 1), 300.0, np.float16), 0),
])
def test_a_table_gradient_beyond_its_dtype_is_an_error_not_inf(call):
    with pytest.raises(ValueError, match="overflows float16"):
        call()


def test_layer_norm_vjp_is_scale_robust():
    """layer norm is invariant under x -> c x (eps = 0), so dx(c x) = dx(x) / c for every c."""
    rng = np.random.default_rng(1)
    x, g = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    base = ac.layer_norm_vjp(x, g, eps=0.0)
    for c in (1e-300, 1e-160, 1e160, 1e300):  # the variance of c x under- or overflows float64
        np.testing.assert_allclose(c * ac.layer_norm_vjp(c * x, g, eps=0.0), base, rtol=1e-12)
    tiny = ac.layer_norm_vjp(np.ones((1, 3)), np.array([[1.0, 2.0, 3.0]]), eps=1e-50)  # variance 0, a tiny eps: g / sqrt(eps), centred
    np.testing.assert_allclose(tiny, [[-1e25, 0.0, 1e25]], rtol=1e-12)


def test_layer_norm_vjp_messages_say_what_happened():
    with pytest.raises(ValueError) as error:
        ac.layer_norm_vjp(np.array([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]]), np.ones((2, 3)), eps=0.0)
    assert "equal" in str(error.value) and "eps" in str(error.value) and "(1,)" in str(error.value)  # which token
    with pytest.raises(ValueError, match="overflows"):  # a tiny variance: the derivative r is beyond float64
        ac.layer_norm_vjp(np.array([[0.0, 5e-324, 0.0]]), np.ones((1, 3)), eps=0.0)


@pytest.mark.parametrize("forward, backward, names", [
    (lambda: ac.attention(np.full((2, 2), 1e200), np.full((3, 2), 1e200), np.ones((3, 1))),
     lambda: ac.attention_vjp(np.full((2, 2), 1e200), np.full((3, 2), 1e200), np.ones((3, 1)), np.ones((2, 1))), ["scores", "q", "k"]),
    (lambda: ac.attention(np.full((2, 2), 1e308), np.ones((3, 2)), np.ones((3, 1)), scale=10.0),
     lambda: ac.attention_vjp(np.full((2, 2), 1e308), np.ones((3, 2)), np.ones((3, 1)), np.ones((2, 1)), scale=10.0), ["q", "scale"]),
    (lambda: ac.attention(np.ones((2, 2), np.float32), np.ones((3, 2), np.float32), np.ones((3, 1)), bias=np.full((2, 3), 1e300)),
     lambda: ac.attention_bias_vjp(np.ones((2, 2), np.float32), np.ones((3, 2), np.float32), np.ones((3, 1)),
                                   np.ones((2, 1)), bias=np.full((2, 3), 1e300)), ["bias"]),
    (lambda: ac.multi_head_attention(np.full((2, 4), 1e100), *[np.full((4, 4), 1e100)] * 4, 2),
     lambda: ac.multi_head_attention_vjp(np.full((2, 4), 1e100), *[np.full((4, 4), 1e100)] * 4, 2, np.ones((2, 4))), ["overflow"]),
])
def test_the_vjps_raise_the_forwards_documented_errors_overflow_included(forward, backward, names):
    with pytest.raises(ValueError) as forward_error:
        forward()
    with pytest.raises(ValueError) as backward_error:
        backward()
    for name in names:
        assert name in str(forward_error.value) and name in str(backward_error.value), (name, str(backward_error.value))


@pytest.mark.parametrize("call", [
    lambda x, w, g: ac.multi_head_attention(x, *[w] * 4, 2),
    lambda x, w, g: ac.multi_head_attention_vjp(x, *[w] * 4, 2, g),
    lambda x, w, g: ac.transformer_block(x, ac.BlockParams(*[w] * 4, np.ones((4, 8)), np.ones((8, 4)), *[None] * 10), 2),
    lambda x, w, g: ac.transformer_block_vjp(x, ac.BlockParams(*[w] * 4, np.ones((4, 8)), np.ones((8, 4)), *[None] * 10), 2, g),
])
def test_a_width_that_x_and_the_weights_disagree_on_is_not_blamed_on_num_heads(call):
    """x of width 5 and weights of width 4: 2 heads divide the weights' width, so num_heads is not at fault."""
    with pytest.raises(ValueError) as error:
        call(np.ones((3, 5)), np.eye(4), np.ones((3, 5)))
    message = str(error.value)
    assert "num_heads" not in message and "shape (4, " in message and "(5, " in message  # a weight, its shape, x's width


def test_multi_head_vjp_blames_x_not_num_heads():
    with pytest.raises(ValueError) as error:
        ac.multi_head_attention_vjp(np.ones(4), *[np.eye(4)] * 4, 2, np.ones((1, 4)))
    assert "x" in str(error.value) and "num_heads" not in str(error.value)
    with pytest.raises(ValueError) as error:
        ac.transformer_block_vjp(np.ones(4), ac.BlockParams(*[np.eye(4)] * 6), 2, np.ones((1, 4)))
    assert "x" in str(error.value) and "num_heads" not in str(error.value)
