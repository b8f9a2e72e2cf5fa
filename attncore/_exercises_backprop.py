"""The exercises of the backprop practice notebook (6p): vjps by hand, a bug to fix, shapes to predict.

Each reference is one of attncore's own vjps (:mod:`attncore._vjp`), which
tests/test_practice_backprop.py compares with central finite differences on every
case; each wrong variant is written here, in a few lines of numpy, as a student
would write the mistake.  The cases put a square case first (``n = m``,
``d = e``), where a transpose the reader forgot gives wrong numbers rather than a
shape error, so that the mistake can be named.
"""

from __future__ import annotations

import math

import numpy as np

from attncore._attention import attention
from attncore._practice import Case, GradSpec, Mistake, ShapeSpec, Spec
from attncore._vjp import attention_vjp, ffn_vjp, layer_norm_vjp, linear_vjp, softmax_vjp

FINITE_DIFFERENCES = "backprop-vjps-match-finite-differences"  # the ledger row whose `catches` names four variants


def _rn(seed, *shape, dtype=np.float64, scale=1.0):
    """Standard normal entries times ``scale``, from ``default_rng(seed)``."""
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


def _t(a):
    return np.swapaxes(a, -1, -2)


TRANSPOSE_WITH_T = ("`.T` reverses every axis of an array, so on a batch (3 axes or more) it moves the batch "
                    "axis too: transpose the last two axes only, with `np.swapaxes(a, -1, -2)`.")


# ---- predict the shapes ---------------------------------------------------------------

def _shape_cases():
    return [
        Case(((3, 4), (5, 4), (5, 2)), "no batch: n = 3 queries, m = 5 keys, d_k = 4, d_v = 2"),
        Case(((2, 3, 4), (2, 5, 4), (2, 5, 6)), "a batch of 2 for all three"),
        Case(((2, 3, 4), (5, 4), (5, 2)), "keys and values shared by a batch of 2 queries"),
        Case(((2, 1, 3, 8), (4, 6, 8), (1, 6, 3)), "batch axes (2, 1), (4,) and (1,), broadcast"),
    ]


def _shapes_reference(q_shape, k_shape, v_shape):
    """The shapes attncore's attention and attention_vjp give for arrays of these shapes."""
    q, k, v = (np.zeros(s) for s in (q_shape, k_shape, v_shape))
    out = attention(q, k, v)
    return (out.shape, *(grad.shape for grad in attention_vjp(q, k, v, np.zeros(out.shape))))


def _shapes(q, k, v, *, grads="own", out_batch="broadcast", width=-1, dk_rows=-2):
    batch = np.broadcast_shapes(q[:-2], k[:-2], v[:-2]) if out_batch == "broadcast" else tuple(q[:-2])
    out = (*batch, q[-2], (v if width == -1 else q)[-1])
    if grads == "broadcast":  # each gradient with the broadcast batch axes, none summed away
        return out, (*batch, *q[-2:]), (*batch, *k[-2:]), (*batch, *v[-2:])
    return out, tuple(q), (*k[:-2], (k if dk_rows == -2 else q)[-2], k[-1]), tuple(v)


SHAPE_MISTAKES = (
    Mistake("output_width_d_k", "the output has one row of width d_v per query: softmax(...) @ V takes its "
            "width from the values, not from the queries.", lambda q, k, v: _shapes(q, k, v, width=0)),
    Mistake("dk_rows_of_dq", "dK has a row per key (m rows), like K: a dK with n rows is what dS K-style "
            "code gives when it forgets to transpose dS (`ds @ q` instead of `ds^T @ q`).",
            lambda q, k, v: _shapes(q, k, v, dk_rows=0)),
    Mistake("gradients_not_summed", "each gradient has the shape of its argument: when K or V is shared "
            "across batch axes (broadcast), its gradient is summed over those axes, back to K's or V's shape.",
            lambda q, k, v: _shapes(q, k, v, grads="broadcast")),
    Mistake("output_batch_of_q", "the output's batch axes are those of q, k and v broadcast together "
            "(`np.broadcast_shapes`), not those of q alone.", lambda q, k, v: _shapes(q, k, v, out_batch="q")),
)


# ---- the softmax ------------------------------------------------------------------------

