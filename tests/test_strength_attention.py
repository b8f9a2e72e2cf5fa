"""attncore._attention: checks added to kill surviving mutants (see the appendix "How strong is the evidence").

Each test says which mutants it kills, by the change they make (mutmut's numbers are not stable).
"""

import math
import sys
import warnings

import numpy as np
import pytest

from attncore import (
    attention,
    attention_weights,
    merge_heads,
    multi_head_attention,
    split_heads,
)
from messages import raises_message
from strength import traced_peak

module = sys.modules["attncore._attention"]


def weights(d, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(d, d)).astype(dtype) for _ in range(4)]


# ------------------------------------------------------------------ errors name the argument


def test_split_and_merge_heads_name_x_and_the_expected_axes():
    """Kills, in split_heads and merge_heads, ``as_float_array(x, "x", spec)`` with the
    spec dropped or None (a 1-D or 2-D x then fails later with numpy's AxisError, which names
    no argument), the name mangled ("XXxXX") and each axis letter mangled ("XXnXX", "N"...)."""
    with raises_message(ValueError, "x", shapes=["(..., n, d)", "(4,)"]):
        split_heads(np.ones(4), 2)
    with raises_message(ValueError, "x", shapes=["(..., h, n, k)", "(2, 3)"]):
        merge_heads(np.ones((2, 3)))
    with raises_message(TypeError, "x"):
        split_heads(np.ones((2, 4)) > 0, 2)
    with raises_message(TypeError, "x"):
        merge_heads(np.ones((2, 2, 4)) > 0)


def test_multi_head_attention_names_every_bad_argument():
    """Kills in multi_head_attention: x's spec dropped or None (a 1-D x then raises IndexError),
    x's name or axis letters mangled; "causal" mangled; the names w_k, w_v, w_o, b_q, b_k, b_o
    mangled ("XXw_kXX", "B_K"...); the mask's target "the scores (..., n, m)" dropped or mangled."""
    d = 4
    w = weights(d)
    x = np.ones((3, d))
    with raises_message(ValueError, "x", shapes=["(..., n, d)", "(4,)"]):
        multi_head_attention(np.ones(d), *w, 2)
    with raises_message(TypeError, "causal"):
        multi_head_attention(x, *w, 2, causal=1)
    for i, name in enumerate(("w_q", "w_k", "w_v", "w_o")):
        bad = list(w)
        bad[i] = np.ones((d, d + 1))
        with raises_message(ValueError, name, shapes=[f"({d}, {d})", f"({d}, {d + 1})"]):
            multi_head_attention(x, *bad, 2)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        with raises_message(ValueError, name, shapes=[f"({d},)", "(3,)"]):
            multi_head_attention(x, *w, 2, **{name: np.ones(3)})
    with raises_message(ValueError, "mask", names=["scores"], shapes=["(3, 4)", "(..., n, m)", "(2, 3, 3)"]):
        multi_head_attention(np.ones((2, 3, d)), *w, 2, mask=np.ones((3, 4), bool))


def test_multi_head_attention_checks_every_bias_before_computing():
    """Every parameter is checked under the caller's name before any work (and before the mask):
    a bias of the wrong shape together with a non-boolean mask is reported as the bias's
    ValueError.  Kills ``as_float_array(b, name, (d,))`` with the spec dropped or None, where a
    bias of the wrong shape is found only by linear() after the attention, so the mask's
    TypeError comes first."""
    d = 4
    w = weights(d)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        with raises_message(ValueError, name, shapes=[f"({d},)"]):
            multi_head_attention(np.ones((3, d)), *w, 2, mask=np.ones((3, 3)), **{name: np.ones((1, d))})


def test_multi_head_attention_names_a_float64_bias_too_large_for_float32():
    """float32 tokens and weights compute in float32; a float64 bias beyond float32's largest
    number is refused, naming the bias.  The check is linear()'s, made with the name
    multi_head_attention passes.  Kills name="w_q"/"w_k"/"w_v"/"w_o" dropped or mangled
    ("XXw_qXX", "W_Q"...: the bias is then called "b" or "bias of XXw_qXX"), and dropping b_k from
    the key projection (``linear(context, w_k, None, ...)`` or without b_k: the bias of the keys
    changes no weight in exact arithmetic, so only this error shows that it is used)."""
    d = 4
    w = weights(d, np.float32)
    x = np.random.default_rng(1).normal(size=(3, d)).astype(np.float32)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        b = np.zeros(d)
        b[1] = 1e39
        with raises_message(ValueError, name, dtypes=["float32"]):
            multi_head_attention(x, *w, 2, **{name: b})


