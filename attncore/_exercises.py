"""The exercises of the practice notebooks: references, cases and known mistakes.

Each reference is attncore's own function (integer input computed in float64);
each :class:`~attncore._practice.Mistake` is a wrong variant a student plausibly
writes, with the id :func:`attncore.practice.check` reports when a function's
output matches it.  ``claim`` names the row of book/claims.yml whose ``catches``
names the same wrong variant (one source of truth; tests/test_practice.py checks it).
"""

from __future__ import annotations

import numpy as np

from attncore._attention import attention, attention_weights, merge_heads, split_heads
from attncore._masks import causal_mask
from attncore._norms import layer_norm
from attncore._practice import Case, Mistake, Spec, as_float
from attncore._softmax import softmax
from attncore._synthesizer import synthesizer_attention


def _rn(seed, *shape, dtype=np.float64, scale=1.0):
    """Standard normal entries times ``scale``, from ``default_rng(seed)``."""
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


def _exp_rows(x, axis=-1, shift=True):
    return np.exp(x - np.max(x, axis=axis, keepdims=True)) if shift else np.exp(x)


def _other_axis(x, axis):
    return 0 if axis % x.ndim != 0 else -1


# ---- Chapter 1 --------------------------------------------------------------------------

def _softmax_cases():
    return [
        Case((np.array([1.0, 2.0, 3.0]), -1), "a single row"),
        Case((_rn(0, 2, 3), -1), "two rows, seed 0"),
        Case((np.array([[1000.0, 0.0], [-1e4, -1e4]]), -1), "large logits"),
        Case((_rn(1, 3, 2), 0), "axis=0, seed 1"),
        Case((np.array([[1, 2], [3, 5]]), -1), "integer logits, computed in float64"),
        Case((_rn(2, 2, 4, dtype=np.float32), -1), "float32 logits, seed 2"),
        Case((_rn(3, 2, 3, 4, scale=3.0), -1), "a batch of 2 x 3 rows, seed 3"),
    ]


SOFTMAX_MISTAKES = (
    Mistake("no_max_shift", "this matches softmax without the max shift: exp overflows for logits like "
            "1000 (inf / inf = nan). Subtract `x.max(axis=axis, keepdims=True)` before `np.exp`; the "
            "softmax does not change (shift invariance).",
            lambda x, axis=-1: (lambda e: e / e.sum(axis=axis, keepdims=True))(_exp_rows(x, axis, False)),
            claim="softmax-max-subtraction-is-stable"),
    Mistake("sum_over_all", "rows do not sum to 1: the normaliser sums every entry of the array "
            "(`e.sum()`), not the entries along `axis`.",
            lambda x, axis=-1: (lambda e: e / e.sum())(_exp_rows(x, axis)), claim="weights-sum-to-one"),
    Mistake("wrong_axis", "rows do not sum to 1: the normaliser runs over the wrong axis. Sum along "
            "`axis` with `keepdims=True`.",
            lambda x, axis=-1: (lambda e: e / e.sum(axis=_other_axis(x, axis), keepdims=True))(_exp_rows(x, axis)),
            claim="weights-sum-to-one"),
    Mistake("ignores_axis", "this matches a softmax over the last axis whatever `axis` says: pass `axis` "
            "to both the max and the sum.", lambda x, axis=-1: softmax(as_float(x))),
    Mistake("no_keepdims", "the sums lost their axis (`e.sum(axis=axis)` without `keepdims=True`), so "
            "they cannot be divided into the rows (or are divided into the wrong entries).",
            lambda x, axis=-1: (lambda e: e / e.sum(axis=axis))(_exp_rows(x, axis))),
    Mistake("divides_by_max", "this divides by the row maximum instead of the row sum: the largest weight is "
            "1 and the rows do not sum to 1.",
            lambda x, axis=-1: (lambda e: e / e.max(axis=axis, keepdims=True))(_exp_rows(x, axis)),
            claim="weights-sum-to-one"),
)


def _causal_cases():
    return [Case((n,), f"n = {n}") for n in (2, 3, 5, 1)]


CAUSAL_MISTAKES = (
    Mistake("future_visible", "this is the upper triangle: each query sees the keys after it (the future) "
            "and not the ones before. Query i may attend keys 0..i: `np.tril`, or `np.tri(n, dtype=bool)`.",
            lambda n: np.triu(np.ones((n, n), dtype=bool))),
    Mistake("diagonal_excluded", "each query is kept from attending to itself: key i is allowed for query i "
            "(row 0 would otherwise have nothing to attend).",
            lambda n: np.tri(n, k=-1, dtype=bool)),
    Mistake("inverted", "True and False are swapped: here True means \"may attend\" (as in PyTorch's "
            "scaled_dot_product_attention), not \"masked out\".",
            lambda n: ~np.tri(n, dtype=bool)),
    Mistake("all_visible", "every query sees every key: nothing is masked.",
            lambda n: np.ones((n, n), dtype=bool)),
)


def _attention_cases():
    mask = np.array([[True, False, True, False], [False, True, True, True]])
    big = 40.0 * np.eye(4)[:3]
    return [
        Case((_rn(0, 2, 4), _rn(1, 3, 4), _rn(2, 3, 2)), "2 queries, 3 keys, d_k = 4, d_v = 2; seeds 0, 1, 2"),
        Case((_rn(3, 2, 4), _rn(4, 4, 4), _rn(5, 4, 1), mask), "a boolean mask, True = may attend; seeds 3-5"),
        Case((_rn(6, 3, 2), _rn(7, 3, 2), _rn(8, 3, 3), causal_mask(3)), "a causal mask; seeds 6-8"),
        Case((big, 50.0 * np.eye(4), _rn(9, 4, 2)), "large scores (1000); seed 9"),
        Case((_rn(10, 2, 3, 4), _rn(11, 2, 5, 4), _rn(12, 2, 5, 3)), "a batch of 2; seeds 10-12"),
        Case(tuple(_rn(s, 3, 4, dtype=np.float32) for s in (13, 14, 15)), "float32 input; seeds 13-15"),
    ]


def _attn(q, k, v, mask=None, *, scale=None, axis=-1, shift=True, after=False, t=None):
    """Attention with one deliberate change (the wrong variants below)."""
    q, k, v = as_float(q), as_float(k), as_float(v)
    kt = np.swapaxes(k, -1, -2) if t is None else t(k)
    s = q @ kt * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None and not after:
        s = np.where(mask, s, -np.inf)
    e = _exp_rows(s, axis, shift)
    w = e / e.sum(axis=axis, keepdims=True)
    return (w * mask if after else w) @ v


def _reference_attention(q, k, v, mask=None):
    return attention(as_float(q), as_float(k), as_float(v), mask=mask)