def _softmax_vjp_cases():
    return [
        Case((np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 0.0])), "one row, g = e_0 (the loss is a_0)"),
        Case((_rn(0, 2, 4), _rn(1, 2, 4)), "two rows of 4; seeds 0, 1"),
        Case((_rn(2, 2, 3), np.ones((2, 3))), "g constant along each row, so dx = 0; seed 2"),
        Case((np.array([[1000.0, 0.0, 999.0]]), np.array([[0.5, -1.0, 2.0]])), "large logits"),
        Case((_rn(3, 2, 3, 4, scale=2.0), _rn(4, 2, 3, 4)), "a batch of 2 x 3 rows; seeds 3, 4"),
        Case((_rn(5, 2, 3, dtype=np.float32), _rn(6, 2, 3, dtype=np.float32)), "float32; seeds 5, 6"),
    ]


def _softmax_vjp(x, g, *, rowsum="weighted", factor=True, diagonal=True, shift=True):
    """The softmax vjp a * (g - <g, a>), or a wrong variant of it."""
    e = np.exp(x - x.max(axis=-1, keepdims=True)) if shift else np.exp(x)
    a = e / e.sum(axis=-1, keepdims=True)
    total = {"weighted": (g * a).sum(axis=-1, keepdims=True), "plain": g.sum(axis=-1, keepdims=True),
             "all": (g * a).sum(), "none": 0}[rowsum]
    inner = (g if diagonal else 0) - total
    return a * inner if factor else inner


def _one_row_jacobian(x, g):
    """g J with J = diag(a) - a a^T built by np.diag and np.outer: right for one row only."""
    a = _softmax_vjp(x, np.ones_like(x), rowsum="none")  # a * 1 = softmax(x)
    return g @ (np.diag(a) - np.outer(a, a))


SOFTMAX_VJP_MISTAKES = (
    Mistake("no_rowsum_term", "this is a * g, the diagonal of the Jacobian alone: the softmax Jacobian is "
            "diag(a) - a a^T, whose second part gives the row-sum term: dx = a * (g - sum(g * a)). A "
            "constant g must give dx = 0 (shift invariance).",
            lambda x, g: _softmax_vjp(x, g, rowsum="none"), claim=FINITE_DIFFERENCES),
    Mistake("unweighted_rowsum", "the row sum is sum(g), not sum(g * a): the term comes from a a^T, so each "
            "g_j is weighted by a_j.", lambda x, g: _softmax_vjp(x, g, rowsum="plain")),
    Mistake("no_leading_a", "the result is not multiplied by a: dx = a * (g - sum(g * a)), entry by entry.",
            lambda x, g: _softmax_vjp(x, g, factor=False)),
    Mistake("no_diagonal_term", "this is -a * sum(g * a), the a a^T part alone: the diag(a) part adds a * g.",
            lambda x, g: _softmax_vjp(x, g, diagonal=False)),
    Mistake("rowsum_over_all", "the sum(g * a) runs over the whole array; it is one sum per row "
            "(`axis=-1, keepdims=True`).", lambda x, g: _softmax_vjp(x, g, rowsum="all")),
    Mistake("jacobian_of_one_row", "`np.diag(a)` and `np.outer(a, a)` build the Jacobian of one row (a 1-D "
            "array); on several rows `np.diag` takes a diagonal and `np.outer` flattens. Use the formula "
            "a * (g - sum(g * a)) along the last axis, which never builds J.", _one_row_jacobian),
    Mistake("no_max_shift", "the softmax inside is taken without the max shift: exp overflows for logits "
            "like 1000. Subtract the row maximum before `np.exp`.", lambda x, g: _softmax_vjp(x, g, shift=False)),
)


# ---- a linear layer -----------------------------------------------------------------------

def _linear_vjp_cases():
    return [
        Case((_rn(0, 2, 3), _rn(1, 3, 3), _rn(2, 2, 3)), "2 tokens, d = e = 3; seeds 0-2"),
        Case((_rn(3, 4, 3), _rn(4, 3, 2), _rn(5, 4, 2)), "4 tokens, d = 3, e = 2; seeds 3-5"),
        Case((_rn(6, 2, 2, 3), _rn(7, 3, 2), _rn(8, 2, 2, 2)), "a batch of 2 x 2 tokens; seeds 6-8"),
        Case((_rn(9, 2, 2, 3, dtype=np.float32), _rn(10, 3, 2, dtype=np.float32), _rn(11, 2, 2, 2, dtype=np.float32)),
             "a batch, float32; seeds 9-11"),
    ]


def _linear_vjp(x, w, g, *, dx_w=False, dw_t=False, sum_dw=True, db="sum", sum_db=True, t=_t):
    """(dx, dw, db) of y = x w + b, or a wrong variant of it."""
    batch = tuple(range(x.ndim - 2))
    dx = g @ (w if dx_w else w.T)
    dw = t(g) @ x if dw_t else t(x) @ g  # (..., d, e), or (..., e, d) transposed
    db = {"sum": g.sum(axis=-2), "mean": g.mean(axis=-2), "none": g}[db]
    return dx, dw.sum(axis=batch) if sum_dw else dw, db.sum(axis=batch) if sum_db and db.ndim > 1 else db