def test_multi_head_attention_batch_axes_of_x_and_context():
    """The batch axes of x and of the context broadcast together, and a mismatch names both.
    Kills ``batch_shape(("x", x, 2), ("context", context, 2))`` with either entry dropped (the
    mask is then checked against the wrong shape, or the error comes later under other names)
    or a name mangled ("XXxXX", "X", "XXcontextXX", "CONTEXT")."""
    d = 4
    w = weights(d)
    rng = np.random.default_rng(2)
    x, context = rng.normal(size=(2, 3, d)), rng.normal(size=(5, d))
    with raises_message(ValueError, "x", names=["context"], shapes=[(2, 3, 4), (3, 5, 4)], says="broadcast"):
        multi_head_attention(x, *w, 2, context=np.ones((3, 5, d)))
    # x has a batch axis the context lacks, and the context one x lacks: the mask has both
    mask = rng.random((2, 3, 5)) < 0.7
    mask[..., 0] = True
    got = multi_head_attention(x, *w, 2, context=context, mask=mask)
    want = np.stack([multi_head_attention(x[i], *w, 2, context=context, mask=mask[i]) for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    x2, context2 = rng.normal(size=(3, d)), rng.normal(size=(2, 5, d))
    got = multi_head_attention(x2, *w, 2, context=context2, mask=mask)
    want = np.stack([multi_head_attention(x2, *w, 2, context=context2[i], mask=mask[i]) for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_attention_names_every_bad_argument():
    """Kills in attention: "causal" mangled; v's match=("k", k) mangled; "reweight" mangled in
    as_float_array and in check_fits; the reweight's target "the weights (..., n, m)" dropped or
    mangled; and in attention_weights "causal" mangled."""
    q, k, v = np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2))
    with raises_message(TypeError, "causal"):
        attention(q, k, v, causal=1)
    with raises_message(TypeError, "causal"):
        attention_weights(q, k, causal=1)
    with raises_message(ValueError, "v", names=["k"], shapes=["(..., 5, v)", "(5, 4)"]):
        attention(q, k, np.ones((4, 2)))
    with raises_message(TypeError, "reweight"):
        attention(q, k, v, reweight=np.ones((3, 5)) > 0)
    with raises_message(ValueError, "reweight", names=["weights"], shapes=["(2, 5)", "(..., n, m)", "(3, 5)"]):
        attention(q, k, v, reweight=np.ones((2, 5)))
    f32 = np.float32
    with raises_message(ValueError, "reweight", dtypes=["float32"]):
        attention(q.astype(f32), k.astype(f32), v.astype(f32), reweight=np.full((3, 5), 1e39))


def test_attention_batch_axes_of_q_k_and_v():
    """q and k broadcast, v does not: the error lists all three.  Kills
    ``batch_shape(("q", q, 2), ("k", k, 2), ("v", v, 2))`` with an entry dropped or a name
    mangled ("XXqXX", "Q", "XXkXX", "K", "XXvXX", "V")."""
    with raises_message(ValueError, "q", names=["k", "v"], shapes=[(2, 3, 4), (5, 4), (3, 5, 2)], says="broadcast"):
        attention(np.ones((2, 3, 4)), np.ones((5, 4)), np.ones((3, 5, 2)))


def test_reweight_is_checked_against_the_dtype_of_the_scores():
    """A float64 reweight must fit result_type(q, k), the dtype of the scores: with float32
    queries and float16 keys that is float32, so 1e5 (beyond float16) is accepted; with float64
    queries and float32 keys it is float64, so 1e39 is accepted.  Kills
    ``np.result_type(q, k)`` -> ``np.result_type(k)`` in attention's check_fits."""
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    for dq, dk, big in ((np.float32, np.float16, 1e5), (np.float64, np.float32, 1e39)):
        reweight = np.full((2, 4), big)
        got = attention(q.astype(dq), k.astype(dk), v.astype(dq), reweight=reweight)
        want = (attention_weights(q.astype(dq), k.astype(dk)).astype(np.float64) * big) @ v.astype(dq)
        assert got.dtype == dq
        np.testing.assert_allclose(got, want, rtol=1e-3)


# ------------------------------------------------------------------ attention_weights


def softmax_loop(scores, keep):
    """Softmax of one row over the kept entries, in float64 with plain loops (0 elsewhere)."""
    kept = [s for s, ok in zip(scores, keep) if ok]
    if not kept:
        return [0.0] * len(scores)
    top = max(kept)
    total = sum(math.exp(s - top) for s in kept)
    return [math.exp(s - top) / total if ok else 0.0 for s, ok in zip(scores, keep)]


@pytest.mark.parametrize("n, m", [(5, 5), (4, 7), (7, 4)])
def test_attention_weights_with_mask_and_causal_keeps_both(n, m):
    """``causal=True`` with a mask keeps a key only where both allow it (checked against loops).
    Kills ``mask & ~future`` -> ``mask | ~future``, -> ``mask & future`` and the mask ignored
    (``~future if (mask is None) or True``)."""
    rng = np.random.default_rng(4)
    q, k = rng.normal(size=(2, n, 3)), rng.normal(size=(2, m, 3))
    mask = rng.random((n, m)) < 0.6
    mask[:, 0] = [True, False] * (n // 2) + [True] * (n % 2)  # some rows keep key 0, some keep nothing
    got = attention_weights(q, k, mask=mask, causal=True)
    for b in range(2):
        for i in range(n):
            scores = [sum(q[b, i, t] * k[b, j, t] for t in range(3)) / math.sqrt(3) for j in range(m)]
            want = softmax_loop(scores, [bool(mask[i, j]) and j <= i for j in range(m)])
            np.testing.assert_allclose(got[b, i], want, rtol=1e-12, atol=1e-300)


def test_attention_weights_work_in_float32_for_float32_and_float16():
    """Scores of float32 (and float16) queries and keys are computed in float32: one float32
    (n, m) buffer (plus the float16 result), not float64.  numpy reports its buffers to
    tracemalloc.  Kills ``k.astype(q.dtype, copy=False)`` -> ``k.astype(None, copy=False)``
    (float64 keys make float64 scores: 3.1 score buffers instead of 1.1 for float32)."""
    rng = np.random.default_rng(5)
    n = 512
    for dtype, budget in ((np.float32, 1.5), (np.float16, 3.5)):  # in units of n*n*itemsize
        q, k = (rng.normal(size=(n, 16)).astype(dtype) for _ in range(2))
        a, peak = traced_peak(attention_weights, q, k)
        assert a.dtype == dtype
        assert peak < budget * n * n * np.dtype(dtype).itemsize, (dtype, peak / (n * n * np.dtype(dtype).itemsize))


def test_a_float64_bias_acts_as_its_rounding_to_the_dtype_of_the_scores():
    """With float32 queries and keys, a float64 bias gives the same bits as the bias rounded to
    float32 first (as in linear()).  Here 64 + 2**-18 is a tie in float32 (rounded to 64), while
    adding the unrounded bias 2**-18 + 2**-44 in float64 and then rounding gives 64 + 2**-17, and
    the weights move by 2**-19.  Kills ``bias.astype(q.dtype, copy=False)`` ->
    ``bias.astype(None, copy=False)`` in attention_weights."""
    f32 = np.float32
    q, k = np.array([[64.0]], f32), np.array([[1.0], [1.0]], f32)
    bias = np.array([[2.0**-18 + 2.0**-44, 0.0]])
    a = attention_weights(q, k, bias=bias, scale=1.0)
    assert np.array_equal(a, attention_weights(q, k, bias=bias.astype(f32), scale=1.0))
    assert np.array_equal(a, np.array([[0.5, 0.5]], f32))


# ------------------------------------------------------------------ blocks of rows and heads


def attention_by_loops(q, k, v, mask=None, causal=False, reweight=None):
    """softmax(q k^T / sqrt(k)) v (times reweight) on every broadcast (batch, head) slice, in
    float64 with plain loops."""
    n, m, width = q.shape[-2], k.shape[-2], q.shape[-1]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    qb, kb, vb = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))
    keep = np.ones(batch + (n, m), bool) if mask is None else np.broadcast_to(mask, batch + (n, m))
    rw = None if reweight is None else np.broadcast_to(reweight, batch + (n, m))
    out = np.zeros(batch + (n, v.shape[-1]))
    for idx in np.ndindex(batch):
        for i in range(n):
            scores = [sum(qb[idx][i, t] * kb[idx][j, t] for t in range(width)) / math.sqrt(width) for j in range(m)]
            w = softmax_loop(scores, [bool(keep[idx][i, j]) and (j <= i or not causal) for j in range(m)])
            if rw is not None:
                w = [w[j] * rw[idx][i, j] for j in range(m)]
            for c in range(v.shape[-1]):
                out[idx][i, c] = sum(w[j] * vb[idx][j, c] for j in range(m))
    return out


def test_operands_broadcasting_on_an_outer_batch_axis_match_loops(monkeypatch):
    """k, v, mask and reweight of length 1 on the first of two batch axes, q of length 2 there,
    with one row per block: each block broadcasts the axis of length 1."""
    monkeypatch.setattr(module, "BLOCK_ROWS", 1)
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(2, 3, 4, 2)), rng.normal(size=(1, 3, 5, 2)), rng.normal(size=(1, 3, 5, 2))
    mask = rng.random((1, 3, 4, 5)) < 0.7
    reweight = rng.normal(size=(1, 1, 4, 5))
    want = attention_by_loops(q, k, v, mask=mask, reweight=reweight)
    np.testing.assert_allclose(attention(q, k, v, mask=mask, reweight=reweight), want, rtol=1e-12, atol=1e-14)