ATTENTION_MISTAKES = (
    Mistake("no_scale", "the scores are not divided by sqrt(d_k): multiply `q @ np.swapaxes(k, -1, -2)` by "
            "`1 / math.sqrt(q.shape[-1])` (math.sqrt keeps float32 scores float32).",
            lambda q, k, v, mask=None: _attn(q, k, v, mask, scale=1.0)),
    Mistake("transpose_with_T", "`k.T` reverses every axis of k, so on a batch (3 axes or more) it moves the batch "
            "axis too: transpose the last two axes only, with `np.swapaxes(k, -1, -2)`.",
            lambda q, k, v, mask=None: _attn(q, k, v, mask, t=np.transpose)),
    Mistake("scale_1_over_d_k", "the scores are divided by d_k instead of sqrt(d_k).",
            lambda q, k, v, mask=None: _attn(q, k, v, mask, scale=1 / q.shape[-1]), claim="attention-worked-example"),
    Mistake("scale_uses_d_v", "the scale uses the value width d_v (v.shape[-1]); it is 1/sqrt(d_k), the width "
            "of queries and keys.", lambda q, k, v, mask=None: _attn(q, k, v, mask, scale=1 / np.sqrt(v.shape[-1]))),
    Mistake("softmax_over_queries", "the softmax runs over the queries (axis -2) instead of the keys (axis -1): "
            "each query's weights must sum to 1.", lambda q, k, v, mask=None: _attn(q, k, v, mask, axis=-2),
            claim="attention-worked-example"),
    Mistake("mask_ignored", "the mask is not applied: a query attends to keys it may not see.",
            lambda q, k, v, mask=None: _attn(q, k, v), claim="attention-masks"),
    Mistake("mask_inverted", "the mask is used the other way round: True means \"may attend\", so remove the "
            "scores where the mask is False (`np.where(mask, s, -np.inf)`).",
            lambda q, k, v, mask=None: _attn(q, k, v, None if mask is None else ~mask)),
    Mistake("mask_after_softmax", "the mask zeroes weights after the softmax, so the rows no longer sum to 1: "
            "remove the scores (set them to -inf) before the softmax.",
            lambda q, k, v, mask=None: _attn(q, k, v, True if mask is None else mask, after=True)),
    Mistake("no_max_shift", "the softmax inside has no max shift: exp overflows at scores near 1000.",
            lambda q, k, v, mask=None: _attn(q, k, v, mask, shift=False), claim="softmax-max-subtraction-is-stable"),
)


def _split_cases():
    return [
        Case((np.arange(12.0).reshape(3, 4), 2), "x = arange(12) as 3 tokens of width 4, 2 heads"),
        Case((_rn(0, 2, 6), 3), "2 tokens of width 6, 3 heads; seed 0"),
        Case((_rn(1, 2, 3, 4), 1), "one head, a batch of 2; seed 1"),
        Case((_rn(2, 2, 4, 6).astype(np.float32), 2), "a batch, float32; seed 2"),
    ]