LINEAR_VJP_MISTAKES = (
    Mistake("dx_uses_w", "dx = g @ w.T: the gradient goes back through the transpose of the weight "
            "(with d != e, g @ w does not even have the shape of x).", lambda x, w, g: _linear_vjp(x, w, g, dx_w=True)),
    Mistake("dw_transposed", "dw = x^T g, of shape (d, e) like w; g^T x is its transpose.",
            lambda x, w, g: _linear_vjp(x, w, g, dw_t=True)),
    Mistake("db_not_summed", "db is g summed over the tokens (every token adds the same b): "
            "`g.sum(axis=-2)`, then over the batch axes too.", lambda x, w, g: _linear_vjp(x, w, g, db="none")),
    Mistake("db_mean", "db is the sum of g over the tokens, not its mean: each token's output adds b once.",
            lambda x, w, g: _linear_vjp(x, w, g, db="mean")),
    Mistake("not_summed_over_batch", "dw and db keep the batch axes: w and b are shared by every sequence of "
            "the batch, so their gradients are summed over the batch axes too, back to shapes (d, e) and (e,).",
            lambda x, w, g: _linear_vjp(x, w, g, sum_dw=False, sum_db=False)),
    Mistake("dw_not_summed_over_batch", "dw keeps the batch axes: w is shared by every sequence of the batch, so "
            "dw sums x^T g over the batch axes too, back to shape (d, e).",
            lambda x, w, g: _linear_vjp(x, w, g, sum_dw=False)),
    Mistake("db_not_summed_over_batch", "db keeps the batch axes: sum g over every axis but the last.",
            lambda x, w, g: _linear_vjp(x, w, g, sum_db=False)),
    Mistake("transpose_with_T", TRANSPOSE_WITH_T, lambda x, w, g: _linear_vjp(x, w, g, t=np.transpose)),
)


def _linear_reference(x, w, g):
    return linear_vjp(x, w, g)


# ---- attention ----------------------------------------------------------------------------

def _attention_vjp_cases():
    big = 40.0 * np.eye(4)[:3]
    return [
        Case((_rn(0, 3, 4), _rn(1, 3, 4), _rn(2, 3, 2), _rn(3, 3, 2)), "n = m = 3, d_k = 4, d_v = 2; seeds 0-3"),
        Case((_rn(4, 2, 3), _rn(5, 4, 3), _rn(6, 4, 2), _rn(7, 2, 2)), "2 queries, 4 keys; seeds 4-7"),
        Case((_rn(8, 2, 3, 2), _rn(9, 2, 4, 2), _rn(10, 2, 4, 1), _rn(11, 2, 3, 1)), "a batch of 2; seeds 8-11"),
        Case((big, 50.0 * np.eye(4), _rn(12, 4, 2), _rn(13, 3, 2)), "large scores (1000); seeds 12, 13"),
        Case(tuple(_rn(s, 3, 2, dtype=np.float32) for s in (14, 15, 16, 17)), "float32; seeds 14-17"),
    ]


def _attention_vjp(q, k, v, g, *, dv_a=False, dk_ds=False, rowsum=True, scale_q=True, scale_k=True, shift=True,
                   t=_t, scaled=True):
    """(dq, dk, dv) of softmax(q k^T / sqrt(d_k)) v, or a wrong variant of it."""
    s = 1 / math.sqrt(q.shape[-1])
    scores = q @ t(k) * (s if scaled else 1)  # (..., n, m)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True)) if shift else np.exp(scores)
    a = e / e.sum(axis=-1, keepdims=True)
    dv = (a if dv_a else t(a)) @ g  # (..., m, d_v)
    da = g @ t(v)  # (..., n, m)
    ds = a * (da - (da * a).sum(axis=-1, keepdims=True)) if rowsum else a * da
    dq = ds @ k * (s if scale_q else 1)  # (..., n, d_k)
    dk = (ds if dk_ds else t(ds)) @ q * (s if scale_k else 1)  # (..., m, d_k)
    return dq, dk, dv