def test_no_queries_with_a_reweight_give_an_empty_result():
    """n = 0 queries: a reweight of shape (0, m) broadcasts to the (0, m) weights and the result is
    (0, v).  Kills ``np.max(np.abs(x), initial=0)`` -> no initial / ``initial=None`` in
    _log_max_abs (the maximum of an empty array is an error)."""
    q, k, v = np.ones((0, 3)), np.ones((4, 3)), np.ones((4, 2))
    for normalize in ("softmax", "l2"):
        got = attention(q, k, v, reweight=np.ones((0, 4)), normalize=normalize)
        assert got.shape == (0, 2) and got.dtype == np.float64
    assert attention(np.ones((2, 0, 3)), k, v, reweight=np.ones((2, 0, 4))).shape == (2, 0, 2)


# ------------------------------------------------------------------ overflow and the result's dtype


def test_a_query_near_the_largest_float_is_not_scaled_up():
    """|q| = 0.6 max with |k| <= 0.1: the scores (up to 0.06 max) fit, so q is used as it is
    (doubling it would overflow to inf and make the weights NaN)."""
    top = float(np.finfo(np.float32).max)
    q = np.array([[0.6 * top]], np.float32)
    k, v = np.array([[0.1], [0.05]], np.float32), np.array([[1.0], [2.0]], np.float32)
    for normalize in ("softmax", "l2"):
        assert np.array_equal(attention_weights(q, k, scale=1.0, normalize=normalize), np.array([[1.0, 0.0]], np.float32))
        assert np.array_equal(attention(q, k, v, scale=1.0, normalize=normalize), np.array([[1.0]], np.float32))