def _grouped(x, h, order):
    """``x`` (..., n, d) reshaped to heads in a wrong grouping."""
    n, d = x.shape[-2:]
    if order == "reshape_only":  # (..., n, d) -> (..., h, n, d/h) in memory order
        return x.reshape(*x.shape[:-2], h, n, d // h)
    if order == "no_transpose":
        return x.reshape(*x.shape[:-2], n, h, d // h)
    return np.moveaxis(x.reshape(*x.shape[:-2], n, d // h, h), -1, -3)  # strided: head i takes i, i+h, ...


SPLIT_MISTAKES = (
    Mistake("no_transpose", "the heads are not moved in front of the tokens: after reshaping to "
            "(..., n, h, d/h), swap the axes -3 and -2 to get (..., h, n, d/h).",
            lambda x, h: _grouped(x, h, "no_transpose")),
    Mistake("reshape_only", "a single reshape to (..., h, n, d/h) regroups the numbers in memory order, so a "
            "head mixes features of different tokens. Reshape to (..., n, h, d/h) first, then swap axes.",
            lambda x, h: _grouped(x, h, "reshape_only"), claim="synth-multi-head-is-repetition"),
    Mistake("strided_heads", "head i takes every h-th feature (i, i+h, ...); it must take the block of "
            "consecutive features i*d/h .. (i+1)*d/h - 1.", lambda x, h: _grouped(x, h, "strided")),
)


def _merge_cases():
    return [Case((split_heads(c.args[0], c.args[1]),), c.note.replace("heads", "heads, split"))
            for c in _split_cases()]


MERGE_MISTAKES = (
    Mistake("reshape_only", "a reshape straight to (..., n, h*k) reads the heads in memory order and mixes "
            "tokens: swap the axes -3 and -2 first (to (..., n, h, k)), then reshape.",
            lambda x: x.reshape(*x.shape[:-3], x.shape[-2], -1)),
    Mistake("strided_heads", "the features of the heads are interleaved (head 0's first feature, head 1's first "
            "feature, ...); concatenate them instead: head 0's k features, then head 1's, ...",
            lambda x: np.moveaxis(x, -3, -1).reshape(*x.shape[:-3], x.shape[-2], -1)),
    Mistake("sums_heads", "the heads are summed; they are concatenated along the features (width h*k).",
            lambda x: x.sum(axis=-3)),
    Mistake("heads_as_tokens", "the heads end up as extra tokens (shape (..., h*n, k)); concatenate them "
            "along the features.", lambda x: x.reshape(*x.shape[:-3], -1, x.shape[-1])),
)


def _layer_norm_cases():
    rows = np.array([[1.0, 2.0, 3.0, 6.0], [2.0, 2.0, 2.0, 2.0]])
    return [
        Case((rows, np.ones(4), np.zeros(4)), "two rows, the second constant; gamma = 1, beta = 0"),
        Case((_rn(0, 3, 5), _rn(1, 5), _rn(2, 5)), "random gamma and beta; seeds 0-2"),
        Case((1e-3 * _rn(3, 2, 6), np.ones(6), np.zeros(6)), "small features (scale 1e-3); seed 3"),
        Case((_rn(4, 2, 3, 4, dtype=np.float32), _rn(5, 4, dtype=np.float32), _rn(6, 4, dtype=np.float32)),
             "a batch, float32; seeds 4-6"),
    ]


def _ln(x, gamma, beta, *, axis=-1, ddof=0, eps_in=True, eps=1e-5):
    """LayerNorm with one deliberate change (the wrong variants below)."""
    mu = x.mean(axis=axis, keepdims=True)
    sd = x.std(axis=axis, ddof=ddof, keepdims=True)
    return (x - mu) / (np.sqrt(sd ** 2 + eps) if eps_in else sd + eps) * gamma + beta


LAYER_NORM_MISTAKES = (
    Mistake("unbiased_variance", "the variance divides by d - 1 (`ddof=1`); LayerNorm divides by d.",
            lambda x, g, b: _ln(x, g, b, ddof=1), claim="ln-parameter-names"),
    Mistake("gamma_beta_swapped", "gamma and beta are swapped: gamma scales, beta shifts "
            "(`y * gamma + beta`).", lambda x, g, b: _ln(x, b, g), claim="ln-parameter-names"),
    Mistake("over_tokens", "the mean and variance run over the tokens (axis -2) instead of each token's "
            "features (axis -1).", lambda x, g, b: _ln(x, g, b, axis=-2), claim="norm-axes"),
    Mistake("eps_outside_sqrt", "eps is added to the standard deviation; it goes under the square root: "
            "`np.sqrt(var + eps)`. The difference shows when the variance is small.",
            lambda x, g, b: _ln(x, g, b, eps_in=False)),
    Mistake("no_eps", "without eps, a constant row divides 0 by 0: add eps = 1e-5 to the variance.",
            lambda x, g, b: _ln(x, g, b, eps=0.0)),
)


def _layer_norm_reference(x, gamma, beta):
    return layer_norm(as_float(x), gamma, beta, eps=1e-5)


def _sym_cases():
    import sympy as sp

    return [Case((list(sp.symbols(f"x1:{n + 1}", real=True)),), f"n = {n} symbols") for n in (2, 3)]


def _sym_reference(xs):
    import sympy as sp

    return [sp.exp(x) / sum(sp.exp(y) for y in xs) for x in xs]


def _sym_values(exprs, xs, point):
    """The expressions at ``xs = point``, as floats (``None`` if they are not n sympy expressions)."""
    import sympy as sp

    if not isinstance(exprs, (list, tuple)) or len(exprs) != len(xs):
        return None
    try:
        return np.array([float(sp.sympify(e).subs(dict(zip(xs, point)))) for e in exprs])
    except (TypeError, ValueError, sp.SympifyError):
        return None


def _sym_points(exprs, case):
    """The expressions at two seeded points, as one float array (``None`` if they are not expressions)."""
    xs = case.args[0]
    values = [_sym_values(exprs, xs, np.random.default_rng(seed).normal(size=len(xs)).round(3)) for seed in (0, 1)]
    return None if any(v is None for v in values) else np.concatenate(values)


def _sym_compare(expected, got, case, proof=True):
    """``None`` if ``got`` is the softmax of the symbols and sympy proves it shift invariant."""
    import sympy as sp

    xs = case.args[0]
    for seed in (0, 1):
        point = np.random.default_rng(seed).normal(size=len(xs)).round(3)
        values = _sym_values(got, xs, point)
        if values is None:
            return None, f"return a list of {len(xs)} sympy expressions, one per symbol."
        if not np.allclose(values, softmax(point), rtol=1e-9, atol=1e-12):
            return None, f"at x = {point.tolist()} your expressions give {values.round(4).tolist()}, the " \
                         f"softmax {softmax(point).round(4).tolist()}."
    if proof:
        c = sp.Symbol("c", real=True)
        for e in got:
            shifted = sp.sympify(e).subs({x: x + c for x in xs}, simultaneous=True)
            if sp.simplify(shifted - e) != 0:
                return "not_simplified", ("the values are right but sympy cannot simplify softmax(x + c) - "
                                          "softmax(x) to 0 for your form: write it with `sp.exp` and a plain sum.")
    return None


SYM_MISTAKES = (
    Mistake("numpy_exp", "`np.exp` does not work on sympy symbols: use `sp.exp`.",
            lambda xs: [np.exp(x) for x in xs]),
    Mistake("no_normalisation", "the numerators are not divided by their sum: the softmax of x_i is "
            "exp(x_i) / sum_j exp(x_j).", lambda xs: [__import__("sympy").exp(x) for x in xs]),
    Mistake("no_exp", "this divides x_i by the sum of the x_j: the softmax exponentiates first.",
            lambda xs: [x / sum(xs) for x in xs]),
    Mistake("sum_without_exp", "the denominator sums the x_j instead of exp(x_j).",
            lambda xs: [__import__("sympy").exp(x) / sum(xs) for x in xs]),
)


# ---- Chapter 2 --------------------------------------------------------------------------

PERMS = ([0, 1, 2], [1, 0, 2], [1, 2, 0], [1, 2, 3, 0], [3, 0, 4, 1, 2], [2, 4, 1, 0, 3, 6, 5])


def _perm_cases():
    return [Case((np.array(p),), f"perm = {p}") for p in PERMS]


def _perm_matrix_reference(perm):
    return np.eye(len(perm))[np.asarray(perm)]


PERM_MATRIX_MISTAKES = (
    Mistake("transposed", "this is the transpose (the inverse permutation): row i of P must be the unit "
            "vector e_perm[i], so that `P @ x == x[perm]`.", lambda p: np.eye(len(p))[:, p]),
    Mistake("one_based", "perm counts from 0 here (numpy's indices), not from 1.",
            lambda p: np.eye(len(p))[np.asarray(p) - 1]),
    Mistake("one_based", "perm counts from 0 here (numpy's indices), not from 1.",
            lambda p: (np.asarray(p)[:, None] - 1 == np.arange(len(p))).astype(float)),
    Mistake("identity", "this is the identity: the entries must follow perm.", lambda p: np.eye(len(p))),
)


def _inverse_reference(perm):
    return np.argsort(perm)


INVERSE_MISTAKES = (
    Mistake("returns_perm", "this returns perm itself, which is its own inverse only when it swaps pairs; "
            "the inverse satisfies inv[perm[i]] = i.", lambda p: np.array(p)),
    Mistake("squared", "this is perm applied twice (`perm[perm]`), the inverse only for a cycle of 3.",
            lambda p: np.asarray(p)[np.asarray(p)]),
    Mistake("reversed", "this reverses the list; the inverse satisfies inv[perm[i]] = i.",
            lambda p: np.asarray(p)[::-1].copy()),
    Mistake("one_based", "the positions count from 1; numpy's count from 0.",
            lambda p: np.argsort(p) + 1),
)


def _permute_cases():
    return [
        Case((np.arange(6.0).reshape(3, 2), np.array([2, 0, 1])), "3 tokens of width 2"),
        Case((_rn(0, 4, 5), np.array([1, 3, 0, 2])), "4 tokens of width 5; seed 0"),
        Case((_rn(1, 2, 3, 3), np.array([2, 0, 1])), "a batch of 2 sequences of 3 tokens; seed 1"),
    ]


PERMUTE_MISTAKES = (
    Mistake("permutes_features", "this permutes the features (the last axis); tokens are rows, axis -2.",
            lambda x, p: x[..., p]),
    Mistake("inverse", "this applies the inverse permutation: row i of the result is row perm[i] of x "
            "(`x[..., perm, :]`).", lambda x, p: x[..., np.argsort(p), :]),
    Mistake("permutes_batch", "this permutes the first axis, which is the batch when x has 3 axes: index the "
            "token axis, -2 (`x[..., perm, :]`).", lambda x, p: x[p]),
)


def _mask_cases():
    rng = np.random.default_rng(0)
    return [
        Case((causal_mask(3), np.array([1, 2, 0])), "a causal mask, a cycle of 3"),
        Case((rng.random((4, 4)) < 0.5, np.array([2, 0, 3, 1])), "a random 4 x 4 mask; seed 0"),
        Case((causal_mask(5), np.array([4, 2, 0, 1, 3])), "a causal mask of 5"),
    ]


MASK_MISTAKES = (
    Mistake("rows_only", "only the rows (queries) are permuted; the keys move too: `mask[perm][:, perm]`.",
            lambda m, p: m[p]),
    Mistake("columns_only", "only the columns (keys) are permuted; the queries move too.",
            lambda m, p: m[:, p]),
    Mistake("inverse", "this is P^T M P (the inverse permutation); the mask of the permuted tokens is "
            "P M P^T = `mask[perm][:, perm]`.", lambda m, p: m[np.argsort(p)][:, np.argsort(p)],
            claim="attention-symmetry-breakers"),
)


def tokenwise(x):
    """tanh(x @ w): the same map applied to every token"""
    return np.tanh(x @ _rn(50, x.shape[-1], 3))


def self_attention_map(x):
    """softmax(x x^T / sqrt(d)) x: attention without positions"""
    return attention(x, x, x)


def prefix_mean(x):
    """the mean of the tokens up to each position: it depends on the order"""
    return np.cumsum(x, axis=-2) / np.arange(1, x.shape[-2] + 1)[:, None]


def add_positions(x):
    """x plus a code of each position (0.1 * position in every feature)"""
    return x + 0.1 * np.arange(x.shape[-2])[:, None]


def _gap_cases():
    perm = np.array([2, 0, 3, 1])
    return [Case((f, _rn(seed, 4, 3), perm), f"seed {seed}, perm = {perm.tolist()}")
            for seed, f in enumerate((tokenwise, prefix_mean, self_attention_map, add_positions))]


def _gap(f, x, perm, *, compare="equivariance", reduce=np.max):
    """The largest |f(x[perm]) - f(x)[perm]|, or a wrong variant of it."""
    inv = np.argsort(perm)
    other = {"equivariance": f(x)[perm], "invariance": f(x), "inverse": f(x)[inv]}[compare]
    return float(reduce(np.abs(f(x[perm]) - other)))


GAP_MISTAKES = (
    Mistake("invariance", "this compares f(Px) with f(x), which tests invariance: an equivariant map moves "
            "its output rows with its input, so compare f(x[perm]) with f(x)[perm].",
            lambda f, x, p: _gap(f, x, p, compare="invariance"), claim="self-attention-not-invariant"),
    Mistake("inverse", "the output is permuted by the inverse permutation; permute it by perm, as the input.",
            lambda f, x, p: _gap(f, x, p, compare="inverse")),
    Mistake("mean_not_max", "this is the mean absolute difference; the gap is the largest one.",
            lambda f, x, p: _gap(f, x, p, reduce=np.mean)),
    Mistake("permutes_features", "this permutes the features (`x[..., perm]`); tokens are rows: `x[perm]`.",
            lambda f, x, p: float(np.max(np.abs(f(x[..., p]) - f(x)[..., p])))),
)


def _self_attention_cases():
    return [
        Case((_rn(0, 3, 6), _rn(1, 6, 2), _rn(2, 6, 2), _rn(3, 6, 4)), "n = 3, d = 6, d_k = 2, d_v = 4; seeds 0-3"),
        Case((_rn(4, 2, 5, 4), _rn(5, 4, 3), _rn(6, 4, 3), _rn(7, 4, 4)), "a batch of 2; seeds 4-7"),
    ]


def _self_attention_reference(x, w_q, w_k, w_v):
    return attention(x @ w_q, x @ w_k, x @ w_v)


SELF_ATTENTION_MISTAKES = (
    Mistake("no_scale", "the scores are not divided by sqrt(d_k).",
            lambda x, wq, wk, wv: _attn(x @ wq, x @ wk, x @ wv, scale=1.0)),
    Mistake("scale_uses_d", "the scale uses the model width d = x.shape[-1]; it is 1/sqrt(d_k) with "
            "d_k = w_q.shape[-1].", lambda x, wq, wk, wv: _attn(x @ wq, x @ wk, x @ wv, scale=x.shape[-1] ** -0.5),
            claim="notes-multi-head-undefined"),
    Mistake("values_are_x", "the values are x itself; they are x @ w_v.",
            lambda x, wq, wk, wv: _attn(x @ wq, x @ wk, x)),
    Mistake("softmax_over_queries", "the softmax runs over the queries (axis -2); it runs over the keys.",
            lambda x, wq, wk, wv: _attn(x @ wq, x @ wk, x @ wv, axis=-2)),
)


# ---- Chapter 3 --------------------------------------------------------------------------

def _sinusoid(n, d, *, layout="interleaved", start=0, per="pair", norm=1, swap=False):
    """The sinusoidal code, or a wrong variant of it."""
    pos = (np.arange(n) + start)[:, None] / norm
    omega = 10000.0 ** (-(2 if per == "pair" else 1) * np.arange(d // 2) / d)
    s, c = np.sin(pos * omega), np.cos(pos * omega)
    s, c = (c, s) if swap else (s, c)
    if layout == "concatenated":
        return np.concatenate([s, c], axis=-1)
    return np.stack([s, c], axis=-1).reshape(n, d)


def _sinusoid_cases():
    return [Case((n, d), f"n = {n}, d = {d}") for n, d in ((1, 4), (4, 4), (6, 8), (3, 2))]


SINUSOID_MISTAKES = (
    Mistake("sin_cos_swapped", "sine and cosine are swapped: even columns hold sin, odd columns cos (position "
            "0 is (0, 1, 0, 1, ...)).", lambda n, d: _sinusoid(n, d, swap=True)),
    Mistake("concatenated_layout", "this is the concatenated layout [sin | cos]; here the columns interleave: "
            "column 2i is sin(p w_i), column 2i + 1 is cos(p w_i).",
            lambda n, d: _sinusoid(n, d, layout="concatenated")),
    Mistake("length_dependent", "the positions are divided by n, so the code of a position changes when the "
            "sequence grows; use the position p itself.", lambda n, d: _sinusoid(n, d, norm=n),
            claim="sinusoid-code-length-independent"),
    Mistake("positions_from_one", "positions start at 0, not 1.", lambda n, d: _sinusoid(n, d, start=1)),
    Mistake("frequency_exponent", "the frequency of pair i is 10000^(-2i/d); this uses 10000^(-i/d).",
            lambda n, d: _sinusoid(n, d, per="column")),
)


def _bias_cases():
    return [Case((np.arange(5.0), 3), "table = [0, 1, 2, 3, 4] for offsets -2..2, n = 3"),
            Case((_rn(0, 7), 4), "a random table, n = 4; seed 0")]


def _bias(table, n, index):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return np.asarray(table)[index(i, j, n)]


BIAS_MISTAKES = (
    Mistake("i_minus_j", "the table is indexed by i - j; the offset is key minus query, j - i.",
            lambda t, n: _bias(t, n, lambda i, j, n: i - j + n - 1), claim="relative-bias-translation-invariant"),
    Mistake("missing_offset", "the index j - i is not shifted by n - 1, so negative offsets wrap around to the "
            "end of the table: use `table[j - i + n - 1]`.", lambda t, n: _bias(t, n, lambda i, j, n: j - i)),
    Mistake("absolute", "this indexes the table by the key's position j alone; the bias depends on j - i.",
            lambda t, n: _bias(t, n, lambda i, j, n: j + 0 * i), claim="relative-bias-translation-invariant"),
)


def _alibi_cases():
    return [Case((h,), f"h = {h}") for h in (1, 2, 4, 8, 6, 12)]


def _alibi(h, *, start=1, extras="appended"):
    """ALiBi slopes, or a wrong variant: powers of two, then every other slope of 2c appended."""
    c = 2 ** int(np.floor(np.log2(h)))
    base = 2.0 ** (-8.0 * (np.arange(c) + start) / c)
    if extras == "none" or c == h:
        return 2.0 ** (-8.0 * (np.arange(h) + start) / h)
    more = 2.0 ** (-8.0 * (np.arange(2 * c) + start) / (2 * c))
    extra = more[1::2][: h - c] if extras == "odd" else more[0::2][: h - c]
    both = np.concatenate([base, extra])
    return -np.sort(-both) if extras == "interleaved" else both


ALIBI_MISTAKES = (
    Mistake("t_from_zero", "the exponents start at t = 0, so the first slope is 1; the slopes are "
            "2^(-8(t+1)/h) for t = 0..h-1.", lambda h: _alibi(h, start=0), claim="alibi-slopes"),
    Mistake("power_formula_for_all", "for a head count that is not a power of two the slopes are those of the "
            "largest power of two c below h, followed by every other slope of 2c.",
            lambda h: _alibi(h, extras="none")),
    Mistake("extras_interleaved", "the extra slopes are sorted in among the others; they are appended after "
            "the c slopes.", lambda h: _alibi(h, extras="interleaved"), claim="alibi-slopes"),
    Mistake("extras_from_odd", "the extra slopes are taken at the odd indices of the 2c slopes; take indices "
            "0, 2, 4, ...", lambda h: _alibi(h, extras="odd"), claim="alibi-slopes"),
)


def _rope(x, *, sign=1.0, start=0, per="pair", layout="interleaved"):
    """RoPE over the rows of ``x``, or a wrong variant of it."""
    n, d = x.shape[-2:]
    omega = 10000.0 ** (-(2 if per == "pair" else 1) * np.arange(d // 2) / d)
    angle = sign * (np.arange(n) + start)[:, None] * omega  # (n, d/2)
    if layout == "half":
        a, b = x[..., : d // 2], x[..., d // 2:]
    else:
        a, b = x[..., 0::2], x[..., 1::2]
    ra, rb = a * np.cos(angle) - b * np.sin(angle), a * np.sin(angle) + b * np.cos(angle)
    if layout == "half":
        return np.concatenate([ra, rb], axis=-1).astype(x.dtype)
    return np.stack([ra, rb], axis=-1).reshape(x.shape).astype(x.dtype)


def _rope_cases():
    x = np.zeros((4, 4))
    x[:, 0] = 1.0
    return [Case((x,), "x = e_0 at 4 positions, d = 4"), Case((_rn(0, 5, 6),), "5 tokens of width 6; seed 0"),
            Case((_rn(1, 2, 3, 8, dtype=np.float32),), "a batch, float32; seed 1")]


ROPE_MISTAKES = (
    Mistake("wrong_direction", "the rotation goes the other way: (x_2i, x_2i+1) -> (x_2i cos - x_2i+1 sin, "
            "x_2i sin + x_2i+1 cos) with angle p w_i.", lambda x: _rope(x, sign=-1.0)),
    Mistake("half_layout", "this pairs feature i with feature i + d/2 (the \"half\" convention of GPT-NeoX); "
            "here pairs are neighbours (2i, 2i+1).", lambda x: _rope(x, layout="half")),
    Mistake("positions_from_one", "positions start at 0: the first token is not rotated.",
            lambda x: _rope(x, start=1)),
    Mistake("frequency_exponent", "the frequency of pair i is 10000^(-2i/d); this uses 10000^(-i/d).",
            lambda x: _rope(x, per="column")),
)


def _weights_reference(normalize):
    """attncore's normaliser of a score matrix: the scores as queries against unit keys."""
    def reference(scores):
        s = as_float(scores)
        return attention_weights(s, np.eye(s.shape[-1], dtype=s.dtype), scale=1.0, normalize=normalize)
    return reference


def _l2_cases():
    return [Case((_rn(0, 3, 4),), "random scores; seed 0"), Case((np.zeros((2, 3)),), "equal scores"),
            Case((np.array([[1000.0, 0.0, 999.0]]),), "large scores"),
            Case((_rn(1, 2, 5, dtype=np.float32),), "float32; seed 1")]


def _norm_rows(e, kind):
    if kind == "l1":
        return e / e.sum(axis=-1, keepdims=True)
    if kind == "squares":
        return e / (e * e).sum(axis=-1, keepdims=True)
    return e / np.sqrt((e * e).sum(axis=-1, keepdims=True))


L2_MISTAKES = (
    Mistake("l1_normalised", "the rows are divided by their sum (this is the softmax): divide by the "
            "Euclidean norm sqrt(sum e^2), so that equal scores give rows summing to sqrt(m).",
            lambda s: _norm_rows(_exp_rows(s), "l1"), claim="rp-l2-uniform-row-sum"),
    Mistake("no_sqrt", "the rows are divided by their sum of squares; take its square root.",
            lambda s: _norm_rows(_exp_rows(s), "squares"), claim="rp-l2-uniform-row-sum"),
    Mistake("no_exp", "the scores are normalised without exponentiating them first.",
            lambda s: _norm_rows(s, "l2")),
    Mistake("no_max_shift", "exp overflows at scores near 1000: subtract the row maximum first (it cancels "
            "in the ratio).", lambda s: _norm_rows(_exp_rows(s, shift=False), "l2")),
)


def _relu2_cases():
    return [Case((np.array([[1.0, -1.0, 2.0]]),), "one query, 3 keys"),
            Case((_rn(0, 2, 5),), "2 queries, 5 keys; seed 0"), Case((_rn(1, 4, 3),), "4 queries, 3 keys; seed 1")]


RELU2_MISTAKES = (
    Mistake("row_sum_normalised", "the rows are divided by their own sum, so every row sums to 1 and the layer "
            "is again blind to position; divide by the number of keys m.",
            lambda s: (lambda r: r / r.sum(axis=-1, keepdims=True))(np.maximum(s, 0) ** 2),
            claim="rp-gau-relu2-breaks-row-sums"),
    Mistake("no_relu", "negative scores must give 0: square relu(s) = max(s, 0), not s.",
            lambda s: s ** 2 / s.shape[-1], claim="rp-gau-relu2-breaks-row-sums"),
    Mistake("no_square", "relu(s) is not squared.", lambda s: np.maximum(s, 0) / s.shape[-1]),
    Mistake("divides_by_queries", "this divides by the number of queries (rows); divide by the number of "
            "keys m (columns).", lambda s: np.maximum(s, 0) ** 2 / s.shape[-2]),
)


# ---- Chapter 4 --------------------------------------------------------------------------

def _feature_cases():
    return [Case((_rn(0, 2, 3, scale=0.5), _rn(1, 4, 3)), "2 rows of width 3, 4 features; seeds 0, 1"),
            Case((_rn(2, 2, 3, 2, scale=0.5), _rn(3, 5, 2)), "a batch, 5 features; seeds 2, 3")]


def _prf(x, omega, *, half=0.5, root=True):
    """Positive random features, or a wrong variant of them."""
    m = omega.shape[0]
    return np.exp(x @ omega.T - half * np.sum(x * x, axis=-1, keepdims=True)) / (np.sqrt(m) if root else m)


PRF_MISTAKES = (
    Mistake("no_norm_term", "the -|x|^2/2 term is missing, so phi(q) . phi(k) estimates exp(q.k + |q|^2/2 + "
            "|k|^2/2), not exp(q.k).", lambda x, w: _prf(x, w, half=0.0), claim="la-performer-unbiased"),
    Mistake("full_norm_term", "the norm term is |x|^2; it is |x|^2 / 2.", lambda x, w: _prf(x, w, half=1.0)),
    Mistake("no_sqrt_m", "the features are not divided by sqrt(m) (m = omega.shape[0]), so the estimate is m "
            "times too large.", lambda x, w: _prf(x, w) * np.sqrt(w.shape[0]), claim="la-performer-unbiased"),
    Mistake("divides_by_m", "this divides by m; divide by sqrt(m), so that the product of two features "
            "averages over the m samples.", lambda x, w: _prf(x, w, root=False), claim="la-performer-unbiased"),
    Mistake("omega_not_transposed", "the projections are rows of omega: use `x @ omega.T`.",
            lambda x, w: np.exp(x @ w) / np.sqrt(w.shape[0])),
)


def _trig(x, omega, *, sign=1.0, layout="concatenated", root=True):
    a = x @ omega.T
    r = np.exp(sign * 0.5 * np.sum(x * x, axis=-1, keepdims=True)) / (np.sqrt(omega.shape[0]) if root else 1)
    if layout == "interleaved":
        return np.stack([np.cos(a), np.sin(a)], axis=-1).reshape(*a.shape[:-1], -1) * r
    return np.concatenate([np.cos(a), np.sin(a)], axis=-1) * r


TRIG_MISTAKES = (
    Mistake("negative_exponent", "the factor is exp(+|x|^2/2): the cosines estimate the Gaussian kernel "
            "exp(-|q-k|^2/2), and exp(q.k) is that times exp(|q|^2/2) exp(|k|^2/2).",
            lambda x, w: _trig(x, w, sign=-1.0)),
    Mistake("no_norm_factor", "the factor exp(|x|^2/2) is missing: without it the features estimate the "
            "Gaussian kernel, not exp(q.k).", lambda x, w: _trig(x, w, sign=0.0)),
    Mistake("interleaved", "the cosines and sines are interleaved; concatenate them: [cos(x w^T), sin(x w^T)].",
            lambda x, w: _trig(x, w, layout="interleaved")),
    Mistake("no_sqrt_m", "the features are not divided by sqrt(m).", lambda x, w: _trig(x, w, root=False)),
)


def _phi_cases():
    return [Case((np.abs(_rn(0, 3, 2)) + 0.1, np.abs(_rn(1, 3, 2)) + 0.1, _rn(2, 3, 2)),
                 "3 tokens, 2 positive features, values of width 2; seeds 0-2"),
            Case((np.abs(_rn(3, 4, 3)) + 0.1, np.abs(_rn(4, 4, 3)) + 0.1, _rn(5, 4, 1)), "4 tokens; seeds 3-5"),
            Case((np.abs(_rn(6, 2, 5, 3)) + 0.1, np.abs(_rn(7, 2, 5, 3)) + 0.1, _rn(8, 2, 5, 2)), "a batch; seeds 6-8")]


def _lin(fq, fk, v, *, causal=False, norm="rows", strict=False):
    """Linear attention as an explicit n x n matrix, or a wrong variant of it."""
    a = fq @ np.swapaxes(fk, -1, -2)  # (..., n, n)
    if causal:
        a = a * np.tri(a.shape[-1], k=-1 if strict else 0)
    if norm == "softmax":
        return softmax(a) @ v
    total = {"rows": a.sum(-1, keepdims=True), "columns": a.sum(-2, keepdims=True), "none": 1.0,
             "all_keys": (fq @ np.swapaxes(fk, -1, -2)).sum(-1, keepdims=True)}[norm]
    return a / total @ v


def _identity(z):
    return z


LINEAR_MISTAKES = (
    Mistake("no_normaliser", "the numerator phi(Q) (phi(K)^T V) is not divided by phi(Q) (phi(K)^T 1).",
            lambda q, k, v: _lin(q, k, v, norm="none"), claim="la-linear-attention-form"),
    Mistake("normalised_over_queries", "the weights are normalised over the queries (columns); each query's "
            "row is divided by its own sum.", lambda q, k, v: _lin(q, k, v, norm="columns"),
            claim="la-softmax-sum-index"),
    Mistake("softmax_of_scores", "a softmax of phi(q) . phi(k): linear attention uses the feature products "
            "themselves as weights, divided by their row sum.", lambda q, k, v: _lin(q, k, v, norm="softmax")),
)

CAUSAL_LINEAR_MISTAKES = (
    Mistake("includes_future", "the sums include keys after the query: use prefix sums (`np.cumsum` over the "
            "tokens), so that query i sees keys 0..i.", lambda q, k, v: _lin(q, k, v),
            claim="la-linear-attention-form"),
    Mistake("excludes_self", "the prefix sums stop before the query's own key; query i sees keys 0..i.",
            lambda q, k, v: _lin(q, k, v, causal=True, strict=True)),
    Mistake("normaliser_not_causal", "the numerator is causal but the normaliser sums every key; both use the "
            "prefix sums.", lambda q, k, v: _lin(q, k, v, causal=True, norm="all_keys"),
            claim="la-linear-attention-form"),
    Mistake("no_normaliser", "the causal numerator is not divided by the causal normaliser.",
            lambda q, k, v: _lin(q, k, v, causal=True, norm="none")),
)


def _weights_variant(norm):
    """The matrix of a wrong linear attention: its output for the identity as values."""
    return lambda q, k: _lin(q, k, np.eye(k.shape[-2]), norm=norm)


WEIGHTS_MISTAKES = tuple(
    Mistake(m.id, m.why.replace("phi(Q) (phi(K)^T V)", "matrix phi(Q) phi(K)^T").replace(
        "phi(Q) (phi(K)^T 1)", "its row sums"), _weights_variant(norm), m.claim)
    for m, norm in zip(LINEAR_MISTAKES, ("none", "columns", "softmax")))


def _elu_cases():
    return [Case((np.array([-2.0, -0.5, 0.0, 0.5, 2.0]),), "a few values around 0"),
            Case((_rn(0, 3, 4),), "random; seed 0"), Case((_rn(1, 2, 3, dtype=np.float32),), "float32; seed 1")]


ELU_MISTAKES = (
    Mistake("relu_plus_one", "for x < 0 this gives 1; elu(x) + 1 is exp(x) there (positive, and smooth at 0).",
            lambda x: np.maximum(x, 0) + 1),
    Mistake("no_plus_one", "elu(x) without + 1 is negative for x < 0; the feature map must be positive.",
            lambda x: np.where(x > 0, x, np.exp(x) - 1)),
    Mistake("exp_everywhere", "exp(x) for every x; for x > 0 elu(x) + 1 is x + 1.", lambda x: np.exp(x)),
    Mistake("branches_swapped", "the two branches are swapped: x + 1 for x > 0, exp(x) for x <= 0.",
            lambda x: np.where(x > 0, np.exp(x), x + 1)),
)


def _elu_reference(x):
    x = as_float(x)
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0))).astype(x.dtype)


# ---- Chapter 5 --------------------------------------------------------------------------

def _dense_cases():
    return [Case((_rn(0, 3, 4), _rn(1, 4, 5), _rn(2, 5), _rn(3, 5, 3), _rn(4, 3)),
                 "n = 3, d = 4, hidden width 5; seeds 0-4"),
            Case((_rn(5, 2, 4, 2), _rn(6, 2, 3), _rn(7, 3), _rn(8, 3, 4), _rn(9, 4)), "a batch of 2; seeds 5-9")]


def _dense(x, w1, b1, w2, b2, *, inner=True, outer=False, use_b1=True, use_b2=True):
    h = x @ w1 + (b1 if use_b1 else 0)
    h = np.maximum(h, 0) if inner else h
    out = h @ w2 + (b2 if use_b2 else 0)
    return np.maximum(out, 0) if outer else out


DENSE_MISTAKES = (
    Mistake("no_relu", "the hidden layer has no ReLU: relu(x w1 + b1) w2 + b2.",
            lambda *a: _dense(*a, inner=False)),
    Mistake("relu_on_output", "the ReLU is applied to the scores; it belongs to the hidden layer only.",
            lambda *a: _dense(*a, inner=False, outer=True)),
    Mistake("b1_missing", "the bias b1 of the hidden layer is missing.", lambda *a: _dense(*a, use_b1=False)),
    Mistake("b2_missing", "the bias b2 of the scores is missing.", lambda *a: _dense(*a, use_b2=False)),
)


def _factor_cases():
    return [Case((_rn(0, 4, 2), _rn(1, 4, 2)), "n = 4, rank 2; seeds 0, 1"),
            Case((_rn(2, 5, 3), _rn(3, 5, 3)), "n = 5, rank 3; seeds 2, 3")]


FACTOR_MISTAKES = (
    Mistake("transposed", "this is R2 R1^T, the transpose: B = R1 R2^T, so row i comes from R1.",
            lambda r1, r2: r2 @ r1.T),
    Mistake("wrong_contraction", "this contracts over the tokens (R1^T R2, shape (r, r)); contract over the "
            "rank: R1 @ R2.T, shape (n, n).", lambda r1, r2: r1.T @ r2),
    Mistake("elementwise", "this multiplies entry by entry; B is the matrix product R1 @ R2.T.",
            lambda r1, r2: r1 * r2),
)


def _mixture_weight_cases():
    return [Case((np.array([0.0, 0.0]),), "equal logits"), Case((np.array([1.0, -2.0, 0.5]),), "three logits"),
            Case((np.array([800.0, 0.0, -1.0]),), "a large logit")]


MIXTURE_WEIGHT_MISTAKES = (
    Mistake("raw_logits", "the logits are used as weights; the weights are softmax(logits), positive and "
            "summing to 1.", lambda z: z, claim="synth-mixture-weights"),
    Mistake("divided_by_sum", "the logits are divided by their sum (not positive, and undefined when the sum is "
            "0); exponentiate first.", lambda z: z / z.sum(), claim="synth-mixture-weights"),
    Mistake("sigmoid", "a sigmoid per logit does not sum to 1; use the softmax.",
            lambda z: 1 / (1 + np.exp(-z))),
    Mistake("no_max_shift", "exp overflows at a logit of 800: subtract the maximum first.",
            lambda z: np.exp(z) / np.exp(z).sum()),
)


def _mixture_cases():
    a, b = _rn(0, 3, 3), _rn(1, 3, 3)
    return [Case(([a, b], np.array([0.0, 0.0])), "two score matrices, equal logits; seeds 0, 1"),
            Case(([a, b, _rn(2, 3, 3)], np.array([1.0, -1.0, 0.5])), "three score matrices; seeds 0-2")]


def _mix(scores, logits, *, weights="softmax", maps=False):
    w = {"softmax": softmax(logits), "raw": logits, "mean": np.full(len(scores), 1 / len(scores))}[weights]
    parts = [softmax(s) if maps else s for s in scores]
    return sum(wi * si for wi, si in zip(w, parts))


MIXTURE_MISTAKES = (
    Mistake("mixes_maps", "this mixes the attention maps softmax(B_i); the mixture is of the scores, before "
            "the softmax.", lambda s, z: _mix(s, z, maps=True), claim="synth-random-vanilla-is-position-bias"),
    Mistake("raw_logits", "the logits are used as weights; use softmax(logits).",
            lambda s, z: _mix(s, z, weights="raw"), claim="synth-mixture-weights"),
    Mistake("plain_mean", "this averages the scores with equal weights; weight them by softmax(logits).",
            lambda s, z: _mix(s, z, weights="mean")),
)


def _synth_cases():
    return [Case((_rn(0, 3, 4), _rn(1, 3, 3), _rn(2, 4, 2)), "n = 3, d = 4, d_v = 2; seeds 0-2"),
            Case((_rn(3, 2, 4, 3), _rn(4, 2, 4, 4), _rn(5, 3, 3)), "a batch of 2; seeds 3-5")]


def _synth(x, scores, w_v, *, axis=-1, values=True, scale=1.0):
    return softmax(scores * scale, axis=axis) @ (x @ w_v if values else x)


SYNTH_MISTAKES = (
    Mistake("softmax_over_queries", "the softmax runs over the queries (axis -2); each query's weights over "
            "the keys sum to 1.", lambda x, s, w: _synth(x, s, w, axis=-2), claim="synth-attention-is-mixing"),
    Mistake("values_not_projected", "the values are x itself; they are x @ w_v.",
            lambda x, s, w: _synth(x, s, w, values=False), claim="synth-attention-is-mixing"),
    Mistake("no_softmax", "the scores are used as weights without the softmax.",
            lambda x, s, w: s @ (x @ w)),
    Mistake("scaled_scores", "the scores are divided by sqrt(d); synthesized scores are used as they are.",
            lambda x, s, w: _synth(x, s, w, scale=x.shape[-1] ** -0.5)),
)


# ---- the table: id -> Spec, in the order of the notebooks ------------------------------

def _chapter_1():
    return {
        "softmax": Spec("A stable softmax", ("x", "axis"), lambda x, axis=-1: softmax(as_float(x), axis=axis),
                        _softmax_cases, SOFTMAX_MISTAKES),
        "causal_mask": Spec("A causal mask", ("n",), causal_mask, _causal_cases, CAUSAL_MISTAKES, kind="mask"),
        "attention": Spec("Scaled dot-product attention with a mask", ("q", "k", "v", "mask"),
                          _reference_attention, _attention_cases, ATTENTION_MISTAKES),
        "split_heads": Spec("Split the features into heads", ("x", "h"), split_heads, _split_cases, SPLIT_MISTAKES),
        "merge_heads": Spec("Merge the heads back", ("x",), merge_heads, _merge_cases, MERGE_MISTAKES),
        "layer_norm": Spec("LayerNorm", ("x", "gamma", "beta"), _layer_norm_reference, _layer_norm_cases,
                           LAYER_NORM_MISTAKES),
        "softmax_shift_proof": Spec("Softmax shift invariance, proved with sympy", ("xs",), _sym_reference,
                                    _sym_cases, SYM_MISTAKES, kind="sympy", compare_hook=_sym_compare,
                                    values_hook=_sym_points),
    }


def _chapter_2():
    from attncore._permutations import inverse_permutation, permutation_matrix, permute_tokens

    return {
        "permutation_matrix": Spec("A permutation matrix", ("perm",), permutation_matrix, _perm_cases,
                                   PERM_MATRIX_MISTAKES),
        "inverse_permutation": Spec("The inverse permutation", ("perm",), inverse_permutation, _perm_cases,
                                    INVERSE_MISTAKES, kind="index"),
        "permute_tokens": Spec("Permute the tokens", ("x", "perm"), permute_tokens, _permute_cases, PERMUTE_MISTAKES),
        "permute_mask": Spec("Permute a mask with its tokens", ("mask", "perm"),
                             lambda m, p: (lambda pm: (pm @ m @ pm.T) > 0.5)(permutation_matrix(p)),
                             _mask_cases, MASK_MISTAKES, kind="mask"),
        "equivariance_gap": Spec("Measure permutation equivariance", ("f", "x", "perm"), _gap, _gap_cases,
                                 GAP_MISTAKES, kind="scalar"),
        "self_attention": Spec("Self-attention from weights", ("x", "w_q", "w_k", "w_v"),
                               _self_attention_reference, _self_attention_cases, SELF_ATTENTION_MISTAKES),
    }


def _chapter_3():
    from attncore._positional import alibi_slopes, relative_bias, rope, sinusoidal_encoding

    return {
        "sinusoidal_encoding": Spec("The sinusoidal position code", ("n", "d"), sinusoidal_encoding,
                                    _sinusoid_cases, SINUSOID_MISTAKES),
        "relative_bias": Spec("A relative position bias", ("table", "n"), lambda t, n: relative_bias(n, n, t),
                              _bias_cases, BIAS_MISTAKES),
        "alibi_slopes": Spec("ALiBi slopes", ("h",), alibi_slopes, _alibi_cases, ALIBI_MISTAKES),
        "rope": Spec("Rotary position embedding (RoPE)", ("x",), rope, _rope_cases, ROPE_MISTAKES),
        "l2_weights": Spec("The l2 normaliser, a remedy that passes the probe", ("scores",),
                           _weights_reference("l2"), _l2_cases, L2_MISTAKES),
        "relu2_weights": Spec("The relu^2 normaliser, another remedy", ("scores",), _weights_reference("relu2"),
                              _relu2_cases, RELU2_MISTAKES),
    }


def _chapter_4():
    from attncore._kernels import (
        linear_attention,
        linear_attention_weights,
        positive_random_features,
        trig_random_features,
    )

    return {
        "positive_random_features": Spec("Positive random features", ("x", "omega"), positive_random_features,
                                         _feature_cases, PRF_MISTAKES),
        "trig_random_features": Spec("Trigonometric random features", ("x", "omega"), trig_random_features,
                                     _feature_cases, TRIG_MISTAKES),
        "elu_feature_map": Spec("The elu + 1 feature map", ("x",), _elu_reference, _elu_cases, ELU_MISTAKES),
        "linear_attention_weights": Spec("The matrix of linear attention", ("phi_q", "phi_k"),
                                         lambda q, k: linear_attention_weights(q, k, _identity),
                                         lambda: [Case(c.args[:2], c.note) for c in _phi_cases()], WEIGHTS_MISTAKES),
        "linear_attention": Spec("Linear attention", ("phi_q", "phi_k", "v"),
                                 lambda q, k, v: linear_attention(q, k, v, _identity), _phi_cases, LINEAR_MISTAKES),
        "causal_linear_attention": Spec("Causal linear attention by prefix sums", ("phi_q", "phi_k", "v"),
                                        lambda q, k, v: linear_attention(q, k, v, _identity, causal=True),
                                        _phi_cases, CAUSAL_LINEAR_MISTAKES),
    }


def _chapter_5():
    from attncore._synthesizer import dense_scores, factorized_random_scores, mixture_scores, mixture_weights

    return {
        "dense_scores": Spec("Dense Synthesizer scores", ("x", "w1", "b1", "w2", "b2"),
                             lambda x, w1, b1, w2, b2: dense_scores(x, w1, w2, b1=b1, b2=b2), _dense_cases,
                             DENSE_MISTAKES),
        "factorized_random_scores": Spec("Factorized Random Synthesizer scores", ("r1", "r2"),
                                         lambda r1, r2: factorized_random_scores(r1, r2, r1.shape[0]),
                                         _factor_cases, FACTOR_MISTAKES),
        "mixture_weights": Spec("Mixture weights", ("logits",), mixture_weights, _mixture_weight_cases,
                                MIXTURE_WEIGHT_MISTAKES),
        "mixture_scores": Spec("A mixture of synthesizers", ("scores", "logits"), mixture_scores, _mixture_cases,
                               MIXTURE_MISTAKES),
        "synthesizer_attention": Spec("Attention with synthesized scores", ("x", "scores", "w_v"),
                                      lambda x, s, w: synthesizer_attention(x, s, w), _synth_cases, SYNTH_MISTAKES),
    }


def _chapter_6():
    from attncore._exercises_backprop import chapter_6

    return chapter_6()


#: Every exercise, by id, with the chapter it belongs to in :data:`CHAPTERS` (6: the backprop appendix).
EXERCISE_TABLE: dict[str, Spec] = {}
CHAPTERS: dict[str, int] = {}
for _number, _build in enumerate((_chapter_1, _chapter_2, _chapter_3, _chapter_4, _chapter_5, _chapter_6), start=1):
    for _name, _spec in _build().items():
        EXERCISE_TABLE[_name] = _spec
        CHAPTERS[_name] = _number