ATTENTION_VJP_MISTAKES = (
    Mistake("dv_uses_a", "dV = A^T G: value j collects the gradient of every query that used it, weighted by "
            "column j of A. A @ G is right only by accident, and has the wrong shape when n != m.",
            lambda q, k, v, g: _attention_vjp(q, k, v, g, dv_a=True), claim=FINITE_DIFFERENCES),
    Mistake("dk_from_ds", "dK = s dS^T Q: key j is in column j of the scores, so it takes column j of dS. "
            "dS @ Q (without the transpose) has n rows, not m.", lambda q, k, v, g: _attention_vjp(q, k, v, g, dk_ds=True)),
    Mistake("no_rowsum_term", "dS is A * dA without the softmax's row-sum term: dS = A * (dA - rowsum(dA * A)).",
            lambda q, k, v, g: _attention_vjp(q, k, v, g, rowsum=False)),
    Mistake("no_scale", "the scores are q k^T / sqrt(d_k): this is the backward pass of attention without the "
            "scale, in the weights A it recomputes and in dQ and dK.",
            lambda q, k, v, g: _attention_vjp(q, k, v, g, scaled=False, scale_q=False, scale_k=False)),
    Mistake("missing_scale", "neither dQ nor dK has the factor 1/sqrt(d_k): the scores are s Q K^T, so both "
            "carry s.", lambda q, k, v, g: _attention_vjp(q, k, v, g, scale_q=False, scale_k=False)),
    Mistake("dq_missing_scale", "dQ = s dS K with s = 1/sqrt(d_k): the scale of the scores is missing in dQ.",
            lambda q, k, v, g: _attention_vjp(q, k, v, g, scale_q=False), claim=FINITE_DIFFERENCES),
    Mistake("dk_missing_scale", "dK = s dS^T Q with s = 1/sqrt(d_k): the scale of the scores is missing in dK.",
            lambda q, k, v, g: _attention_vjp(q, k, v, g, scale_k=False)),
    Mistake("no_max_shift", "the softmax inside has no max shift: exp overflows at scores near 1000.",
            lambda q, k, v, g: _attention_vjp(q, k, v, g, shift=False)),
    Mistake("transpose_with_T", TRANSPOSE_WITH_T, lambda q, k, v, g: _attention_vjp(q, k, v, g, t=np.transpose)),
)


def _attention_reference(q, k, v, g):
    return attention_vjp(q, k, v, g)


# ---- layer norm ---------------------------------------------------------------------------

def _layer_norm_vjp_cases():
    return [
        Case((np.array([[1.0, 2.0, 3.0, 6.0]]), np.array([[1.0, 0.0, 0.0, 0.0]])), "one token, g = e_0"),
        Case((_rn(0, 3, 5), _rn(1, 3, 5)), "3 tokens of width 5; seeds 0, 1"),
        Case((1e-3 * _rn(2, 2, 6), _rn(3, 2, 6)), "small features (scale 1e-3, variance below eps); seeds 2, 3"),
        Case((_rn(4, 2, 3, 4, dtype=np.float32), _rn(5, 2, 3, 4, dtype=np.float32)), "a batch, float32; seeds 4, 5"),
    ]


def _layer_norm_vjp(x, g, *, mean_term=True, var_term=True, eps=1e-5, r2=True):
    """dx of (x - mean) / sqrt(var + eps), or a wrong variant of it."""
    mu = x.mean(axis=-1, keepdims=True)
    r = 1 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    xhat = (x - mu) * r if r2 else x - mu  # without r, the projection term lacks r^2
    dx = g - (g.mean(axis=-1, keepdims=True) if mean_term else 0)
    return r * (dx - (xhat * (g * xhat).mean(axis=-1, keepdims=True) if var_term else 0))


LAYER_NORM_VJP_MISTAKES = (
    Mistake("constant_statistics", "this is r * g: the mean and the variance are treated as constants. Each x_j "
            "also moves the mean and the variance of its token, which gives two more terms: "
            "dx = r (g - mean(g) - xhat mean(g xhat)).",
            lambda x, g: _layer_norm_vjp(x, g, mean_term=False, var_term=False)),
    Mistake("no_mean_term", "the path through the mean is missing: subtract mean(g) (over the features), "
            "so that dx sums to 0 over each token.", lambda x, g: _layer_norm_vjp(x, g, mean_term=False)),
    Mistake("no_variance_term", "the path through the variance is missing: subtract xhat * mean(g * xhat), "
            "the projection of g on the normalised token.", lambda x, g: _layer_norm_vjp(x, g, var_term=False),
            claim=FINITE_DIFFERENCES),
    Mistake("variance_term_without_r2", "the variance term uses x - mean where it needs xhat = (x - mean) r, "
            "twice: it is r^2 (x - mean) mean(g (x - mean)), inside the factor r.",
            lambda x, g: _layer_norm_vjp(x, g, r2=False)),
    Mistake("no_eps", "r is 1/sqrt(var + eps) with eps = 1e-5, as in the forward pass; without eps, tokens "
            "whose variance is near eps get far too large a gradient.", lambda x, g: _layer_norm_vjp(x, g, eps=0.0)),
)


