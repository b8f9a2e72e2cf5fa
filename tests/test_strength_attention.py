"""attncore._attention: checks added to kill surviving mutants (see the appendix "How strong is the evidence").

Each test says which mutants it kills, by the change they make (mutmut's numbers are not stable).
"""

import math
import re
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
from strength import raises_naming, traced_peak

module = sys.modules["attncore._attention"]


@pytest.fixture(params=["wide", "power of two"])
def score_route(request, monkeypatch):
    """Both ways attention handles a score bound beyond the largest float: scores formed in a
    wider dtype, and the power-of-two fallback of dtypes with none wider (long double; float64
    where long double is float64), forced here by offering no wider dtype."""
    if request.param == "power of two":
        monkeypatch.setattr(module, "_wide_dtype", lambda *args: None)
    return request.param


def weights(d, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(d, d)).astype(dtype) for _ in range(4)]


# ------------------------------------------------------------------ errors name the argument


def test_split_and_merge_heads_name_x_and_the_expected_axes():
    """Kills, in split_heads and merge_heads, ``as_float_array(x, "x", spec)`` with the
    spec dropped or None (a 1-D or 2-D x then fails later with numpy's AxisError, which names
    no argument), the name mangled ("XXxXX") and each axis letter mangled ("XXnXX", "N"...)."""
    with raises_naming(ValueError, "x", "(..., n, d)", "got shape (4,)"):
        split_heads(np.ones(4), 2)
    with raises_naming(ValueError, "x", "(..., h, n, k)", "got shape (2, 3)"):
        merge_heads(np.ones((2, 3)))
    with raises_naming(TypeError, "x"):
        split_heads(np.ones((2, 4)) > 0, 2)
    with raises_naming(TypeError, "x"):
        merge_heads(np.ones((2, 2, 4)) > 0)


def test_multi_head_attention_names_every_bad_argument():
    """Kills in multi_head_attention: x's spec dropped or None (a 1-D x then raises IndexError),
    x's name or axis letters mangled; "causal" mangled; the names w_k, w_v, w_o, b_q, b_k, b_o
    mangled ("XXw_kXX", "B_K"...); the mask's target "the scores (..., n, m)" dropped or mangled."""
    d = 4
    w = weights(d)
    x = np.ones((3, d))
    with raises_naming(ValueError, "x", "(..., n, d)", "got shape (4,)"):
        multi_head_attention(np.ones(d), *w, 2)
    with raises_naming(TypeError, "causal"):
        multi_head_attention(x, *w, 2, causal=1)
    for i, name in enumerate(("w_q", "w_k", "w_v", "w_o")):
        bad = list(w)
        bad[i] = np.ones((d, d + 1))
        with raises_naming(ValueError, name, f"({d}, {d})", f"got shape ({d}, {d + 1})"):
            multi_head_attention(x, *bad, 2)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        with raises_naming(ValueError, name, f"({d},)", "got shape (3,)"):
            multi_head_attention(x, *w, 2, **{name: np.ones(3)})
    with raises_naming(ValueError, "mask", "(3, 4)", "of the scores (..., n, m), (2, 3, 3)"):
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
        with raises_naming(ValueError, name, f"({d},)"):
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
        with raises_naming(ValueError, name, "float32"):
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
    with pytest.raises(ValueError, match=re.escape("batch axes do not broadcast: x (2, 3, 4), context (3, 5, 4)")):
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
    with raises_naming(TypeError, "causal"):
        attention(q, k, v, causal=1)
    with raises_naming(TypeError, "causal"):
        attention_weights(q, k, causal=1)
    with raises_naming(ValueError, "v", "(..., 5, v)", "to match k of shape (5, 4)"):
        attention(q, k, np.ones((4, 2)))
    with raises_naming(TypeError, "reweight"):
        attention(q, k, v, reweight=np.ones((3, 5)) > 0)
    with raises_naming(ValueError, "reweight", "(2, 5)", "the weights (..., n, m), (3, 5)"):
        attention(q, k, v, reweight=np.ones((2, 5)))
    f32 = np.float32
    with raises_naming(ValueError, "reweight", "float32"):
        attention(q.astype(f32), k.astype(f32), v.astype(f32), reweight=np.full((3, 5), 1e39))


def test_attention_batch_axes_of_q_k_and_v():
    """q and k broadcast, v does not: the error lists all three.  Kills
    ``batch_shape(("q", q, 2), ("k", k, 2), ("v", v, 2))`` with an entry dropped or a name
    mangled ("XXqXX", "Q", "XXkXX", "K", "XXvXX", "V")."""
    with pytest.raises(ValueError, match=re.escape("batch axes do not broadcast: q (2, 3, 4), k (5, 4), v (3, 5, 2)")):
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


@pytest.mark.parametrize("dtype, qk, top", [(np.float32, 1e37, 3.4e38), (np.float64, 1e307, 1.79e308)])
def test_scores_plus_a_bias_near_the_largest_float_do_not_overflow(dtype, qk, top):
    """q . k is far from overflow, the bias is near the largest float, and their sum is beyond
    it: the bound on the scores includes the bias, so q and the bias are scaled down first and
    the weights are the exact [1, 0].  Kills ``_log_score_bound(q, k, bias)`` ->
    ``_log_score_bound(q, k, None)`` in attention_weights (the sum overflows to inf, giving NaN)."""
    root = math.sqrt(qk)
    q, k = np.array([[root]], dtype), np.array([[root], [0.0]], dtype)
    bias = np.array([[top, 0.0]], dtype)
    for normalize in ("softmax", "l2"):
        a = attention_weights(q, k, bias=bias, scale=1.0, normalize=normalize)
        assert np.array_equal(a, np.array([[1.0, 0.0]], dtype)), (normalize, a)
    out = attention(q, k, np.array([[2.0], [3.0]], dtype), bias=bias, scale=1.0)
    assert np.array_equal(out, np.array([[2.0]], dtype))


# ------------------------------------------------------------------ the route plan (attention, Notes)


def documented_plan(log_bound, m, log_values, normalize, dtype):
    """attention's (shift, gain) as its Notes state the rule, for a score bound B = e**log_bound,
    m keys and log(max|reweight| max|v|) = log_values: the unshifted route, with the smallest
    g such that 2**g >= e**B, exactly when
        B <= -ln T - 1  and  ln m + B + g ln 2 + max(0, log_values) <= ln M - 1
    (for "l2" also 2B <= -ln T - 1 and ln m + 2B <= ln M - 1); otherwise the shifted route, with
    the largest g <= 0 such that ln m + log_values + g ln 2 <= ln M - 1 (the rescue power)."""
    info = np.finfo(dtype)
    log_max, log_tiny, log2 = math.log(float(info.max)), math.log(float(info.tiny)), math.log(2.0)
    top = log_max - 1
    bound = math.exp(min(log_bound, 700.0))
    if bound <= -log_tiny - 1:
        g = math.ceil(bound / log2)
        while g * log2 < bound:
            g += 1
        while (g - 1) * log2 >= bound:
            g -= 1
        safe = math.log(m) + bound + g * log2 + max(0.0, log_values) <= top
        if normalize == "l2":
            safe = safe and 2 * bound <= -log_tiny - 1 and math.log(m) + 2 * bound <= top
        if safe:
            return False, g
    g = 0
    while math.log(m) + log_values + g * log2 > top:
        g -= 1
    return True, g