def test_rounding_the_result_to_float16_warns_nothing():
    """float16 input is computed in float32 and rounded once; an answer beyond float16 (here a
    reweighted average of 3 * 60000) is a ValueError that names the dtype, without a
    RuntimeWarning escaping."""
    import warnings

    f16 = np.float16
    q, k, v = np.ones((1, 2), f16), np.ones((3, 2), f16), np.full((3, 1), 60000, f16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with raises_message(ValueError, "output", dtypes=["float16"], says="overflow", remedy=("shrink", "v", "reweight")):
            attention(q, k, v, reweight=np.full((1, 3), 3.0))
        assert attention(q, k, v, reweight=np.full((1, 3), 1.0)).dtype == f16


def test_exp_beyond_float16_without_a_denominator_is_an_error_that_says_so():
    """normalize="none" on float16: exp(12) is finite in float32, where it is computed, but beyond
    float16, the result's dtype: a ValueError that says so.  Kills the message of _finish mangled
    ("XXa score...XX", upper case)."""
    f16 = np.float16
    q, k, v = np.array([[3.0]], f16), np.array([[4.0]], f16), np.ones((1, 1), f16)
    # the facts: the cause (normalize="none": exp without a denominator), the dtype overflowed
    facts = dict(names=["normalize"], values=["none"], dtypes=["float16"], says="overflow", remedy=("shrink", "q", "k"))
    with raises_message(ValueError, "exp", **facts):
        attention(q, k, v, scale=1.0, normalize="none")
    with raises_message(ValueError, "exp", **facts):
        attention_weights(q, k, scale=1.0, normalize="none")


def test_attention_without_batch_axes_allocates_one_block_of_scores():
    """2-D q, k, v (one slice, so one head): at most one block of rows of 512 float32 scores
    exists at a time, and nothing else of the size of the n x n matrix is allocated."""
    rng = np.random.default_rng(9)
    n = 512
    q, k, v = (rng.normal(size=(n, 16)).astype(np.float32) for _ in range(3))
    out, peak = traced_peak(attention, q, k, v)
    assert out.dtype == np.float32
    assert peak < 1.5 * n * n * 4, peak / (n * n * 4)


def test_a_block_that_does_not_overflow_is_not_rescaled():
    """Two equal weights, values [3e38, a] and [0, 0] (float32), a = (1 + 2**-23) 2**-125: the
    bound m max|v| exceeds max / e, so a rescue power 2**-3 is prepared, but the product does not
    overflow and is used as it is: [1.5e38, a / 2] exactly.  Kills, in attention,
    ``if rescue and not np.all(np.isfinite(product))`` -> ``not np.all(None)`` or ``rescue or ...``
    (the block is always computed again with v / 8, which rounds a / 8, a subnormal, to 2**-128)."""
    f32 = np.float32
    a = (1 + 2.0**-23) * 2.0**-125
    q, k = np.zeros((1, 2), f32), np.zeros((2, 2), f32)
    v = np.array([[3e38, a], [0.0, 0.0]], f32)
    out = attention(q, k, v)
    assert np.array_equal(out, np.array([[1.5e38, a / 2]], f32)), out


def test_wide_values_cost_three_outputs_of_memory_in_float32():
    """float32 softmax attention with wide values (64 x 4096): the output, v with its column of
    denominators appended, and one block of products, each the size of the output, all float32.
    Kills ``wide = np.empty(..., dtype=work)`` with the dtype dropped or None (a float64 product
    buffer: 5 outputs of memory)."""
    rng = np.random.default_rng(12)
    n, width = 64, 4096
    q, k = (rng.normal(size=(n, 8)).astype(np.float32) for _ in range(2))
    v = rng.normal(size=(n, width)).astype(np.float32)
    out, peak = traced_peak(attention, q, k, v)
    assert out.dtype == np.float32
    assert peak < 3.5 * out.nbytes, peak / out.nbytes


def test_many_query_rows_take_the_contiguous_key_layout_and_match_loops():
    """From 1024 query rows on, k^T is copied to a contiguous (k, m) array for the score product;
    the answer is the same.  Kills ``np.ascontiguousarray(k_t)`` -> ``np.ascontiguousarray(None)``."""
    rng = np.random.default_rng(13)
    q, k, v = rng.normal(size=(1024, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 1))
    np.testing.assert_allclose(attention(q, k, v), attention_by_loops(q, k, v), rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------ _prepare: validation and the compute dtype


def test_prepare_names_k_the_width_and_the_scale():
    """Kills, in _prepare: k's ``match=("q", q)`` dropped, None or mangled ("XXqXX", "Q"); the
    message for k = 0 without a scale dropped or upper-cased; ``check_real(scale, "scale", work)``
    without the dtype (a scale beyond float32, or one that rounds to 0 there, must be refused for
    float32 queries and keys even when q * scale does not overflow)."""
    q = np.ones((3, 4))
    with raises_message(ValueError, "k", names=["q"], shapes=["(..., m, 4)", "(3, 4)"]):
        attention_weights(q, np.ones((5, 3)))
    with raises_message(ValueError, "q", names=["k", "scale"], shapes=[(3, 0)], says="undefined", remedy=("pass", "scale")):
        attention_weights(np.ones((3, 0)), np.ones((5, 0)))
    f32 = np.float32
    for scale in (1e39, 1e-46):
        with raises_message(ValueError, "scale", dtypes=["float32"]):
            attention_weights(np.zeros((2, 3), f32), np.ones((4, 3), f32), scale=scale)
        with raises_message(ValueError, "scale", dtypes=["float32"]):
            attention(np.zeros((2, 3), f32), np.ones((4, 3), f32), np.ones((4, 1), f32), scale=scale)


def test_float32_queries_with_float64_keys_are_computed_in_float64():
    """The scores of float32 queries and float64 keys are float64 (result_type(q, k)) and computed
    in float64: the weights match a float64 loop to 1e-12.  Kills, in _prepare,
    ``np.result_type(q, k)`` -> ``np.result_type(q)`` (float32 weights) and
    ``compute_dtype(q, k)`` -> ``compute_dtype(q)`` (keys rounded to float32 first)."""
    rng = np.random.default_rng(18)
    q = rng.normal(size=(3, 4)).astype(np.float32)
    k = rng.normal(size=(5, 4))
    a = attention_weights(q, k)
    assert a.dtype == np.float64
    for i in range(3):
        scores = [sum(float(q[i, t]) * k[j, t] for t in range(4)) / 2.0 for j in range(5)]
        np.testing.assert_allclose(a[i], softmax_loop(scores, [True] * 5), rtol=1e-12)


# ------------------------------------------------------------------ attention: dtypes


def test_attention_works_in_the_widest_dtype_of_q_k_and_v():
    """float32 q and k with float64 v, and float64 q and k with float32 v: the result is float64
    and computed in float64 (matches a float64 loop to 1e-12).  Kills, in attention,
    ``np.result_type(dtype, v)`` with either argument dropped and ``compute_dtype(q, v)`` with
    either argument dropped."""
    rng = np.random.default_rng(19)
    for dq, dv in ((np.float32, np.float64), (np.float64, np.float32)):
        q, k, v = rng.normal(size=(3, 4)).astype(dq), rng.normal(size=(5, 4)).astype(dq), rng.normal(size=(5, 2)).astype(dv)
        got = attention(q, k, v)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, attention_by_loops(q.astype(float), k.astype(float), v.astype(float)), rtol=1e-12)


def test_a_float64_bias_acts_as_its_rounding_in_attention_too():
    """As in attention_weights: float32 q, k, v and the float64 bias 2**-18 + 2**-44 give the bits of
    the bias rounded to float32 (the tie 64 + 2**-18 rounds to 64).  Kills
    ``a.astype(work, copy=False)`` -> ``a.astype(None, copy=False)`` for the bias and reweight."""
    f32 = np.float32
    q, k, v = np.array([[64.0]], f32), np.array([[1.0], [1.0]], f32), np.array([[1.0], [0.0]], f32)
    bias = np.array([[2.0**-18 + 2.0**-44, 0.0]])
    out = attention(q, k, v, bias=bias, scale=1.0)
    assert np.array_equal(out, attention(q, k, v, bias=bias.astype(f32), scale=1.0))
    assert np.array_equal(out, np.array([[0.5]], f32))


def test_values_of_width_zero_warn_nothing():
    """v of shape (m, 0): the result is (n, 0) for every normalisation (softmax used to raise
    ZeroDivisionError: the fused product's row count was out_b.size // 0, fixed with this test);
    the scores, large here (e**900 overflows), are still shifted, so no overflow warning escapes.
    Kills ``shift, gain, rescue = True, 0, 0`` -> ``False, 0, 0`` (unshifted exponentials when the
    route plan is skipped)."""
    import warnings

    q, k = np.full((2, 1), 30.0), np.full((3, 1), 30.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert attention(q, k, np.zeros((3, 0)), scale=1.0).shape == (2, 0)
        for normalize in ("l2", "relu2", "none"):
            assert attention(q[:, :0], k[:, :0], np.zeros((3, 0)), scale=1.0, normalize=normalize).shape == (2, 0)
        assert attention(q, k, np.zeros((3, 0)), scale=1.0, normalize="l2").shape == (2, 0)
        assert attention(np.ones((4, 2, 1)), np.ones((4, 3, 1)), np.zeros((4, 3, 0))).shape == (4, 2, 0)


def test_a_tiny_reweight_keeps_its_products_normal():
    """Scores near -40 and a reweight of 1e-20 (float32): e**s * reweight ~ 4e-38 is near the smallest
    normal float, so on the unshifted route the reweight is multiplied by 2**58 first; the answer
    is exact to float32 rounding.  Kills ``if gain and reweight is not None`` -> ``is None`` (the
    power then goes to v, after the products were formed) and ``log_vmin = -math.inf`` ->
    ``+math.inf`` with a reweight (the power is dropped)."""
    f32 = np.float32
    r = math.sqrt(40.0)
    q, k = np.array([[r]], f32), np.array([[-r], [-r * 0.99]], f32)
    v, reweight = np.array([[1e-3], [2e-3]], f32), np.array([[1e-20, 1e-20]])
    s = np.array([float(q[0, 0]) * float(k[0, 0]), float(q[0, 0]) * float(k[1, 0])])
    w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    want = (w * float(f32(1e-20))) @ v.astype(np.float64)
    np.testing.assert_allclose(attention(q, k, v, reweight=reweight, scale=1.0)[0], want, rtol=1e-6)


def test_values_with_a_zero_take_the_unshifted_route_with_its_power_of_two():
    """A zero among the values (min |v| = 0) keeps the power 2**g on the unshifted route: v is
    multiplied by it.  The answer matches a loop.  Kills ``v = np.ldexp(v, gain)`` -> None,
    ``np.ldexp(None, gain)``, ``np.ldexp(v, None)``, ``np.ldexp(v)``, ``np.ldexp(gain)``."""
    rng = np.random.default_rng(20)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    v[2, 1] = 0.0
    for normalize in ("softmax", "l2"):
        np.testing.assert_allclose(attention(q, k, v, normalize=normalize),
                                   attention_weights(q, k, normalize=normalize) @ v, rtol=1e-12)


def test_causal_with_a_mask_that_starts_late(monkeypatch):
    """causal=True with a mask whose first kept key is 2, two rows per block: the mask and the
    causal rule together, on the diagonal blocks and off them."""
    monkeypatch.setattr(module, "BLOCK_ROWS", 2)
    rng = np.random.default_rng(21)
    q, k, v = rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    mask = np.zeros((6, 6), bool)
    mask[:, 2:] = True
    np.testing.assert_allclose(attention(q, k, v, mask=mask, causal=True),
                               attention_by_loops(q, k, v, mask=mask, causal=True), rtol=1e-12, atol=1e-14)


def test_prepare_names_the_mask_and_the_bias():
    """Kills, in _prepare: the targets "the scores (..., n, m)" of the mask and bias checks dropped
    or mangled; the bias's name mangled ("XXbiasXX", "BIAS", None) in as_float_array and
    check_fits; ``finite="-inf"`` -> None (NaN in the bias accepted); check_fits without the
    dtype; the message of a q * scale overflow dropped, and its RuntimeWarning let out."""
    import warnings

    q, k = np.ones((3, 4)), np.ones((5, 4))
    with raises_message(ValueError, "mask", names=["scores"], shapes=["(3, 4)", "(..., n, m)", "(3, 5)"]):
        attention_weights(q, k, mask=np.ones((3, 4), bool))
    with raises_message(ValueError, "bias", names=["scores"], shapes=["(2, 5)", "(..., n, m)", "(3, 5)"]):
        attention_weights(q, k, bias=np.ones((2, 5)))
    with raises_message(TypeError, "bias"):
        attention_weights(q, k, bias=np.ones((3, 5)) > 0)
    with raises_message(ValueError, "bias", values=["NaN"], shapes=[(3, 5)], says="finite"):
        attention_weights(q, k, bias=np.full((3, 5), np.nan))
    f32 = np.float32
    with raises_message(ValueError, "bias", dtypes=["float32"]):
        attention_weights(q.astype(f32), k.astype(f32), bias=np.full((3, 5), 1e39))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with raises_message(ValueError, "q", names=["scale"], values=[100], dtypes=["float32"], says="overflow",
                            remedy=("shrink", "q")):
            attention_weights(np.full((1, 2), 1e37, f32), np.ones((1, 2), f32), scale=100.0)


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps,
                    reason="long double is float64 on this platform")
def test_long_double_input_works_and_stays_long_double():
    """long double's largest and smallest normal numbers are beyond a Python float (float(tiny)
    is 0), so attention's range limits are taken in the dtype itself; taking them through a
    Python float made every long double call fail with "math domain error"."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((4, 3)) for _ in range(3))
    out = attention(*(a.astype(np.longdouble) for a in (q, k, v)))
    assert out.dtype == np.longdouble
    s = q @ k.T / np.sqrt(3.0)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(out.astype(np.float64), (e / e.sum(axis=-1, keepdims=True)) @ v, rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_of_zero_give_zero_without_a_warning(dtype):
    """v = 0 gives an output of exact zeros and no warning."""
    rng = np.random.default_rng(5)
    q, k = rng.normal(size=(3, 4)).astype(dtype), rng.normal(size=(5, 4)).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = attention(q, k, np.zeros((5, 2), dtype))
    assert out.dtype == dtype and not np.any(out)