def _layer_norm_reference(x, g):
    return layer_norm_vjp(x, g)


# ---- find the bug: a feed-forward backward pass --------------------------------------------

def _ffn_cases():
    return [
        Case((_rn(0, 3, 2), _rn(1, 2, 4), _rn(2, 4, 2), _rn(3, 3, 2)), "3 tokens, d = 2, f = 4; seeds 0-3"),
        Case((_rn(4, 4, 3), _rn(5, 3, 5), _rn(6, 5, 3), _rn(7, 4, 3)), "4 tokens, d = 3, f = 5; seeds 4-7"),
        Case(tuple(_rn(s, *shape, dtype=np.float32) for s, shape in zip((8, 9, 10, 11), ((3, 2), (2, 3), (3, 2), (3, 2)))),
             "float32; seeds 8-11"),
    ]


def _ffn_vjp(x, w1, w2, g, *, relu_grad=lambda h: h > 0):
    """(dx, dw1, dw2) of relu(x w1) w2, with ``relu_grad(h)`` as the ReLU's derivative."""
    h = np.maximum(x @ w1, 0)  # (n, f)
    dpre = (g @ w2.T) * relu_grad(h)  # (n, f)
    return dpre @ w1.T, x.T @ dpre, h.T @ g


FFN_MISTAKES = (
    Mistake("multiplies_by_activation", "the bug is still there: `dh * h` multiplies by the ReLU's output; "
            "its derivative is 1 where the output is positive and 0 elsewhere, `dh * (h > 0)`.",
            lambda x, w1, w2, g: _ffn_vjp(x, w1, w2, g, relu_grad=lambda h: h)),
    Mistake("no_relu_gradient", "the ReLU's derivative is gone (or is `h >= 0`, which is True everywhere since "
            "h = max(pre, 0)): a unit that was off (pre < 0) passes no gradient, `dh * (h > 0)`.",
            lambda x, w1, w2, g: _ffn_vjp(x, w1, w2, g, relu_grad=lambda h: 1)),
    Mistake("relu_mask_inverted", "the mask is inverted: the gradient flows through the units that are on "
            "(h > 0), not through those that are off.", lambda x, w1, w2, g: _ffn_vjp(x, w1, w2, g, relu_grad=lambda h: h <= 0)),
    Mistake("sigmoid_derivative", "h (1 - h) is the derivative of a sigmoid written with its output; a ReLU's "
            "is the indicator h > 0.", lambda x, w1, w2, g: _ffn_vjp(x, w1, w2, g, relu_grad=lambda h: h * (1 - h))),
)


def _ffn_reference(x, w1, w2, g):
    dx, dw1, _, dw2, _ = ffn_vjp(x, w1, None, w2, g)
    return dx, dw1, dw2


def chapter_6():
    """The backprop appendix's exercises, by id, in the order of notebook 6p."""
    return {
        "attention_grad_shapes": ShapeSpec(
            "Predict the shapes of attention's gradients", ("q_shape", "k_shape", "v_shape"), _shapes_reference,
            _shape_cases, SHAPE_MISTAKES, fields=("out", "dq", "dk", "dv")),
        "softmax_vjp": Spec("The softmax's vjp", ("x", "g"), softmax_vjp, _softmax_vjp_cases, SOFTMAX_VJP_MISTAKES),
        "linear_vjp": GradSpec("The backward pass of a linear layer", ("x", "w", "g"), _linear_reference,
                               _linear_vjp_cases, LINEAR_VJP_MISTAKES, fields=("dx", "dw", "db")),
        "attention_vjp": GradSpec("The backward pass of attention", ("q", "k", "v", "g"), _attention_reference,
                                  _attention_vjp_cases, ATTENTION_VJP_MISTAKES, fields=("dq", "dk", "dv")),
        "layer_norm_vjp": Spec("The backward pass of layer norm", ("x", "g"), _layer_norm_reference,
                               _layer_norm_vjp_cases, LAYER_NORM_VJP_MISTAKES),
        "fix_ffn_vjp": GradSpec("Find the bug in a feed-forward backward pass", ("x", "w1", "w2", "g"),
                                _ffn_reference, _ffn_cases, FFN_MISTAKES, fields=("dx", "dw1", "dw2")),
    }