def plan_probes():
    """(log_bound, m, log_values, normalize, dtype) around every boundary of the rule."""
    log2 = math.log(2.0)
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        info = np.finfo(dtype)
        log_max, log_tiny = math.log(float(info.max)), math.log(float(info.tiny))
        top = log_max - 1
        for m in (1, 3, 1000):
            coarse = np.arange(0.01, top / 2 + 1, 0.2 if dtype == np.float32 else 1.3)
            edge = np.arange((top - math.log(m)) / 2 - 1.0, (top - math.log(m)) / 2 + 0.2, 0.01)  # 2B near the top
            l2 = np.arange((-log_tiny - 1) / 2 - 0.6, (-log_tiny - 1) / 2 + 0.6, 0.005)  # 2B near -ln T - 1
            for normalize in ("softmax", "l2"):
                for bound in np.concatenate([coarse, edge, l2]):
                    bound = float(bound)
                    base = math.log(m) + bound + math.ceil(bound / log2) * log2
                    for log_values in (-math.inf, -1.0, 0.0, 0.5):
                        yield math.log(bound), m, log_values, normalize, dtype
                    for delta in (-1.5, -0.7, -0.3, -0.05, 0.05, 0.3, 0.7, 1.5):  # the sum at top + delta
                        yield math.log(bound), m, top - base + delta, normalize, dtype
                # shifted: the rescue power around m max|v| = M/e
                for log_bound in (64.0, 100.0, math.inf):
                    for excess in (-1.2, -0.5, -0.01, 0.01, 0.5, 0.7, 1.0, 1.5, 3.3, 50.0):
                        yield log_bound, m, top - math.log(m) + excess, normalize, dtype


def test_the_route_plan_is_the_documented_rule():
    """The unshifted route is taken exactly where attention's Notes allow it, with the power
    2**g >= e**B, and the shifted route rescues with the largest power that brings m max|v|
    below M/e.  Around every boundary of the rule.  Kills in _plan: ln 2 -> ln 3; growth
    max(0, .) -> max(1, .); gain = ceil(B / ln 2) -> ceil(B ln 2); gain * ln 2 -> gain / ln 2 in
    the condition; its right side ln M - 1 -> ln M + 1 or ln M - 2; normalize == "l2" ->
    != "l2", "XXl2XX", "L2"; in the l2 condition: safe = None, "and" -> "or" (both places),
    2B -> 3B (both places), -ln T - 1 -> -ln T + 1, +ln T - 1, -ln T - 2, ln M - 1 -> ln M - 2;
    in the shifted power: excess ln M - 1 -> ln M - 2, excess / ln 2 -> excess * ln 2,
    excess > 0 -> excess > 1, else 0 -> else 1."""
    seen = set()
    for probe in plan_probes():
        want = documented_plan(*probe)
        assert module._plan(*probe) == want, probe
        seen.add(want[0])
    assert seen == {False, True}


def test_the_route_plan_at_exact_equality():
    """The rule's inequalities are "<=": inputs found (by search) where a side equals the limit
    exactly in floating point.  Kills "<=" -> "<" in ln m + B + g ln 2 + growth <= ln M - 1, in
    2B <= -ln T - 1 (l2, float64) and in ln m + 2B <= ln M - 1 (l2, float32: it takes m ~ 1e17
    keys for the sum to land on the limit exactly)."""
    log2 = math.log(2.0)
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    # ln m + B + g ln 2 + log_values == ln M - 1 exactly, float32, m = 1, B = e**log(10)
    top = math.log(float(np.finfo(f32).max)) - 1
    bound = math.exp(math.log(10.0))
    partial = math.log(1) + bound + math.ceil(bound / log2) * log2
    log_values = top - partial
    while partial + log_values != top:
        log_values = math.nextafter(log_values, math.inf if partial + log_values < top else -math.inf)
    cases = [(math.log(10.0), 1, log_values, "softmax", f32),
             (5.86844403333781, 1, -math.inf, "l2", f64),
             (3.188835140907749, 106034023387206752, -math.inf, "l2", f32)]
    assert 2 * math.exp(cases[1][0]) == -math.log(float(np.finfo(f64).tiny)) - 1
    assert math.log(cases[2][1]) + 2 * math.exp(cases[2][0]) == top
    for case in cases:
        assert module._plan(*case) == documented_plan(*case)
        assert module._plan(*case)[0] is False, case


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


@pytest.mark.parametrize("n, m, heads, itemsize", [(1, 5, 3, 8), (7, 5, 4, 8), (20, 3, 2, 4), (2000, 2000, 8, 4),
                                                   (0, 4, 1, 8), (33, 1, 5, 8)])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("budget", [1, 16, 100, 1000, 1 << 22])
def test_block_layout_fills_the_budget_and_never_exceeds_it(monkeypatch, n, m, heads, itemsize, sparse, budget):
    """The layout's promise (its docstring): ``rows`` is a whole number of query rows, as many as
    fit BLOCK_BYTES with m scores each (at least 1, at most n), cut to about n / SKIP_BLOCKS with a
    mask but not below SKIP_MIN_ROWS; ``group`` slices share a block while it fits.  Kills
    ``max(1, ...)`` -> ``max(2, ...)`` for rows (2 rows of one query, or twice the budget),
    ``BLOCK_BYTES // ...`` -> ``/`` and ``-(-n // SKIP_BLOCKS)`` -> ``/`` (a float row count)."""
    monkeypatch.setattr(module, "BLOCK_BYTES", budget)
    rows, group = module._block_layout(n, m, heads, itemsize, sparse)
    assert type(rows) is int and type(group) is int
    row_bytes = m * itemsize
    full = max(1, min(n, budget // max(1, row_bytes)))  # the largest count that fits, or 1
    assert 1 <= rows <= max(1, n)
    assert rows == 1 or rows * row_bytes <= budget
    assert (rows == max(1, n) or (rows + 1) * row_bytes > budget) if not sparse else rows <= full
    if sparse:
        assert rows == min(full, max(module.SKIP_MIN_ROWS, math.ceil(n / module.SKIP_BLOCKS)))
    assert 1 <= group <= heads
    assert group == 1 or group * rows * row_bytes <= budget
    assert group == heads or (group + 1) * rows * row_bytes > budget


@pytest.mark.parametrize("budget", [100, 1 << 22])
def test_blocks_of_a_fractional_budget_and_of_a_cut_row_count_match_loops(monkeypatch, budget):
    """End to end: 100 bytes hold 2.5 float64 rows of 5 scores; with causal and SKIP_MIN_ROWS = 1,
    20 rows are cut to ceil(20 / 16) = 2 rows per block.  Kills the float divisions of
    _block_layout (attention then fails: a float row count is no range step)."""
    monkeypatch.setattr(module, "BLOCK_BYTES", budget)
    monkeypatch.setattr(module, "SKIP_MIN_ROWS", 1)
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(7, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    np.testing.assert_allclose(attention(q, k, v), attention_by_loops(q, k, v), rtol=1e-12, atol=1e-14)
    q, k, v = rng.normal(size=(20, 3)), rng.normal(size=(20, 3)), rng.normal(size=(20, 2))
    np.testing.assert_allclose(attention(q, k, v, causal=True), attention_by_loops(q, k, v, causal=True),
                               rtol=1e-12, atol=1e-14)


def test_operands_broadcasting_on_an_outer_batch_axis_match_loops(monkeypatch):
    """k, v, mask and reweight of length 1 on the first of two batch axes, q of length 2 there,
    with one row per block: each block takes index 0 of the broadcast axis.  Kills in _part
    ``0 if a.shape[axis] == 1 else outer[j]`` -> always ``outer[j]`` (IndexError on the second
    batch index)."""
    monkeypatch.setattr(module, "BLOCK_BYTES", 1)
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


def test_log_max_abs_is_the_log_of_the_largest_magnitude():
    """The bound on max|reweight| used by the route plan is exact below 1 too (a smaller bound
    allows the unshifted route more often).  Kills ``initial=0`` -> ``initial=1`` in _log_max_abs
    (which rounds every maximum below 1 up to 1)."""
    assert module._log_max_abs(np.array([0.25, -0.5])) == math.log(0.5)
    assert module._log_max_abs(np.array([[3.0, -7.0]])) == math.log(7.0)
    assert module._log_max_abs(np.zeros(3)) == -math.inf
    assert module._log_max_abs(np.zeros((0, 2))) == -math.inf


# ------------------------------------------------------------------ overflow: rescaling and the result's dtype


def test_a_query_near_the_largest_float_is_not_scaled_up():
    """|q| = 0.6 max with |k| <= 0.1: the scores (up to 0.06 max, log bound = ln max - 2.8) fit,
    so q is used as it is.  Kills ``log_bound <= log_max - 2`` -> ``<= log_max - 3`` in
    _fit_scores (which "rescales" by 2**-j with j = -1: q doubles to inf and the weights are NaN)."""
    top = float(np.finfo(np.float32).max)
    q = np.array([[0.6 * top]], np.float32)
    k, v = np.array([[0.1], [0.05]], np.float32), np.array([[1.0], [2.0]], np.float32)
    for normalize in ("softmax", "l2"):
        assert np.array_equal(attention_weights(q, k, scale=1.0, normalize=normalize), np.array([[1.0, 0.0]], np.float32))
        assert np.array_equal(attention(q, k, v, scale=1.0, normalize=normalize), np.array([[1.0]], np.float32))


def test_rounding_the_result_to_float16_warns_nothing():
    """float16 input is computed in float32 and rounded once; an answer beyond float16 (here a
    reweighted average of 3 * 60000) rounds to inf, its correct rounding, without a
    RuntimeWarning escaping.  Kills ``np.errstate(over="ignore")`` -> ``over=None`` in _finish."""
    import warnings

    f16 = np.float16
    q, k, v = np.ones((1, 2), f16), np.ones((3, 2), f16), np.full((3, 1), 60000, f16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = attention(q, k, v, reweight=np.full((1, 3), 3.0))
    assert out.dtype == f16 and np.isposinf(out[0, 0])


def test_exp_beyond_float16_without_a_denominator_is_an_error_that_says_so():
    """normalize="none" on float16: exp(12) is finite in float32, where it is computed, but beyond
    float16, the result's dtype: a ValueError that says so.  Kills the message of _finish mangled
    ("XXa score...XX", upper case)."""
    f16 = np.float16
    q, k, v = np.array([[3.0]], f16), np.array([[4.0]], f16), np.ones((1, 1), f16)
    message = r'^a score is too large for exp without a denominator \(normalize="none"\): .*overflows float16'
    with pytest.raises(ValueError, match=message):
        attention(q, k, v, scale=1.0, normalize="none")
    with pytest.raises(ValueError, match=message):
        attention_weights(q, k, scale=1.0, normalize="none")


@pytest.mark.parametrize("dtype, big", [(np.float32, 1e24), (np.float64, 1e160)])
def test_scores_far_beyond_the_largest_float_give_the_exact_weights(dtype, big, score_route):
    """q . k = +-big**2, far beyond the largest float (1e48 for float32, 1e320 for float64): q is
    divided by the power of two that brings the bound below max / e**2, and the weights are the
    exact [1, 0] (the scores differ by far more than exp's range).  Kills, in _fit_scores,
    ``(log_bound - log_max + 2) / ln 2`` -> ``* ln 2`` (too small a power: the scores still
    overflow to inf and the weights are NaN)."""
    q = np.array([[big, 0.0]], dtype)
    k = np.array([[big, 0.0], [-big, 0.0], [0.0, big]], dtype)
    v = np.array([[1.0], [2.0], [3.0]], dtype)
    for normalize in ("softmax", "l2"):
        a = attention_weights(q, k, scale=1.0, normalize=normalize)
        assert np.array_equal(a, np.array([[1.0, 0.0, 0.0]], dtype)), (normalize, a)
        assert np.array_equal(attention(q, k, v, scale=1.0, normalize=normalize), np.array([[1.0]], dtype))


def test_the_bias_is_scaled_with_q_when_the_scores_are_rescaled(score_route):
    """q . k = [1e38, 0] and a bias [0, 3e38] (float32): their sum overflows, so q and the bias are
    divided by a power of two; the second key wins, by far.  Kills ``bias = None`` in
    _fit_scores (the bias dropped: the first key wins)."""
    f32 = np.float32
    q, k = np.array([[1e19]], f32), np.array([[1e19], [0.0]], f32)
    bias = np.array([[0.0, 3e38]], f32)
    for normalize in ("softmax", "l2"):
        a = attention_weights(q, k, bias=bias, scale=1.0, normalize=normalize)
        assert np.array_equal(a, np.array([[0.0, 1.0]], f32)), (normalize, a)
    assert np.array_equal(attention(q, k, np.array([[2.0], [3.0]], f32), bias=bias, scale=1.0), np.array([[3.0]], f32))


def test_rescaling_by_the_smallest_power_keeps_a_small_query_entry(score_route):
    """q = [1e18, 3 * 2**-108] and keys [0, +-2**106] (float32): the scores are +-0.75, but the
    Cauchy-Schwarz bound |q| |k| ~ 8e49 overflows, so q is divided by 2**41, the smallest power
    that brings the bound below max / e**2.  That makes the small entry 3 * 2**-149, a subnormal
    still exact, and the weights are the exact softmax([0.75, -0.75]).  Kills, in _fit_scores,
    ``log_bound - log_max + 2`` -> ``+ 3`` (one more halving rounds the entry to 2**-148:
    weights [0.88, 0.12]).  (A larger first entry, 1e19, needs 2**45 and loses the small entry
    altogether on the power-of-two route: the counterexample of tests/test_numerics.py, which the
    wide route, here the other parametrisation, gets exact.)"""
    f32 = np.float32
    q = np.array([[1e18, 3 * 2.0**-108]], f32)
    k = np.array([[0.0, 2.0**106], [0.0, -(2.0**106)]], f32)
    s = np.array([0.75, -0.75])
    want = np.exp(s) / np.exp(s).sum()
    np.testing.assert_allclose(attention_weights(q, k, scale=1.0)[0], want, rtol=1e-6)
    v = np.array([[1.0], [0.0]], f32)
    np.testing.assert_allclose(attention(q, k, v, scale=1.0)[0, 0], want[0], rtol=1e-6)


@pytest.mark.parametrize("normalize, reweight", [("l2", None), ("softmax", np.array([[1.0, 0.5]]))])
def test_values_near_the_largest_float_average_without_overflow(normalize, reweight):
    """Two equal scores and values 2e38, 2.5e38 (float32): the unnormalised product of the
    numerators with v overflows, the answer (l2: 4.5e38 / sqrt 2 = 3.18e38; softmax with reweight
    [1, 0.5]: 1.625e38) does not, so the block is computed again with v times a power of two, and
    the denominators times the same power.  Kills, on this route without the fused denominator
    column, ``scaled = rescue`` -> ``scaled = None`` (denominators not scaled: the answer is off by
    that power) and ``where=denominator > 0`` -> ``> 1`` (the division skipped where the scaled
    denominator is below 1)."""
    f32 = np.float32
    q, k = np.zeros((1, 2), f32), np.zeros((2, 2), f32)
    v = np.array([[2e38], [2.5e38]], f32)
    w = np.array([0.5, 0.5]) if normalize == "softmax" else np.array([1.0, 1.0]) / math.sqrt(2.0)
    want = (w * (1.0 if reweight is None else reweight[0])) @ v.astype(np.float64)
    got = attention(q, k, v, normalize=normalize, reweight=reweight)
    assert got.dtype == f32
    np.testing.assert_allclose(got[0], want, rtol=1e-6)


def spy_shift(monkeypatch):
    """Whether each call of _numerators_inplace (the non-fused numerators) was asked to shift
    by the row maximum, in call order."""
    seen = []
    real = module._numerators_inplace

    def watching(z, kind, **kwargs):
        seen.append(kwargs.get("shift", True))
        return real(z, kind, **kwargs)

    monkeypatch.setattr(module, "_numerators_inplace", watching)
    return seen


def spy_blocks(monkeypatch):
    """The ``(start, stop)`` of every block of query rows attention computes, as it computes them
    (``_rows`` is called once per block for each of mask, bias and reweight)."""
    calls = []
    real = module._rows

    def counting(a, start, stop, n):
        calls.append((start, stop))
        return real(a, start, stop, n)

    monkeypatch.setattr(module, "_rows", counting)
    return calls


def test_each_block_of_rows_and_heads_is_computed_once(monkeypatch):
    """attention computes ceil(n / rows) blocks of query rows per group of heads, each once
    (_rows is called for the mask, bias and reweight of every block).  Kills, in attention,
    ``range(0, n, rows)`` -> ``range(0, n)`` and ``range(0, heads_total, group)`` ->
    ``range(0, heads_total)`` (overlapping blocks: the same rows or heads computed again and
    again) and ``heads_total = ... else 1`` -> ``else 2`` (without batch axes, every block twice)."""
    calls = spy_blocks(monkeypatch)
    rng = np.random.default_rng(8)
    monkeypatch.setattr(module, "BLOCK_BYTES", 3 * 5 * 8)  # 3 float64 rows of 5 scores
    q, k, v = rng.normal(size=(7, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    np.testing.assert_allclose(attention(q, k, v), attention_by_loops(q, k, v), rtol=1e-12, atol=1e-14)
    assert calls == [(0, 3)] * 3 + [(3, 6)] * 3 + [(6, 7)] * 3
    calls.clear()
    monkeypatch.setattr(module, "BLOCK_BYTES", 1 << 22)  # every head in one block
    q, k, v = rng.normal(size=(4, 2, 3)), rng.normal(size=(4, 5, 3)), rng.normal(size=(4, 5, 2))
    np.testing.assert_allclose(attention(q, k, v), attention_by_loops(q, k, v), rtol=1e-12, atol=1e-14)
    assert calls == [(0, 2)] * 3


def test_attention_without_batch_axes_allocates_one_block_of_scores():
    """2-D q, k, v (one slice, so one head): the score buffer holds one block of rows, here all
    512 rows of 512 float32 scores (1 MiB), and nothing else of that size is allocated.  Kills
    ``_block_layout(n, m, batch[-1] if batch else 1, ...)`` -> ``else 2`` (two slices per block:
    a buffer twice as large, for a second slice that does not exist)."""
    rng = np.random.default_rng(9)
    n = 512
    q, k, v = (rng.normal(size=(n, 16)).astype(np.float32) for _ in range(3))
    out, peak = traced_peak(attention, q, k, v)
    assert out.dtype == np.float32
    assert peak < 1.5 * n * n * 4, peak / (n * n * 4)


def test_a_rescued_block_warns_nothing_and_averages_exactly():
    """Four equal weights on values +-3e38 (float32): the first product of the numerators with v
    overflows (here to inf - inf = NaN, in the BLAS's order of summation), the block is computed
    again with v / 16, and the exact average 0 comes out, with no RuntimeWarning escaping.  Kills
    the ``np.errstate(over="ignore", invalid="ignore")`` around that product with either part
    dropped or set to None."""
    import warnings

    f32 = np.float32
    q, k = np.zeros((1, 2), f32), np.zeros((4, 2), f32)
    v = np.array([[3e38], [3e38], [-3e38], [-3e38]], f32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for normalize in ("softmax", "l2"):
            assert np.array_equal(attention(q, k, v, normalize=normalize), np.zeros((1, 1), f32))
        v2 = np.array([[3e38], [3e38]], f32)
        np.testing.assert_allclose(attention(q, k[:2], v2), [[3e38]], rtol=1e-6)


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


def test_rescaled_scores_keep_their_temperature_on_every_route(score_route):
    """|q| |k| ~ 1e40 overflows float32, so q is divided by a power of two that is passed on as
    a temperature; the scores themselves are small (1/sqrt 2 and 0), so the weights must be the
    true softmax([0.71, 0]) = [0.67, 0.33] (or its l2 form), not the nearly uniform weights of the
    divided scores.  attention with l2 or with a reweight computes the numerators apart from
    the denominators (not in one product with v).  Kills ``temperature=temperature`` dropped
    from that call of _numerators_inplace."""
    f32 = np.float32
    q = np.array([[1e20, 0.0]], f32)
    k = np.array([[1e-20, 1e20], [0.0, 1e20]], f32)
    v = np.array([[1.0], [0.0]], f32)
    s = np.array([1.0, 0.0]) / np.sqrt(2.0)
    soft, l2 = np.exp(s) / np.exp(s).sum(), np.exp(s) / np.linalg.norm(np.exp(s))
    assert abs(attention(q, k, v, normalize="l2")[0, 0] - l2[0]) < 1e-6
    assert abs(attention(q, k, v, reweight=np.array([[2.0, 1.0]]))[0, 0] - 2 * soft[0]) < 1e-6


@pytest.mark.parametrize("normalize, reweight", [("l2", None), ("softmax", np.full((8, 8), 0.5))])
def test_ordinary_inputs_take_the_unshifted_route(monkeypatch, normalize, reweight):
    """Unit-variance inputs are well inside the range where attention's Notes allow the unshifted
    route (no subtraction of the row maximum, two passes fewer); attention must then take it, for
    l2 and for softmax with a reweight too (their numerators are computed by _numerators_inplace,
    which is watched here).  Kills ``shift=shift`` dropped from that call (always shifted)."""
    seen = spy_shift(monkeypatch)
    rng = np.random.default_rng(10)
    q, k, v = rng.normal(size=(8, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 2))
    attention(q, k, v, normalize=normalize, reweight=reweight)
    assert seen == [False]


def test_a_block_computes_only_the_keys_its_rows_may_attend(monkeypatch):
    """attention, Notes: with a mask, a block computes only the keys lo:hi between the first and
    the last key that one of its rows may attend, and a block whose rows may attend no key is 0
    without computing anything.  Blocks of 2 rows: keys 2:4, nothing, key 0:1 (the scores that
    reach the exponential are watched).  Kills ``int(kept[-1]) + 1`` -> ``+ 2``,
    ``else (0, 0)`` -> ``else (0, 1)``, ``hi <= lo`` -> ``hi < lo``, ``m > 0 and hi <= lo`` ->
    ``m > 1 and ...`` and ``mask_b.shape[-1] == m > 0`` -> ``> 1`` (the last two with one key)."""
    shapes = []
    real = module._shifted_exp_inplace

    def watching(z, *args, **kwargs):
        shapes.append(z.shape)
        return real(z, *args, **kwargs)

    monkeypatch.setattr(module, "_shifted_exp_inplace", watching)
    monkeypatch.setattr(module, "BLOCK_BYTES", 2 * 5 * 8)  # 2 float64 rows of 5 scores
    rng = np.random.default_rng(11)
    q, k, v = rng.normal(size=(6, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    mask = np.zeros((6, 5), bool)
    mask[0, 2] = mask[1, 3] = mask[4, 0] = mask[5, 0] = True
    got = attention(q, k, v, mask=mask)
    np.testing.assert_allclose(got, attention_by_loops(q, k, v, mask=mask), rtol=1e-12, atol=1e-14)
    assert shapes == [(2, 2), (2, 1)]
    shapes.clear()
    got = attention(q[:2], k[:1], v[:1], mask=np.zeros((2, 1), bool))  # one key, masked for both rows
    assert np.array_equal(got, np.zeros((2, 2))) and shapes == []


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


# ------------------------------------------------------------------ the bounds on norms and scores


def exact_log_max_row_norm(x):
    """log of the largest Euclidean norm of a row, from exact rational sums of squares."""
    from fractions import Fraction

    rows = x.reshape(-1, x.shape[-1]) if x.size else np.zeros((0, max(1, x.shape[-1])))
    best = max((sum(Fraction(float(a)) ** 2 for a in row) for row in rows), default=Fraction(0))
    if best == 0:
        return -math.inf
    # log of a Fraction without overflow: split off a power of two
    e = best.numerator.bit_length() - best.denominator.bit_length()
    return 0.5 * (math.log(float(best / Fraction(2) ** e)) + e * math.log(2.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [1.0, 1e-3, 0.7, 1e30, 1e-30, 1e150, 1e-160])
@pytest.mark.parametrize("shape", [(5, 3), (2, 40, 3), (1, 4)])
def test_log_max_row_norm_is_a_tight_upper_bound(dtype, size, shape):
    """_log_max_row_norm bounds log max_i |x_i| from above, by at most k + 1 units of eps: for
    ordinary rows, for rows whose sums of squares overflow or fall below the smallest normal
    (then the rows are scaled by a power of two first), and in every batch shape (up to the
    rounding of the logarithms, a few units in the last place of log |x|).  Kills the
    sign and factor mutants of both returns (0.5 -> 1.5, 0.5 / log, e / ln 2, ln 3, - slack,
    - 0.5 log), the slack taken from another axis (shape[+1], shape[-2]), ldexp(x, +e),
    ``not top > 0`` -> ``not top > 1`` and ``<= _log(squares) < inf`` -> ``<= inf``."""
    info = np.finfo(dtype)
    if not float(info.tiny) * 1e6 < size < float(info.max) / 1e6:
        pytest.skip("not representable in this dtype")
    rng = np.random.default_rng(14)
    x = (rng.normal(size=shape) * size).astype(dtype)
    got = module._log_max_row_norm(x)
    want = exact_log_max_row_norm(x)
    k = x.shape[-1]
    rounding = 8 * math.ulp(abs(want))  # of the logarithms themselves
    assert want - rounding <= got <= want + (k + 1) * float(info.eps) + rounding, (got, want, (got - want) / float(info.eps))


def test_log_max_row_norm_of_nothing_is_minus_infinity():
    """No rows, or rows of zeros: log 0 = -inf.  Kills ``squares.max() if squares.size else 0.0``
    -> ``else 1.0`` and ``return -math.inf`` -> ``+math.inf``."""
    for x in (np.zeros((0, 3)), np.zeros((2, 0, 3)), np.zeros((3, 2)), np.zeros((2, 3), np.float32)):
        assert module._log_max_row_norm(x) == -math.inf


def test_ordinary_rows_are_not_scaled_before_their_sums_of_squares():
    """_log_max_row_norm's docstring: the rows are divided by a power of two only when their sums of
    squares overflow or fall below the smallest normal; ordinary rows give 0.5 log(max sum of
    squares) + k eps, the sums as numpy computes them.  Kills ``squares.max() if squares.size``
    -> ``if (squares.size) and False`` (always scaled first: a bound off by a rounding of the
    logarithms, which can move the route choice at its boundaries)."""
    rng = np.random.default_rng(15)
    for dtype in (np.float32, np.float64):
        for x in (rng.normal(size=(6, 5)), rng.normal(size=(2, 3, 7)) * 1e3, rng.normal(size=(4, 2)) * 1e-3):
            x = x.astype(dtype)
            squares = np.max(np.einsum("...k,...k->...", x, x))  # in x's dtype; its log in double precision
            want = 0.5 * math.log(float(squares)) + x.shape[-1] * float(np.finfo(dtype).eps)
            assert module._log_max_row_norm(x) == want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_score_bound_covers_a_score_that_is_all_bias(dtype):
    """q . k is 1e-30 at most and the bias 3: the score is 3 exactly, and log B must be at least
    log 3 (the rounding margin is added, never subtracted).  Kills ``+ (k + 4) eps`` -> ``- ...``
    and -> ``(k - 4) eps`` in _log_score_bound."""
    q, k = np.array([[1e-30, 0.0]], dtype), np.array([[0.0, 1.0]], dtype)
    bias = np.array([[3.0]], dtype)
    assert module._log_score_bound(q, k, bias) >= math.log(3.0)


def test_a_zero_bias_adds_nothing_to_the_score_bound():
    """Kills ``np.max(np.abs(bias), initial=0, ...)`` -> ``initial=1`` in _log_score_bound (every
    bias would count as at least 1)."""
    rng = np.random.default_rng(16)
    q, k = rng.normal(size=(3, 4)) * 1e-3, rng.normal(size=(5, 4)) * 1e-3
    assert module._log_score_bound(q, k, np.zeros((3, 5))) == module._log_score_bound(q, k, None)


def test_the_score_bound_is_tight_with_many_query_rows():
    """log B exceeds log(max |q_i| max |k_j|) by the rounding margins only, about (3k + 4) eps,
    however many query rows there are.  Kills the margin taken from another axis of q
    (``q.shape[+1]``, ``q.shape[-2]``: 40 rows instead of k = 3)."""
    rng = np.random.default_rng(17)
    for dtype in (np.float32, np.float64):
        q, k = rng.normal(size=(2, 40, 3)).astype(dtype), rng.normal(size=(5, 3)).astype(dtype)
        want = exact_log_max_row_norm(q) + exact_log_max_row_norm(k)
        eps = float(np.finfo(dtype).eps)
        assert want <= module._log_score_bound(q, k, None) <= want + (3 * 3 + 6) * eps


def test_a_masking_bias_does_not_stop_the_rescaling(score_route):
    """A bias of -inf (a masked key) is not part of the bound on the scores: q . k = +-1e48 still
    makes attention divide q by a power of two, and the weights are the exact [1, 0, 0].  Kills
    ``where=np.isfinite(bias)`` dropped in _log_score_bound (the bound becomes inf, nothing is
    rescaled and the scores overflow)."""
    f32 = np.float32
    q = np.array([[1e24, 0.0]], f32)
    k = np.array([[1e24, 0.0], [-1e24, 0.0], [0.0, 1e24]], f32)
    bias = np.array([[0.0, 0.0, -np.inf]], f32)
    assert np.array_equal(attention_weights(q, k, bias=bias, scale=1.0), np.array([[1.0, 0.0, 0.0]], f32))
    v = np.array([[1.0], [2.0], [3.0]], f32)
    assert np.array_equal(attention(q, k, v, bias=bias, scale=1.0), np.array([[1.0]], f32))


# ------------------------------------------------------------------ _prepare: validation and the compute dtype


def test_prepare_names_k_the_width_and_the_scale():
    """Kills, in _prepare: k's ``match=("q", q)`` dropped, None or mangled ("XXqXX", "Q"); the
    message for k = 0 without a scale dropped or upper-cased; ``check_real(scale, "scale", work)``
    without the dtype (a scale beyond float32, or one that rounds to 0 there, must be refused for
    float32 queries and keys even when q * scale does not overflow)."""
    q = np.ones((3, 4))
    with raises_naming(ValueError, "k", "(..., m, 4)", "to match q of shape (3, 4)"):
        attention_weights(q, np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"^q and k have width k = 0 \(q of shape \(3, 0\)\), so the default "
                                         r"scale 1/sqrt\(k\) is undefined"):
        attention_weights(np.ones((3, 0)), np.ones((5, 0)))
    f32 = np.float32
    for scale in (1e39, 1e-46):
        with raises_naming(ValueError, "scale", "float32"):
            attention_weights(np.zeros((2, 3), f32), np.ones((4, 3), f32), scale=scale)
        with raises_naming(ValueError, "scale", "float32"):
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


# ------------------------------------------------------------------ attention: dtypes, gains, routes


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
    """causal=True with a mask whose first kept key is 2: each block computes keys 2:hi, and inside
    it the keys after each query are set to -inf from column first - lo.  Kills
    ``scores[..., first - lo:]`` -> ``first + lo``."""
    monkeypatch.setattr(module, "BLOCK_BYTES", 2 * 6 * 8)  # 2 rows per block
    rng = np.random.default_rng(21)
    q, k, v = rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    mask = np.zeros((6, 6), bool)
    mask[:, 2:] = True
    np.testing.assert_allclose(attention(q, k, v, mask=mask, causal=True),
                               attention_by_loops(q, k, v, mask=mask, causal=True), rtol=1e-12, atol=1e-14)


def test_causal_attention_cuts_the_rows_into_blocks(monkeypatch):
    """With causal=True (or a mask) 200 query rows are cut into blocks of SKIP_MIN_ROWS = 64 rows,
    ceil(200 / 64) = 4 blocks, so that later blocks skip the keys no row of theirs may attend;
    without either, one block.  Kills the ``causal or mask is not None`` argument of
    _block_layout mutated (``and``, ``mask is None``, dropped to False)."""
    calls = spy_blocks(monkeypatch)
    rng = np.random.default_rng(22)
    q, k, v = rng.normal(size=(200, 2)), rng.normal(size=(200, 2)), rng.normal(size=(200, 1))
    for kwargs, blocks in (({"causal": True}, 4), ({"mask": np.ones((200, 200), bool)}, 4), ({}, 1)):
        calls.clear()
        attention(q, k, v, **kwargs)
        assert len(set(calls)) == blocks, (kwargs, sorted(set(calls)))


def test_prepare_names_the_mask_and_the_bias():
    """Kills, in _prepare: the targets "the scores (..., n, m)" of the mask and bias checks dropped
    or mangled; the bias's name mangled ("XXbiasXX", "BIAS", None) in as_float_array and
    check_fits; ``finite="-inf"`` -> None (NaN in the bias accepted); check_fits without the
    dtype; the message of a q * scale overflow dropped, and its RuntimeWarning let out."""
    import warnings

    q, k = np.ones((3, 4)), np.ones((5, 4))
    with raises_naming(ValueError, "mask", "(3, 4)", "of the scores (..., n, m), (3, 5)"):
        attention_weights(q, k, mask=np.ones((3, 4), bool))
    with raises_naming(ValueError, "bias", "(2, 5)", "of the scores (..., n, m), (3, 5)"):
        attention_weights(q, k, bias=np.ones((2, 5)))
    with raises_naming(TypeError, "bias"):
        attention_weights(q, k, bias=np.ones((3, 5)) > 0)
    with raises_naming(ValueError, "bias", "NaN"):
        attention_weights(q, k, bias=np.full((3, 5), np.nan))
    f32 = np.float32
    with raises_naming(ValueError, "bias", "float32"):
        attention_weights(q.astype(f32), k.astype(f32), bias=np.full((3, 5), 1e39))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^q \* scale overflows float32 \(scale = 100"):
            attention_weights(np.full((1, 2), 1e37, f32), np.ones((1, 2), f32), scale=100.0)


def test_one_key_takes_the_unshifted_route_too(monkeypatch):
    """One key is not a special case of the route plan: ordinary inputs take the unshifted route
    (watched where the fused softmax computes its numerators).  Kills ``and m > 0 and v.size``
    -> ``m > 1`` in attention (the plan skipped for one key)."""
    seen = []
    real = module._shifted_exp_inplace

    def watching(z, *args, **kwargs):
        seen.append(kwargs.get("shift", True))
        return real(z, *args, **kwargs)

    monkeypatch.setattr(module, "_shifted_exp_inplace", watching)
    rng = np.random.default_rng(23)
    out = attention(rng.normal(size=(3, 4)), rng.normal(size=(1, 4)), np.array([[0.5, -2.0]]))
    np.testing.assert_allclose(out, np.tile([[0.5, -2.0]], (3, 1)), rtol=1e-15)
    assert seen == [False]


@pytest.mark.parametrize("normalize, bound, reweight, shift", [
    ("l2", 43.6, None, True),  # e**2B = e**87.2: the l2 squares need 2B <= -ln T - 1 = 86.3, so shifted
    ("softmax", 43.3, np.ones((1, 1)), False),  # B + g ln 2 = 86.97 <= ln max - 1 with max|v| max|reweight| = 1
])
def test_the_route_at_the_edges_of_the_rule(monkeypatch, normalize, bound, reweight, shift):
    """One float32 key with the score bound B near 43.5, where attention's rule decides (see
    test_the_route_plan_is_the_documented_rule): attention passes the rule the normalisation and
    log(max|v| max|reweight|) = 0 here, and takes the route it returns (watched where the
    numerators are computed).  Kills ``_plan(..., normalize, work)`` -> ``_plan(..., None, work)``
    (the l2 conditions skipped) and, with a reweight, ``max(log_values, 0.0)`` -> ``max(log_values, 1.0)``
    (a max |v| below e counted as e: shifted)."""
    seen = spy_shift(monkeypatch)
    f32 = np.float32
    root = math.sqrt(bound)
    q, k, v = np.array([[root]], f32), np.array([[root]], f32), np.ones((1, 1), f32)
    assert abs(module._log_score_bound(q, k, None) - math.log(bound)) < 1e-5
    out = attention(q, k, v, normalize=normalize, reweight=reweight, scale=1.0)
    assert out[0, 0] == 1.0
    assert seen == [shift]


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


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps,
                    reason="long double is float64 on this platform")
def test_long_double_scores_beyond_its_largest_number_are_rescaled():
    """|q| |k| = 1e4940 is beyond long double's largest number (about 1.19e4932): attention rescales
    the queries, as for any dtype, and the weights are the limit (1, 0). That needs the logarithm of
    long double's largest number, which is inf as a Python float: kills taking math.log of the
    float there (0 < f <= inf), which made the bound look safe and the scores overflow."""
    big = np.longdouble("1e2470")
    q = np.array([[big]], dtype=np.longdouble)
    k = np.array([[big], [-big]], dtype=np.longdouble)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w = attention_weights(q, k, scale=1.0)
    assert w.dtype == np.longdouble and w.tolist() == [[1.0, 0.0]]


# ------------------------------------------------------------------ the wide route (scores beyond the range)


LONG_DOUBLE_WIDER = float(np.log(np.finfo(np.longdouble).max)) > 2 * math.log(float(np.finfo(np.float64).max)) + 8
WIDE_DTYPES = [np.float32] + ([np.float64] if LONG_DOUBLE_WIDER else [])


def overflowing(dtype, q, k):
    """``(q, k)`` with two more columns that leave every score as it is while the Cauchy-Schwarz
    bound |q_i| |k_j| overflows ``dtype``: q gets (2**e, 0) and k gets (0, 2**e), e = 3/4 maxexp."""
    e = 3 * int(np.finfo(dtype).maxexp) // 4
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    n, m = q.shape[:-1], k.shape[:-1]
    q = np.concatenate([q, np.full(n + (1,), 2.0**e), np.zeros(n + (1,))], axis=-1).astype(dtype)
    k = np.concatenate([k, np.zeros(m + (1,)), np.full(m + (1,), 2.0**e)], axis=-1).astype(dtype)
    assert module._log_score_bound(q, k, None) > math.log(float(np.finfo(dtype).max))  # the wide route
    return q, k


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble])
def test_the_wide_dtype_holds_every_score_of_any_width(dtype):
    """_wide_dtype's docstring: its one test (the smallest subnormal squared is normal in the wide
    dtype) also gives the range for every score of width below 2**700, (k + 1) max**2 < wide max;
    long double has nothing wider.  Checked here on this platform's dtypes."""
    wide = module._wide_dtype(np.dtype(dtype))
    if np.dtype(dtype) == np.longdouble:
        assert wide is None
        return
    if wide is None:  # float64 where long double is not wider
        assert np.dtype(dtype) == np.float64 and not LONG_DOUBLE_WIDER
        return
    info, winfo = np.finfo(dtype), np.finfo(wide)
    log = module._log_beyond_float
    assert 2 * log(info.max) + 700 * math.log(2.0) < log(winfo.max)
    assert 2 * log(info.smallest_subnormal) >= log(winfo.tiny)


@pytest.mark.parametrize("dtype", WIDE_DTYPES)
@pytest.mark.parametrize("normalize", ["softmax", "l2", "relu2"])
def test_batched_scores_of_an_overflowing_bound_match_each_slice(dtype, normalize):
    """Batch axes on the wide route: every (batch, head) slice equals the call on that slice alone
    (2-D, where the last axis is axis 1 too; the 2-D results are checked against exact references
    in test_numerics).  Kills in _wide_scores the row maximum ``np.max(scores, axis=-1, ...)`` ->
    ``axis=+1`` (the maximum over the rows of a slice, a shift that differs between the keys), and
    in attention_weights ``np.swapaxes(k, -1, -2)`` -> ``np.swapaxes(k, +1, -2)`` (k untransposed)."""
    rng = np.random.default_rng(31)
    q, k = overflowing(dtype, rng.uniform(-3, 3, (2, 3, 4, 2)), rng.uniform(-3, 3, (2, 3, 5, 2)))
    v = rng.uniform(-3, 3, (2, 3, 5, 2)).astype(dtype)
    a, out = attention_weights(q, k, scale=1.0, normalize=normalize), attention(q, k, v, scale=1.0, normalize=normalize)
    for i in np.ndindex(2, 3):
        np.testing.assert_array_equal(a[i], attention_weights(q[i], k[i], scale=1.0, normalize=normalize))
        np.testing.assert_allclose(out[i], attention(q[i], k[i], v[i], scale=1.0, normalize=normalize),
                                   rtol=50 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", WIDE_DTYPES)
def test_a_key_masked_for_one_row_of_a_block_never_sets_that_rows_shift(dtype):
    """attention on the wide route with a mask that removes the big key (score big**2, 1e38 or
    1e600) for one row only, while another row of the same block attends it: the block keeps the
    key (no key skipping), and only the mask stops it from being that row's maximum (otherwise
    the row's other scores, shifted by big**2, all give exp = 0 and the row is 0).  Also with
    ``causal``, where the row's big key is removed by the mask, not by causality.  The answers
    are exact softmax averages.  Kills in attention ``removed = None if mask_b is None else
    np.logical_not(mask_b)`` -> ``removed = None`` and -> ``None if (mask_b is None) or True ...``,
    and ``removed = future if removed is None else removed | future`` -> ``future if (removed is
    None) or True ...`` (the mask dropped when causal)."""
    big_q, e = {np.float32: (1e19, 106), np.float64: (1e300, 999)}[dtype]
    small = 3 * 2.0 ** -(e + 2)  # scores +-0.75 with the keys (0, +-2**e)
    q = np.array([[big_q, small]] * 3, dtype)
    k = np.array([[0.0, 2.0**e], [0.0, -(2.0**e)], [big_q, 0.0]], dtype)  # key 2: score big_q**2
    v = np.array([[3.0], [-2.0], [7.0]], dtype)
    w = 1 / (1 + math.exp(-1.5))  # softmax(0.75, -0.75)[0]
    pair = w * 3.0 + (1 - w) * -2.0
    rtol = 8 * np.finfo(dtype).eps
    keep = np.array([[True, True, False], [True, True, True], [True, True, True]])
    np.testing.assert_allclose(attention(q, k, v, mask=keep, scale=1.0)[:, 0], [pair, 7.0, 7.0], rtol=rtol)
    keep = np.array([[True, True, True], [True, True, True], [True, True, False]])
    np.testing.assert_allclose(attention(q, k, v, mask=keep, causal=True, scale=1.0)[:, 0], [3.0, pair, pair],
                               rtol=rtol)


def test_the_wide_route_normalises_in_the_work_dtype_like_the_ordinary_path():
    """Scores that are exact small integers give the same float32 weights, bit for bit, whether
    the bound is ordinary or overflows (the wide route shifts them exactly, then normalises in
    float32 as the ordinary path does: attention_weights' Notes, "computed in at least float32",
    and attention's, "only the shifted scores ... are rounded to the work dtype").  Kills in
    attention_weights ``scores = np.empty(shape, dtype=q.dtype)`` -> ``dtype=None`` and the
    dtype omitted (float64 scores: the weights normalised in float64, then rounded)."""
    q = np.array([[1.0, 2.0], [3.0, -1.0], [0.0, 1.0], [2.0, 2.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 2.0], [2.0, -1.0]])
    wq, wk = overflowing(np.float32, q, k)
    for normalize in ("softmax", "l2"):
        want = attention_weights(q.astype(np.float32), k.astype(np.float32), scale=1.0, normalize=normalize)
        got = attention_weights(wq, wk, scale=1.0, normalize=normalize)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)


def test_a_relu2_row_beyond_the_range_leaves_the_other_rows_as_they_are():
    """relu2 in attention: row 0's relu(s)**2 = 4e38 is beyond float32 (inf, the correct rounding),
    row 1's is 9, times v = 5: 45 exactly.  No rescue is planned for relu2.  Kills in attention
    ``shift, gain, rescue = True, 0, 0`` -> ``rescue 1`` (an overflow anywhere recomputes the
    block with 2 v, and relu2 has no denominator to undo the 2: row 1 gives 90)."""
    f32 = np.float32
    q, k, v = np.array([[2e19], [3.0]], f32), np.array([[1.0]], f32), np.array([[5.0]], f32)
    with np.errstate(over="ignore"):
        out = attention(q, k, v, scale=1.0, normalize="relu2")
    assert out[0, 0] == np.inf and out[1, 0] == 45.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_whose_largest_sum_of_squares_is_the_smallest_normal_are_not_scaled(dtype):
    """_log_max_row_norm's docstring: rows are scaled first only when the largest sum of squares
    falls *below* the smallest normal float (or overflows).  Four entries 2**(e/2 - 1) (e the
    exponent of the smallest normal) have the sum of squares 2**e exactly, a normal number: the
    bound is 0.5 log(that sum) + k eps, the sum as numpy computes it.  Kills
    ``info.tiny <= squares`` -> ``info.tiny < squares`` (the scaled route's bound, off by the
    rounding of its logarithms: one unit in the last place for the second float32 row).  The same test found the earlier comparison of logarithms,
    ``log_tiny <= _log(squares)``, wrong for float32: the float32 log of the smallest normal rounds
    below math.log of it, so such rows were scaled."""
    e = int(np.finfo(dtype).minexp)  # tiny = 2**e
    for x in (np.full((2, 4), 2.0 ** (e // 2 - 1), dtype), np.array([[2.0 ** (e // 2)], [0.0]], dtype)):
        squares = np.max(np.einsum("...k,...k->...", x, x))
        assert squares == np.finfo(dtype).tiny
        want = 0.5 * math.log(float(squares)) + x.shape[-1] * float(np.finfo(dtype).eps)
        assert module._log_max_row_norm(x) == want


def test_values_are_scaled_on_the_unshifted_route_unless_no_product_can_underflow(monkeypatch):
    """attention's Notes: on the unshifted route v is multiplied by 2**g (g = ceil(B / ln 2)),
    except that with min |v| >= e**(B + 1) T no product e**s v can underflow and g = 0 saves
    scaling V.  One float32 key, score -4 (B = 4, g = 6): min |v| = e**(B + 0.5) T is scaled,
    e**(B + 1.5) T is not (watched where np.ldexp is called with an array); the output is v
    either way.  Kills ``log_vmin >= ... + math.exp(log_bound) + 1`` -> ``... - 1`` (v below the
    documented limit left unscaled, its products e**s v in the subnormals)."""
    scaled = []
    real = np.ldexp

    def watching(x, e, *args, **kwargs):
        if np.ndim(x) > 0:
            scaled.append(int(np.max(e)))
        return real(x, e, *args, **kwargs)

    monkeypatch.setattr(np, "ldexp", watching)
    f32 = np.float32
    q, k = np.array([[2.0]], f32), np.array([[-2.0]], f32)
    bound = math.exp(module._log_score_bound(q, k, None))
    assert 4 <= bound < 4.001
    log_tiny = math.log(float(np.finfo(f32).tiny))
    for margin, want in ((0.5, [6]), (1.5, [])):
        scaled.clear()
        v = np.array([[math.exp(log_tiny + bound + margin)]], f32)
        out = attention(q, k, v, scale=1.0)
        np.testing.assert_allclose(out, v, rtol=4 * np.finfo(f32).eps)
        assert scaled == want, (margin, scaled)


def bound_exactly(log_target):
    """``(q, k)`` of float64 whose computed score bound is exactly ``log_target``, found by bisection
    on q's large entry (the bound is nondecreasing in it): q = (A, 2**-500) against the keys
    (0, +-2**500), scores +-1."""
    k = np.array([[0.0, 2.0**500], [0.0, -(2.0**500)]])

    def bound(a):
        return module._log_score_bound(np.array([[a, 2.0**-500]]), k, None)

    lo, hi = 1e150, 1e160
    while True:
        mid = math.exp((math.log(lo) + math.log(hi)) / 2) if hi / lo > 1.0001 else lo / 2 + hi / 2
        if mid in (lo, hi):
            break
        lo, hi = (lo, mid) if bound(mid) >= log_target else (mid, hi)
    assert bound(hi) == log_target  # hit exactly (the bound steps through every float near it)
    return np.array([[hi, 2.0**-500]]), k


def test_a_bound_of_exactly_the_largest_float_over_e_squared_takes_the_ordinary_path(monkeypatch):
    """_fit_scores: the scores are formed in a wider dtype only when the bound B comes *beyond*
    max / e**2; at B = max / e**2 exactly (an input found by search) the ordinary path forms them
    in float64, as at every smaller bound.  Kills ``log_bound <= log_max - 2`` -> ``log_bound <
    log_max - 2`` in _fit_scores, where long double is wider than float64 (elsewhere the mutant
    divides q by 2**0 and is the same function).  That mutant had been explained as equivalent
    before the wide route existed."""
    def refuse(*args):
        raise AssertionError("the wide route was taken")

    monkeypatch.setattr(module, "_wide_scores", refuse)
    q, k = bound_exactly(math.log(float(np.finfo(np.float64).max)) - 2)
    w = [1 / (1 + math.exp(-2.0)), 1 / (1 + math.exp(2.0))]  # softmax(1, -1)
    np.testing.assert_allclose(attention_weights(q, k, scale=1.0), [w], rtol=4e-15)
    np.testing.assert_allclose(attention(q, k, np.array([[3.0], [-2.0]]), scale=1.0), [[3 * w[0] - 2 * w[1]]], rtol=4e-15)


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_log_max_row_norm_bounds_the_norm_from_above_in_float32(k):
    """The bound on a row's norm is an upper bound: its margin, k eps, covers the rounding of
    the sum of squares, and the logarithm is taken in double precision.  Taken in float32 (as
    `_log` once did, through np.log of a float32 scalar) it came out up to about 1e-6 below
    the true logarithm for rows of norm near 1e19, beyond the margin of a few eps.  The
    reference sums the exact squares of the float32 entries with math.fsum."""
    rng = np.random.default_rng(20261123)
    x = (rng.standard_normal((2000, k)) * 1e19).astype(np.float32)
    short = 0.0
    for row in x:
        true = 0.5 * math.log(math.fsum(float(t) * float(t) for t in row))  # float32 squares are exact in float64
        short = max(short, true - module._log_max_row_norm(row[None, :]))
    assert short <= 0.0, f"the bound falls {short:.3g} below log of the largest norm"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_score_bound_adds_the_documented_margin(dtype):
    """_log_score_bound's docstring: log B is the log of the largest row norms of q and k (each
    with its own k eps, _log_max_row_norm's docstring) plus (k + 4) eps for the rounding of the
    dot products.  Entries 1, 2 and 3 have exact sums of squares (q: 1 + 4 + 9 = 14 at most, k:
    9 + 9 + 9 = 27), so the bound is exactly 0.5 log 14 + 0.5 log 27 + (3k + 4) eps up to the
    rounding of double logarithms.  Kills (k + 4) -> (k + 5), a margin one eps wider than the
    one documented."""
    q = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], dtype)
    k = np.array([[3.0, 3.0, 3.0], [0.0, 2.0, 1.0]], dtype)
    n = q.shape[-1]
    eps = float(np.finfo(dtype).eps)
    want = 0.5 * math.log(14.0) + 0.5 * math.log(27.0) + (3 * n + 4) * eps
    assert abs(module._log_score_bound(q, k, None) - want) <= 1e-13


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_of_zero_give_zero_without_a_warning(dtype):
    """v = 0 (min |v| = max |v| = 0, whose logarithms are -inf) gives an output of exact zeros and
    no warning: the logarithm of 0 is -inf by definition in _log, never np.log(0), which warns
    "divide by zero".  Kills ``if a > 0`` -> ``if a >= 0`` and -> ``if (a > 0) or True`` there."""
    rng = np.random.default_rng(5)
    q, k = rng.normal(size=(3, 4)).astype(dtype), rng.normal(size=(5, 4)).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = attention(q, k, np.zeros((5, 2), dtype))
    assert out.dtype == dtype and not np.any(out)
