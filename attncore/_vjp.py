r"""Vector-Jacobian products: the backward pass of every layer the course trains.

For a function :math:`y = f(x)` and an upstream gradient :math:`g = \partial L / \partial y`
of the same shape as :math:`y`, the vector-Jacobian product is
:math:`\partial L / \partial x = g\, J_f(x)`, of the shape of :math:`x`.  Each
function here takes the forward function's inputs and ``g`` and returns the
gradients with respect to those inputs, recomputing what it needs with the
public forward functions (:func:`attncore.softmax`,
:func:`attncore.attention_weights`, :func:`attncore.rope`...) or in a few
lines of its own (the normalised token of layer norm): no state is kept
between the forward and the backward pass.

Gradients with respect to an argument that was broadcast over batch axes are
summed over those axes, so every gradient has the shape of its argument, and
its dtype.  float16 input is computed in float32 and every gradient rounded
once at the end, as in the forward functions; sums over tokens (the gradient
of a weight, a bias, a layer norm's scale and shift) accumulate in at least
float64; a gradient beyond the range of its dtype is an error.

**Return convention.** A vjp with one gradient returns that array.  A vjp with
more returns a NamedTuple whose fields are the forward's parameters with a
``d`` in front, in the forward's order: ``dq, dk, dv = attention_vjp(...)``
unpacks as a tuple, and ``grads.dw_q`` names a field.  A block's parameters
come back as the structure they went in, a :class:`attncore.BlockParams`
(``transformer_block_vjp(...).dparams.w_q``).  Each public vjp validates its
arguments once, recomputes its forward once (multi-head attention: the
projections and the attention output) and runs it backwards.

**Memory.** :func:`attention_vjp`, :func:`multi_head_attention_vjp` and
:func:`transformer_block_vjp` recompute attention's weights a block of query
rows at a time, in the backward as in the forward, so that no ``(..., n, m)``
array exists in them.  :func:`attention_bias_vjp` and
:func:`shaw_attention_vjp` form the whole ``(..., n, m)`` weights (the bias's
gradient is itself an ``(..., n, m)`` array), and :func:`normalize_vjp` and
:func:`softmax_vjp` take and return arrays of their input's shape.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np
from numpy.typing import ArrayLike

from attncore._attention import (
    BLOCK_ROWS,
    _block,
    _finish,
    _merge_heads,
    _mha_args,
    _prepare,
    _scores,
    _split_heads,
    _weights as _numerators,
    attention,
    attention_weights,
)
from attncore._block import BlockParams, _block_args
from attncore._checks import as_float_array, batch_shape, check_axis, check_bool, check_count, check_real
from attncore._norms import _feature_param, _standardize
from attncore._positional import rope
from attncore._shaw import _relative_scores, _shaw_args
from attncore._softmax import compute_dtype, softmax


def _upstream(g, shape, what):
    """``g`` as a finite float array of exactly ``shape``, the shape of the forward output ``what``."""
    g = as_float_array(g, "g")
    if g.shape != tuple(shape):
        raise ValueError(f"g must have the shape of {what}, {tuple(shape)}, got shape {g.shape}")
    return g


def _result(*pairs):
    """Each gradient rounded to the dtype of its argument: ``pairs`` is ``(name, grad, arg)``.

    ``arg`` may be the argument or its dtype.  ``ValueError`` names the gradient that overflows that dtype (a float16
    argument's gradient beyond 65504, say) rather than returning ``inf``.
    """
    out = []
    for name, grad, arg in pairs:
        cast = np.asarray(grad)
        if cast.dtype != np.result_type(arg):
            with np.errstate(over="ignore"):
                cast = cast.astype(np.result_type(arg))
        if not np.isfinite(cast).all():
            raise ValueError(f"the gradient {name} overflows {cast.dtype}, the dtype of its argument; scale g down")
        out.append(cast)
    return out[0] if len(out) == 1 else tuple(out)


def _unbroadcast(grad, shape):
    """Sum ``grad`` over the axes along which an array of ``shape`` was broadcast."""
    lead = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(lead))) if lead > 0 else grad
    axes = tuple(i for i, size in enumerate(shape) if size == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


class AttentionGrads(NamedTuple):
    """The gradients :func:`attention_vjp` returns, one per array argument of :func:`attncore.attention`."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray


class AttentionBiasGrads(NamedTuple):
    """The gradients :func:`attention_bias_vjp` returns."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    dbias: np.ndarray


class ShawGrads(NamedTuple):
    """The gradients :func:`shaw_attention_vjp` returns."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    drel_k: np.ndarray
    drel_v: np.ndarray


class LinearGrads(NamedTuple):
    """The gradients :func:`linear_vjp` returns (``db`` that of a bias, passed or not)."""

    dx: np.ndarray
    dw: np.ndarray
    db: np.ndarray


class FFNGrads(NamedTuple):
    """The gradients :func:`ffn_vjp` returns, one per parameter of :func:`attncore.ffn`."""

    dx: np.ndarray
    dw1: np.ndarray
    db1: np.ndarray
    dw2: np.ndarray
    db2: np.ndarray


class LayerNormGrads(NamedTuple):
    """The gradients :func:`layer_norm_vjp` returns when ``gamma`` or ``beta`` is given."""

    dx: np.ndarray
    dgamma: np.ndarray
    dbeta: np.ndarray


class MultiHeadGrads(NamedTuple):
    """The gradients :func:`multi_head_attention_vjp` returns, one per argument of
    :func:`attncore.multi_head_attention` (``dcontext`` None in self-attention)."""

    dx: np.ndarray
    dw_q: np.ndarray
    dw_k: np.ndarray
    dw_v: np.ndarray
    dw_o: np.ndarray
    db_q: np.ndarray
    db_k: np.ndarray
    db_v: np.ndarray
    db_o: np.ndarray
    dcontext: Optional[np.ndarray] = None


class BlockGrads(NamedTuple):
    """What :func:`transformer_block_vjp` returns: ``dx`` and the parameters' gradients as a
    :class:`attncore.BlockParams` (None where the parameter is None)."""

    dx: np.ndarray
    dparams: BlockParams


# The backward passes below share these steps.  They take arrays already checked and cast to
# the compute dtype, and check nothing: each public vjp validates its arguments once, first.


def _token_sum(a):
    """``a`` (..., e) summed over every token (every axis but the last), accumulated in at least float64."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1]).sum(axis=0, dtype=np.result_type(a, np.float64))


def _affine_map(x, w, b):
    """``x @ w + b`` (``b`` may be None)."""
    y = x @ w  # (..., n, e)
    if b is not None:
        y += b
    return y


def _linear_grads(x, w, g):
    """``(dx, dw, db)`` of ``x @ w + b``; the sums over tokens (``dw``, ``db``) accumulate in at least float64."""
    tokens, acc = math.prod(x.shape[:-1]), np.result_type(x, np.float64)
    tokens_x = x.reshape(tokens, x.shape[-1]).astype(acc, copy=False)  # (tokens, d)
    tokens_g = g.reshape(tokens, g.shape[-1]).astype(acc, copy=False)  # (tokens, e)
    return g @ w.T, tokens_x.T @ tokens_g, tokens_g.sum(axis=0)  # (..., n, d), (d, e), (e,)


def _ffn_grads(x, pre, w1, w2, g):
    """``(dx, dw1, db1, dw2, db2)`` of the FFN, from its input ``x`` and hidden layer ``pre`` before the ReLU."""
    dr, dw2, db2 = _linear_grads(np.maximum(pre, 0), w2, g)
    dx, dw1, db1 = _linear_grads(x, w1, dr * (pre > 0))  # the ReLU's derivative, 0 at 0
    return dx, dw1, db1, dw2, db2


def _layer_norm_forward(x, gamma, beta, eps=1e-5):
    """Layer norm of ``x`` and what its backward needs, ``(xhat, r)``: the token normalised and
    ``r = (var + eps)**-1/2`` per token, both from the scale-robust :func:`attncore._norms._standardize`."""
    xhat, r = _standardize(x, (-1,), eps, rate=True)
    y = xhat if gamma is None else xhat * gamma
    return (y if beta is None else y + beta), (xhat, r, eps)


def _layer_norm_grads(xhat, r, eps, g, gamma):
    """``(dx, dgamma, dbeta)`` of layer norm: ``dx = r (h - mean h - xhat mean(h xhat))``, ``h = g gamma``."""
    if not np.all(np.isfinite(r)):
        token = tuple(int(i) for i in np.unravel_index(np.argmax(~np.isfinite(r)), r.shape)[:-1])
        if eps == 0 and not np.any(xhat[token]):
            raise ValueError(f"x of shape {xhat.shape} has a token whose entries are all equal (token {token}), so "
                             "variance 0 and eps = 0: layer norm has no derivative there; pass eps > 0")
        raise ValueError(f"the derivative of layer norm overflows float64 at token {token} of x (shape {xhat.shape}): "
                         "its variance plus eps is below 1e-616; scale x up or pass a larger eps")
    h = g if gamma is None else g * gamma
    centred = h - h.mean(axis=-1, keepdims=True) - xhat * (h * xhat).mean(axis=-1, keepdims=True)
    with np.errstate(over="ignore"):  # a gradient beyond the dtype is named by _result
        dx = r.astype(g.dtype) * centred  # (..., n, d)
    return dx, _token_sum(g * xhat), _token_sum(g)


class _Heads(NamedTuple):
    """What the backward of multi-head attention keeps from its forward: inputs, scaled queries
    ``q`` (..., h, n, k), keys and values (..., h, m, k), the heads' outputs and their merge (..., n, d)."""

    x: np.ndarray
    context: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    heads: np.ndarray
    merged: np.ndarray


def _mha_heads(x, context, params, h, mask, causal):
    """Multi-head attention up to the output projection; ``params`` is ``(w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o)``."""
    w_q, w_k, w_v, _, b_q, b_k, b_v, _ = params
    q = _split_heads(_affine_map(x, w_q, b_q), h)  # (..., h, n, k)
    q = q * q.dtype.type(1 / math.sqrt(q.shape[-1]))  # scaled once, as attention() scales it
    k, v = _split_heads(_affine_map(context, w_k, b_k), h), _split_heads(_affine_map(context, w_v, b_v), h)  # (..., h, m, k)
    heads = attention(q, k, v, mask=mask, scale=1.0, causal=causal)  # (..., h, n, k)
    return _Heads(x, context, q, k, v, heads, _merge_heads(heads))


def _mha_grads(cache, params, h, mask, causal, g):
    """``(dx, dcontext, grads of the eight parameters)`` of multi-head attention, from its forward's ``cache``."""
    w_q, w_k, w_v, w_o = params[:4]
    dmerged, dw_o, db_o = _linear_grads(cache.merged, w_o, g)
    scale = 1 / math.sqrt(cache.q.shape[-1])
    dq, dk, dv = _attention_backward(cache.q, cache.k, cache.v, _split_heads(dmerged, h), mask, None, scale, causal,
                                     out=cache.heads)  # (..., h, n, k), (..., h, m, k) twice
    dx, dw_q, db_q = _linear_grads(cache.x, w_q, _merge_heads(dq))
    dck, dw_k, db_k = _linear_grads(cache.context, w_k, _merge_heads(dk))
    dcv, dw_v, db_v = _linear_grads(cache.context, w_v, _merge_heads(dv))
    return dx, dck + dcv, (dw_q, dw_k, dw_v, dw_o, db_q, db_k, db_v, db_o)


def softmax_vjp(x: ArrayLike, g: ArrayLike, *, axis: int = -1) -> np.ndarray:
    r"""Backward pass of :func:`attncore.softmax`: ``dx = a * (g - sum(g * a))``.

    Parameters
    ----------
    x : array_like, shape (..., m)
        The logits the softmax was taken of (``-inf`` allowed: a masked entry).
    g : array_like, shape (..., m)
        The upstream gradient, shape of ``x``.
    axis : int, optional
        The axis the softmax normalised over; the last one by default.

    Returns
    -------
    ndarray, shape (..., m)
        ``dx``, the gradient with respect to ``x``; 0 at entries ``-inf``.

    Raises
    ------
    TypeError
        If ``x`` or ``g`` is not an array of real numbers or ``axis`` is not an integer.
    ValueError
        As :func:`attncore.softmax` for ``x`` and ``axis``; if ``g`` does not
        have the shape of ``x`` or holds NaN or ``+-inf``.

    See Also
    --------
    softmax : the forward function.
    normalize_vjp : the other normalisations of attention scores.

    Notes
    -----
    With :math:`a = \mathrm{softmax}(x)` the Jacobian is
    :math:`J = \mathrm{diag}(a) - a a^{\top}`, symmetric, so

    .. math::

        g J = a \odot \bigl(g - \textstyle\sum_j g_j a_j\bigr).

    Its rows sum to 0 (adding a constant to every logit changes nothing), so
    ``dx`` sums to 0 along ``axis``.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore import softmax_vjp
    >>> rng = np.random.default_rng(0)
    >>> x, g = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    >>> bool(np.abs(softmax_vjp(x, g).sum(axis=-1)).max() < 1e-15)
    True
    """
    x = as_float_array(x, "x", finite="-inf")
    axis = check_axis(axis, x.ndim, "x")
    g = _upstream(g, x.shape, "x")
    work = compute_dtype(x, g)
    a = softmax(x.astype(work), axis)
    g = g.astype(work)
    dx = a * (g - (g * a).sum(axis, keepdims=True))
    return _result(("dx", dx, x))


def _weights(s, normalize, mask):
    """The weights attention computes from the scores ``s`` (..., n, m) with ``normalize``."""
    # s as the bias of zero queries and keys: the scores are exactly s, -inf (masked) included.
    zeros_q, zeros_k = np.zeros(s.shape[:-1] + (1,), s.dtype), np.zeros(s.shape[-1:] + (1,), s.dtype)
    return attention_weights(zeros_q, zeros_k, bias=s, scale=1.0, mask=mask, normalize=normalize)


def _weights_vjp(w, g, normalize, relu=None):
    """``ds`` from the weights ``w`` (..., n, m) and the upstream ``g``: each derivative is a function of ``w``.

    For ``"relu2"``, ``relu`` (the scores' positive parts, 0 where masked) replaces ``sqrt(m w)``, which
    is 0 where ``w = relu(s)**2 / m`` underflows although ``relu(s)`` does not.
    """
    if normalize == "softmax":  # w = e / sum(e)
        return w * (g - (g * w).sum(axis=-1, keepdims=True))
    if normalize == "l2":  # w = e / ||e||
        return w * (g - w * (g * w).sum(axis=-1, keepdims=True))
    if normalize == "relu2":  # w = relu(s)**2 / m, so relu(s) = sqrt(m w)
        return 2 * g * (np.sqrt(w / w.shape[-1]) if relu is None else relu / w.shape[-1])
    return g * w  # "none": w = exp(s)


def normalize_vjp(
    s: ArrayLike, g: ArrayLike, *, normalize: str = "softmax", mask: ArrayLike | None = None
) -> np.ndarray:
    r"""Backward pass of the row normalisations of attention: scores to weights.

    Parameters
    ----------
    s : array_like, shape (..., n, m)
        Scores (``-inf`` allowed: a masked entry).
    g : array_like, shape (..., n, m)
        The upstream gradient with respect to the weights.
    normalize : {"softmax", "l2", "relu2", "none"}, optional
        The normalisation, as in :func:`attncore.attention_weights`.
    mask : array_like of bool, optional
        Broadcastable to ``(..., n, m)``; ``True`` = may attend.

    Returns
    -------
    ndarray, shape (..., n, m)
        ``ds``, the gradient with respect to the scores; 0 at masked entries.

    Raises
    ------
    TypeError
        If ``s`` or ``g`` is not an array of real numbers, or ``mask`` is not boolean.
    ValueError
        If ``s`` has fewer than 2 axes or holds NaN or ``+inf``; if ``g`` does
        not have the shape of ``s`` or holds NaN or ``+-inf``; if ``normalize``
        is not one of :data:`attncore.NORMALIZERS`; if ``mask`` does not
        broadcast; as :func:`attncore.attention_weights` for ``"none"`` when
        ``exp(s)`` overflows.

    See Also
    --------
    softmax_vjp : the ``"softmax"`` case along any axis.
    attention_bias_vjp : attention with any of these normalisations.

    Notes
    -----
    With :math:`w` the weights of a row, :math:`e = \exp(s)` and :math:`m`
    the number of keys, every derivative is a function of :math:`w` alone:

    .. math::

        \text{softmax: } w \odot (g - \langle g, w\rangle), \quad
        \text{l2: } w \odot (g - w \langle g, w\rangle), \quad
        \text{relu2: } 2 g \odot \sqrt{w / m}, \quad
        \text{none: } g \odot w .

    Examples
    --------
    An l2-normalised row has unit norm whatever its scores, so a gradient
    ``g`` along the row ``w`` itself (asking for a longer ``w``) gives ``ds = 0``:

    >>> import numpy as np
    >>> from attncore import attention_weights, normalize_vjp
    >>> s = np.random.default_rng(0).normal(size=(2, 4))
    >>> w = attention_weights(np.zeros((2, 1)), np.zeros((4, 1)), bias=s, normalize="l2")
    >>> bool(np.abs(normalize_vjp(s, 3.0 * w, normalize="l2")).max() < 1e-15)
    True
    """
    s = as_float_array(s, "s", ("...", "n", "m"), finite="-inf")
    g = _upstream(g, s.shape, "s")
    work = compute_dtype(s, g)
    w = _weights(s.astype(work), normalize, mask)  # (..., n, m)
    relu = None
    if normalize == "relu2":  # from s itself: w = relu(s)**2 / m may underflow
        relu = np.maximum(s.astype(work), 0) if mask is None else np.where(mask, np.maximum(s.astype(work), 0), 0)
    return _result(("ds", _weights_vjp(w, g.astype(work), normalize, relu), s))


def _qkv(q, k, v, g, scale):
    """Validate and cast ``q``, ``k``, ``v``, ``g``; return them in the compute dtype, and the scale."""
    q = as_float_array(q, "q", ("...", "n", "k"))
    k = as_float_array(k, "k", ("...", "m", q.shape[-1]), match=("q", q))
    v = as_float_array(v, "v", ("...", k.shape[-2], "v"), match=("k", k))
    shape = batch_shape(("q", q, 2), ("k", k, 2), ("v", v, 2)) + (q.shape[-2], v.shape[-1])
    g = _upstream(g, shape, "the output (..., n, v)")
    work = compute_dtype(q, k, v, g)
    if scale is None and q.shape[-1] > 0:
        scale = 1.0 / np.sqrt(q.shape[-1])
    elif scale is not None:
        scale = float(check_real(scale, "scale", compute_dtype(q, k)))
    return (q, k, v), [a.astype(work, copy=False) for a in (q, k, v, g)], scale


def attention_vjp(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    g: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    bias: ArrayLike | None = None,
    scale: float | None = None,
    causal: bool = False,
) -> AttentionGrads:
    r"""Backward pass of :func:`attncore.attention` (softmax): ``(dq, dk, dv)``.

    Parameters
    ----------
    q : array_like, shape (..., n, k)
    k : array_like, shape (..., m, k)
    v : array_like, shape (..., m, v)
    g : array_like, shape (..., n, v)
        The upstream gradient, shape of the attention output.
    mask, bias, scale, causal
        As in :func:`attncore.attention`.

    Returns
    -------
    dq : ndarray, shape (..., n, k)
    dk : ndarray, shape (..., m, k)
    dv : ndarray, shape (..., m, v)
        Each of the shape of its argument (summed over the batch axes it was broadcast along).

    Raises
    ------
    TypeError
        As :func:`attncore.attention`, and if ``g`` is not an array of real numbers.
    ValueError
        As :func:`attncore.attention`, and if ``g`` is not of the shape of the
        output or holds NaN or ``+-inf``.

    See Also
    --------
    attention : the forward function.
    attention_bias_vjp : the gradient of the bias too, and the other normalisations.
    softmax_vjp : the middle step.

    Notes
    -----
    With :math:`S = s\,QK^{\top} + B`, :math:`A = \mathrm{softmax}(S)` row by
    row and :math:`O = AV`:

    .. math::

        dV = A^{\top} G, \quad dA = G V^{\top}, \quad
        dS = A \odot \bigl(dA - \mathrm{rowsum}(dA \odot A)\bigr), \quad
        dQ = s\, dS\, K, \quad dK = s\, dS^{\top} Q .

    A key no query may attend has a column of :math:`A` equal to 0, and so
    ``dk = dv = 0`` in its row.

    Row :math:`i` of :math:`dS` needs row :math:`i` of :math:`A` only, so the
    backward runs :data:`attncore._attention.BLOCK_ROWS` query rows at a time, as
    :func:`attncore.attention` does: it recomputes the block's weights, adds the
    block's shares to :math:`dK` and :math:`dV`, and no ``(..., n, m)`` array
    exists at once.  The peak is about ``2 * BLOCK_ROWS * m`` numbers for the
    weights and :math:`dS` of one block, plus about eight arrays of ``n x d``
    (the gradients, the scaled queries, the block's shares of :math:`dK` and
    :math:`dV`): as a share of one ``n x m`` matrix about ``512/n + 8d/m``, a
    quarter at ``n = m = 4096, d = 64`` but a half at ``n = m = 2048``.  With
    ``causal=True`` a block skips the keys after its last query.

    Examples
    --------
    The rows of ``dk`` sum to ``dk`` of a shift of every key by the same
    vector, which changes no score row but by a constant: 0.

    >>> import numpy as np
    >>> from attncore import attention_vjp
    >>> rng = np.random.default_rng(0)
    >>> q, k, v, g = (rng.normal(size=s) for s in ((3, 4), (5, 4), (5, 2), (3, 2)))
    >>> dq, dk, dv = attention_vjp(q, k, v, g)
    >>> bool(np.abs(dk.sum(axis=0)).max() < 1e-14)
    True
    """
    args, (_, _, v, g), scale = _qkv(q, k, v, g, scale)
    # checked as attention() checks them, in the dtype of its scores; the backward runs in that of every argument
    q, k, mask, bias, _, _ = _prepare(args[0], args[1], mask, bias, scale, "softmax")  # q * scale
    q, k, bias = (None if a is None else a.astype(v.dtype, copy=False) for a in (q, k, bias))
    dq, dk, dv = _attention_backward(q, k, v, g, mask, bias, scale, check_bool(causal, "causal"))
    grads = (_unbroadcast(dq, args[0].shape), _unbroadcast(dk, args[1].shape), _unbroadcast(dv, args[2].shape))
    return AttentionGrads(*_result(*zip(("dq", "dk", "dv"), grads, args)))


def _attention_backward(q, k, v, g, mask, bias, scale, causal, out=None):
    """``(dq, dk, dv)`` of softmax attention, a block of :data:`BLOCK_ROWS` query rows at a time.

    ``q`` is already scaled (``q * scale``) and every array is in the compute dtype; ``mask`` and
    ``bias`` as :func:`attncore._attention._prepare` returns them.  Only the weights of one block,
    ``(..., BLOCK_ROWS, m)``, and their gradients exist at once; ``dk`` and ``dv`` are accumulated
    block by block.  With ``out``, the forward's output kept, ``rowsum(dA * A)`` is ``rowsum(G * O)``.
    """
    n, m = q.shape[-2], k.shape[-2]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], g.shape[:-2])
    dq = np.zeros(batch + q.shape[-2:], q.dtype)  # (..., n, k)
    dk, dv = np.zeros(batch + k.shape[-2:], q.dtype), np.zeros(batch + v.shape[-2:], q.dtype)  # (..., m, k), (..., m, v)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow of a score is found and named by _scores
        for start in range(0, n, BLOCK_ROWS):
            rows = slice(start, min(start + BLOCK_ROWS, n))  # a block of query rows
            keys = slice(0, min(rows.stop, m) if causal else m)  # causal: no key after the block's last query
            a = _block_weights(q, k, mask, bias, rows, keys, start if causal else None)  # (..., b, keys)
            g_rows = g[..., rows, :]  # (..., b, v)
            delta = None if out is None else np.einsum("...ij,...ij->...i", g_rows, out[..., rows, :])[..., None]
            grads = _attention_rows_vjp(a, q[..., rows, :], k[..., keys, :], v[..., keys, :], g_rows, delta)
            del a  # before the next block's weights exist
            np.multiply(grads[0], scale, out=dq[..., rows, :])
            dk[..., keys, :] += grads[1]
            dv[..., keys, :] += grads[2]
    return dq, dk, dv


def _block_weights(q, k, mask, bias, rows, keys, first):
    """The softmax weights of the query ``rows`` over the ``keys`` (``q`` scaled), as :func:`attncore.attention` computes them."""
    blocks = [None if b is None else _block(b, rows, keys) for b in (mask, bias)]
    e, total = _numerators(_scores(q[..., rows, :], k[..., keys, :], *blocks, first), "softmax", k.shape[-2])
    return np.divide(e, total, out=e)  # (..., b, keys)


def _attention_rows_vjp(a, q, k, v, g, delta=None):
    """The backward of one block of query rows: weights ``a`` (..., b, keys), ``q`` scaled (..., b, k).

    Returns ``dq / scale`` (..., b, k) and this block's shares of ``dk`` (..., keys, k) and ``dv`` (..., keys, v).
    """
    dv = np.swapaxes(a, -1, -2) @ g  # (..., keys, v): dV = A^T G, this block's rows
    ds = g @ np.swapaxes(v, -1, -2)  # (..., b, keys): dA = G V^T, turned into dS in place
    if delta is None:  # rowsum(dA * A), = rowsum(G * O) when the output O is kept
        delta = np.einsum("...ij,...ij->...i", ds, a)[..., None]  # (..., b, 1)
    ds -= delta
    ds *= a  # dS = A * (dA - rowsum(dA * A)): the softmax's vjp, row by row
    dq = ds @ k  # (..., b, k): dQ = s dS K, times s by the caller
    dk = np.swapaxes(ds, -1, -2) @ q  # (..., keys, k): dK = s dS^T Q, with q already scaled
    return dq, dk, dv


def attention_bias_vjp(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    g: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    bias: ArrayLike | None = None,
    scale: float | None = None,
    normalize: str = "softmax",
    causal: bool = False,
) -> AttentionBiasGrads:
    r"""Backward pass of :func:`attncore.attention` with any normalisation, bias included.

    Parameters
    ----------
    q, k, v, g, mask, scale, causal
        As in :func:`attention_vjp`.
    bias : array_like, optional
        As in :func:`attncore.attention`; ``dbias`` takes its shape.
    normalize : {"softmax", "l2", "relu2", "none"}, optional
        As in :func:`attncore.attention_weights`.

    Returns
    -------
    dq, dk, dv : ndarray
        As in :func:`attention_vjp`.
    dbias : ndarray, shape of ``bias``, or (..., n, m) without one
        The gradient with respect to the bias, which is the gradient with
        respect to the scores ``S`` summed over the axes the bias was
        broadcast along; 0 at masked entries.  Feed it to
        :func:`relative_bias_vjp` for a table of relative biases (T5's, or
        any learned ALiBi-like table).

    Raises
    ------
    TypeError
        As :func:`attention_vjp`.
    ValueError
        As :func:`attention_vjp`, and if ``normalize`` is not one of
        :data:`attncore.NORMALIZERS`.

    See Also
    --------
    attention_vjp : the softmax case, written out.
    normalize_vjp : the middle step.

    Notes
    -----
    As :func:`attention_vjp`, with the middle step :math:`dS` taken from
    :func:`normalize_vjp`: :math:`dB = dS`, :math:`dQ = s\, dS\, K`,
    :math:`dK = s\, dS^{\top} Q`, :math:`dV = W^{\top} G`.
    Unlike :func:`attention_vjp` it is not blocked: it holds the whole
    ``(..., n, m)`` weights and :math:`dS`, which is also what ``dbias`` is.

    Examples
    --------
    A bias that is the same along a row cancels in the softmax, so the
    rows of ``dbias`` sum to 0:

    >>> import numpy as np
    >>> from attncore import attention_bias_vjp
    >>> rng = np.random.default_rng(0)
    >>> q, k, v, g = (rng.normal(size=s) for s in ((3, 4), (5, 4), (5, 2), (3, 2)))
    >>> dq, dk, dv, dbias = attention_bias_vjp(q, k, v, g, bias=np.zeros((3, 5)))
    >>> bool(np.abs(dbias.sum(axis=-1)).max() < 1e-15)
    True
    """
    args, (q, k, v, g), scale = _qkv(q, k, v, g, scale)
    w, relu = _dense_weights(args[0], args[1], mask, bias, scale, normalize, check_bool(causal, "causal"), q.dtype)
    dv = np.swapaxes(w, -1, -2) @ g  # (..., m, v)
    ds = _weights_vjp(w, g @ np.swapaxes(v, -1, -2), normalize, relu)  # (..., n, m)
    dq = ds @ k * scale  # (..., n, k)
    dk = np.swapaxes(ds, -1, -2) @ q * scale  # (..., m, k)
    # without a bias, dbias is that of a zero bias in the dtype of the scores
    bias = np.broadcast_to(np.zeros((), np.result_type(*args[:2])), ds.shape) if bias is None else \
        as_float_array(bias, "bias", finite="-inf")  # validated by attention_weights
    grads = [_unbroadcast(d, a.shape) for d, a in zip((dq, dk, dv, ds), args + (bias,))]
    return AttentionBiasGrads(*_result(*zip(("dq", "dk", "dv", "dbias"), grads, args + (bias,))))


def _dense_weights(q, k, mask, bias, scale, normalize, causal, work):
    """The weights ``(..., n, m)`` as :func:`attncore.attention_weights` forms them, with its checks (made
    in the dtype of its scores), computed in ``work``; and for ``"relu2"`` the scores' positive parts."""
    q, k, mask, bias, _, _ = _prepare(q, k, mask, bias, scale, normalize)  # q * scale
    q, k, bias = (None if a is None else a.astype(work, copy=False) for a in (q, k, bias))
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is found and named by _scores and _finish
        s = _scores(q, k, mask, bias, 0 if causal else None)  # (..., n, m), -inf where masked
        relu = np.maximum(s, 0) if normalize == "relu2" else None  # w = relu(s)**2 / m may underflow; relu(s) not
        e, total = _numerators(s, normalize, k.shape[-2])
        return _finish(e / total, work, "a weight", normalize), relu


def relative_bias_vjp(g: ArrayLike) -> np.ndarray:
    r"""Backward pass of :func:`attncore.relative_bias` with a table: sums along the diagonals.

    Parameters
    ----------
    g : array_like, shape (..., n, m)
        The upstream gradient with respect to the bias matrix ``B`` (the
        ``dbias`` of :func:`attention_bias_vjp`).

    Returns
    -------
    ndarray, shape (..., n + m - 1)
        The gradient with respect to the table: entry ``[..., r + n - 1]``
        is the sum of ``g`` over the diagonal ``j - i = r``.

    Raises
    ------
    TypeError
        If ``g`` is not an array of real numbers.
    ValueError
        If ``g`` has fewer than 2 axes, an axis of length 0, or holds NaN or
        ``+-inf``; if an entry of the table overflows the dtype of ``g`` (the
        sums are accumulated in at least float64 and rounded once).

    See Also
    --------
    relative_bias : the forward function.

    Notes
    -----
    :math:`B_{ij} = t_{j - i}`, so :math:`dt_r = \sum_{j - i = r} G_{ij}`.
    For T5 buckets, sum this table's entries over the offsets of each bucket
    (``np.add.at``).

    Examples
    --------
    Every entry of ``g`` lands in one entry of the table:

    >>> import numpy as np
    >>> from attncore import relative_bias_vjp
    >>> g = np.random.default_rng(0).normal(size=(3, 4))
    >>> bool(np.isclose(relative_bias_vjp(g).sum(), g.sum()))
    True
    """
    g = as_float_array(g, "g", ("...", "n", "m"))
    n, m = g.shape[-2], g.shape[-1]
    if n == 0 or m == 0:
        raise ValueError(f"g must have n >= 1 and m >= 1 (relative_bias needs both), got shape {g.shape}")
    acc = np.result_type(g, np.float64)  # a diagonal of float16 or float32 sums in float64, then is rounded once
    diagonals = [np.trace(g, offset=r, axis1=-2, axis2=-1, dtype=acc) for r in range(-(n - 1), m)]  # t_r, r = j - i
    return _result(("dtable", np.stack(diagonals, axis=-1), g))  # (..., n + m - 1)


def rope_vjp(
    g: ArrayLike, positions: ArrayLike | None = None, *, base: float = 10000.0, convention: str = "interleaved"
) -> np.ndarray:
    r"""Backward pass of :func:`attncore.rope`: the rotation back, ``dx = rope(g, -positions)``.

    Parameters
    ----------
    g : array_like, shape (..., n, d)
        The upstream gradient, shape of the rotated ``x``.
    positions, base, convention
        As in :func:`attncore.rope`.

    Returns
    -------
    ndarray, shape (..., n, d)
        ``dx``, the gradient with respect to the rows before the rotation.

    Raises
    ------
    TypeError, ValueError
        As :func:`attncore.rope`, for ``g`` in place of ``x``.

    See Also
    --------
    rope : the forward function.

    Notes
    -----
    Row :math:`p` is :math:`x_p R_p` with :math:`R_p` orthogonal, so
    :math:`dx_p = g_p R_p^{\top} = g_p R_{-p}`: the vjp is the rotation by
    minus the angles, and does not need ``x``.

    Examples
    --------
    The backward rotation undoes the forward one:

    >>> import numpy as np
    >>> from attncore import rope, rope_vjp
    >>> x = np.random.default_rng(0).normal(size=(4, 6))
    >>> bool(np.allclose(rope_vjp(rope(x)), x))
    True
    """
    g = as_float_array(g, "g", ("...", "n", "d"))
    if g.shape[-1] % 2:
        raise ValueError(f"g must have an even last axis (features are rotated in pairs), got shape {g.shape}")
    if positions is None:
        positions = np.arange(g.shape[-2], dtype=np.float64)
    return rope(g, -as_float_array(positions, "positions"), base=base, convention=convention)


def layer_norm_vjp(
    x: ArrayLike, g: ArrayLike, *, gamma: ArrayLike | None = None, beta: ArrayLike | None = None, eps: float = 1e-5
) -> np.ndarray | LayerNormGrads:
    r"""Backward pass of :func:`attncore.layer_norm`.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    g : array_like, shape (..., n, d)
        The upstream gradient, shape of ``x``.
    gamma, beta : array_like, shape (d,), optional
        Scale and shift, as in :func:`attncore.layer_norm`.
    eps : float, optional
        As in :func:`attncore.layer_norm` (the same default).

    Returns
    -------
    dx : ndarray, shape (..., n, d)
        Alone when ``gamma`` and ``beta`` are both None.
    dgamma, dbeta : ndarray, shape (d,)
        Returned after ``dx`` when either is given (summed over every token).

    Raises
    ------
    TypeError
        As :func:`attncore.layer_norm`, and if ``g`` is not an array of real numbers.
    ValueError
        As :func:`attncore.layer_norm`; if ``g`` does not have the shape of
        ``x`` or holds NaN or ``+-inf``; if ``eps = 0`` and a token has
        variance 0, where layer norm has no derivative; if the variance of a
        token overflows the compute dtype.

    See Also
    --------
    layer_norm : the forward function.

    Notes
    -----
    With :math:`\hat x = (x - \mu) r`, :math:`r = (\sigma^2 + \epsilon)^{-1/2}`
    and :math:`h = g \odot \gamma`, per token (means over the :math:`d` features):

    .. math::

        dx = r\,\bigl(h - \overline{h} - \hat x\, \overline{h \odot \hat x}\bigr),
        \qquad d\gamma = \textstyle\sum_{\text{tokens}} g \odot \hat x,
        \qquad d\beta = \textstyle\sum_{\text{tokens}} g .

    ``dx`` has mean 0 over the features (a shift of a token changes nothing)
    and, with ``eps = 0`` and any ``gamma``, is orthogonal to :math:`\hat x`
    (a rescaling of the token changes nothing either; ``gamma`` enters only
    through :math:`h`); with ``eps > 0`` the inner product is
    :math:`r \langle h, \hat x\rangle\, \epsilon / (\sigma^2 + \epsilon)`.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore import layer_norm_vjp
    >>> rng = np.random.default_rng(0)
    >>> x, g = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    >>> bool(np.abs(layer_norm_vjp(x, g).mean(axis=-1)).max() < 1e-15)
    True
    """
    x = as_float_array(x, "x", ("...", "d"))
    g = _upstream(g, x.shape, "x")
    # eps is added in float64 by layer_norm: the same check, under the same name.
    eps = float(check_real(eps, "eps", np.result_type(x, np.float64), minimum=0))
    work = compute_dtype(x, g)
    like_x = np.broadcast_to(np.zeros((), work), x.shape)  # x's shape in the compute dtype, for the messages
    given = [None if a is None else as_float_array(a, name) for a, name in ((gamma, "gamma"), (beta, "beta"))]
    gamma = None if gamma is None else _feature_param(given[0], "gamma", like_x)
    if beta is not None:
        _feature_param(given[1], "beta", like_x)  # checked only: beta enters no gradient
    _, cache = _layer_norm_forward(x.astype(work, copy=False), None, None, eps)
    dx, dgamma, dbeta = _layer_norm_grads(*cache, g.astype(work, copy=False), gamma)
    if gamma is None and beta is None:
        return _result(("dx", dx, x))
    like = [x if a is None else a for a in given]  # each gradient in its parameter's dtype
    return LayerNormGrads(*_result(("dx", dx, x), ("dgamma", dgamma, like[0]), ("dbeta", dbeta, like[1])))


def linear_vjp(x: ArrayLike, w: ArrayLike, g: ArrayLike) -> LinearGrads:
    r"""Backward pass of :func:`attncore.linear`: ``(dx, dw, db)``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    w : array_like, shape (d, e)
    g : array_like, shape (..., n, e)
        The upstream gradient, shape of ``x @ w``.

    Returns
    -------
    dx : ndarray, shape (..., n, d)
    dw : ndarray, shape (d, e)
    db : ndarray, shape (e,)
        The gradient of the bias (which does not enter any gradient itself).

    Raises
    ------
    TypeError
        If ``x``, ``w`` or ``g`` is not an array of real numbers.
    ValueError
        If ``x`` is not ``(..., n, d)``, ``w`` not ``(d, e)`` or ``g`` not of
        the shape of ``x @ w``; if any of them holds NaN or ``+-inf``.

    See Also
    --------
    linear : the forward function.
    ffn_vjp : two of them and a ReLU.

    Notes
    -----
    .. math::

        dX = G W^{\top}, \qquad dW = \textstyle\sum_{\text{tokens}} X^{\top} G,
        \qquad db = \textstyle\sum_{\text{tokens}} G .

    Examples
    --------
    ``<g, dx-direction>`` both ways: ``sum(dw * w) = sum(g * (x @ w))``
    (the map is linear in ``w``):

    >>> import numpy as np
    >>> from attncore import linear_vjp
    >>> rng = np.random.default_rng(0)
    >>> x, w, g = rng.normal(size=(4, 3)), rng.normal(size=(3, 2)), rng.normal(size=(4, 2))
    >>> dx, dw, db = linear_vjp(x, w, g)
    >>> bool(np.isclose((dw * w).sum(), (g * (x @ w)).sum()))
    True
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    w = as_float_array(w, "w", (x.shape[-1], "e"), match=("x", x))
    g = _upstream(g, x.shape[:-1] + w.shape[-1:], "x @ w")
    work = compute_dtype(x, w, g)
    dx, dw, db = _linear_grads(*(a.astype(work, copy=False) for a in (x, w, g)))
    return LinearGrads(*_result(("dx", dx, x), ("dw", dw, w), ("db", db, w)))


def ffn_vjp(
    x: ArrayLike, w1: ArrayLike, b1: ArrayLike | None, w2: ArrayLike, g: ArrayLike
) -> FFNGrads:
    r"""Backward pass of :func:`attncore.ffn`: ``(dx, dw1, db1, dw2, db2)``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    w1 : array_like, shape (d, f)
    b1 : array_like, shape (f,), or None
    w2 : array_like, shape (f, d)
    g : array_like, shape (..., n, d)
        The upstream gradient, shape of the output.  ``b2`` enters no
        gradient and is not needed.

    Returns
    -------
    dx : ndarray, shape (..., n, d)
    dw1 : ndarray, shape (d, f)
    db1 : ndarray, shape (f,)
    dw2 : ndarray, shape (f, d)
    db2 : ndarray, shape (d,)

    Raises
    ------
    TypeError
        If an argument is not an array of real numbers.
    ValueError
        As :func:`attncore.ffn`, and if ``g`` does not have the shape of ``x``.

    See Also
    --------
    ffn : the forward function.
    linear_vjp : each of its two layers.

    Notes
    -----
    With :math:`H = X W_1 + b_1` and :math:`R = \max(0, H)`: :math:`dR = G W_2^{\top}`,
    :math:`dH = dR \odot [H > 0]`, then :func:`linear_vjp` twice (the ReLU's
    derivative at 0 is taken as 0).

    Examples
    --------
    A hidden unit that is off for every token gets no gradient:

    >>> import numpy as np
    >>> from attncore import ffn_vjp
    >>> rng = np.random.default_rng(0)
    >>> x, w1, w2, g = rng.normal(size=(3, 2)), rng.normal(size=(2, 4)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    >>> b1 = np.array([0.0, 0.0, 0.0, -100.0])  # unit 3 is off
    >>> dx, dw1, db1, dw2, db2 = ffn_vjp(x, w1, b1, w2, g)
    >>> float(np.abs(dw1[:, 3]).max() + abs(db1[3]) + np.abs(dw2[3]).max())
    0.0
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    w1 = as_float_array(w1, "w1", (x.shape[-1], "f"), match=("x", x))
    w2 = as_float_array(w2, "w2", (w1.shape[-1], x.shape[-1]), match=("w1", w1))
    if b1 is not None:
        b1 = as_float_array(b1, "b1", (w1.shape[-1],), match=("w1", w1))
    g = _upstream(g, x.shape, "x")
    work = compute_dtype(x, w1, w2, g)
    xw, w1w, w2w, gw = (a.astype(work, copy=False) for a in (x, w1, w2, g))
    pre = _affine_map(xw, w1w, None if b1 is None else b1.astype(work, copy=False))  # (..., n, f), before the ReLU
    dx, dw1, db1, dw2, db2 = _ffn_grads(xw, pre, w1w, w2w, gw)
    like = w1 if b1 is None else b1
    return FFNGrads(*_result(("dx", dx, x), ("dw1", dw1, w1), ("db1", db1, like), ("dw2", dw2, w2), ("db2", db2, w2)))


def shaw_attention_vjp(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    rel_k: ArrayLike,
    rel_v: ArrayLike,
    g: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    scale: float | None = None,
    normalize: str = "softmax",
) -> ShawGrads:
    r"""Backward pass of :func:`attncore.shaw_attention`: ``(dq, dk, dv, drel_k, drel_v)``.

    Parameters
    ----------
    q, k, v, rel_k, rel_v, mask, scale, normalize
        As in :func:`attncore.shaw_attention`.
    g : array_like, shape (..., n, v)
        The upstream gradient, shape of the output.

    Returns
    -------
    dq : ndarray, shape (..., n, k)
    dk : ndarray, shape (..., m, k)
    dv : ndarray, shape (..., m, v)
    drel_k : ndarray, shape (n, m, k)
    drel_v : ndarray, shape (n, m, v)
        Summed over the batch axes; :func:`shaw_relative_embeddings_vjp`
        turns the last two into gradients of the tables.

    Raises
    ------
    TypeError, ValueError
        As :func:`attncore.shaw_attention`, and for a ``g`` that is not a
        finite real array of the output's shape.

    See Also
    --------
    shaw_attention : the forward function.
    attention_bias_vjp : the same steps without the relative terms.

    Notes
    -----
    With :math:`e_{ij} = s\, q_i \cdot (k_j + a^K_{ij})`, weights :math:`w`
    and :math:`z_i = \sum_j w_{ij} (v_j + a^V_{ij})`:

    .. math::

        dw_{ij} = g_i \cdot (v_j + a^V_{ij}), \quad
        dv_j = \textstyle\sum_i w_{ij} g_i, \quad
        da^V_{ij} = w_{ij} g_i, \\
        dq_i = s \textstyle\sum_j de_{ij} (k_j + a^K_{ij}), \quad
        dk_j = s \textstyle\sum_i de_{ij} q_i, \quad
        da^K_{ij} = s\, de_{ij} q_i,

    with :math:`de` from :func:`normalize_vjp`.

    Examples
    --------
    The value-side table's gradient sums, over the keys, to ``g`` (softmax
    rows sum to 1):

    >>> import numpy as np
    >>> from attncore import shaw_attention_vjp
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 4))
    >>> rel_k, rel_v, g = rng.normal(size=(3, 3, 2)), rng.normal(size=(3, 3, 4)), rng.normal(size=(3, 4))
    >>> grads = shaw_attention_vjp(q, k, v, rel_k, rel_v, g)
    >>> bool(np.allclose(grads[4].sum(axis=1), g))
    True
    """
    args = [as_float_array(a, name) for a, name in ((q, "q"), (k, "k"), (v, "v"), (rel_k, "rel_k"), (rel_v, "rel_v"))]
    g = as_float_array(g, "g")
    work = compute_dtype(*args, g)
    # the forward's checks, and its weights once, in the compute dtype (float16 is rounded once, at the end)
    (q, k, v, rel_k, rel_v), s, dtype = _shaw_args(*(a.astype(work, copy=False) for a in args), scale, normalize)
    bias = _relative_scores(q, rel_k, s, dtype)  # (..., n, m), the relative scores
    w = attention_weights(q, k, mask=mask, bias=bias, scale=s, normalize=normalize)  # (..., n, m)
    g = _upstream(g, batch_shape(("q", q, 2), ("k", k, 2), ("v", v, 2)) + (q.shape[-2], v.shape[-1]),
                  "the output (..., n, v)").astype(work, copy=False)
    dw = g @ np.swapaxes(v, -1, -2) + np.einsum("...nv,nmv->...nm", g, rel_v)
    de = _weights_vjp(w, dw, normalize)  # (..., n, m)
    dq = s * (de @ k + np.einsum("...nm,nmk->...nk", de, rel_k))
    dk = s * np.swapaxes(de, -1, -2) @ q
    dv = np.swapaxes(w, -1, -2) @ g
    drel_k = s * np.einsum("...nm,...nk->...nmk", de, q)  # summed over the batch axes below
    drel_v = np.einsum("...nm,...nv->...nmv", w, g)
    grads = [_unbroadcast(d, a.shape) for d, a in zip((dq, dk, dv, drel_k, drel_v), args)]
    return ShawGrads(*_result(*zip(("dq", "dk", "dv", "drel_k", "drel_v"), grads, args)))


def shaw_relative_embeddings_vjp(g: ArrayLike, clip: int) -> np.ndarray:
    r"""Backward pass of :func:`attncore.shaw_relative_embeddings`: the gradient of the table.

    Parameters
    ----------
    g : array_like, shape (n, m, k)
        The upstream gradient with respect to the ``(n, m, k)`` embeddings
        (``drel_k`` or ``drel_v`` of :func:`shaw_attention_vjp`).
    clip : int
        ``K >= 0``: the table has ``2K + 1`` rows, for the offsets ``-K..K``.

    Returns
    -------
    ndarray, shape (2K + 1, k)
        Row ``r + K`` sums ``g[i, j]`` over the pairs with ``clip(j - i, -K, K) = r``.

    Raises
    ------
    TypeError
        If ``g`` is not an array of real numbers or ``clip`` not an integer.
    ValueError
        If ``g`` is not ``(n, m, k)`` or holds NaN or ``+-inf``; if ``clip < 0``;
        if a row of the table overflows the dtype of ``g`` (the sums are
        accumulated in at least float64 and rounded once).

    See Also
    --------
    shaw_relative_embeddings : the forward function.

    Notes
    -----
    The forward function copies row :math:`\mathrm{clip}(j - i, -K, K) + K`
    of the table to entry :math:`(i, j)`; the vjp adds each entry back to
    its row (``np.add.at``, which sums repeated indices).

    Examples
    --------
    >>> import numpy as np
    >>> from attncore import shaw_relative_embeddings_vjp
    >>> shaw_relative_embeddings_vjp(np.ones((3, 3, 1)), 1)[:, 0]
    array([3., 3., 3.])
    """
    g = as_float_array(g, "g", ("n", "m", "k"))
    clip = check_count(clip, "clip", minimum=0)
    n, m = g.shape[0], g.shape[1]
    offsets = np.clip(np.arange(m)[None, :] - np.arange(n)[:, None], -clip, clip) + clip  # (n, m)
    table = np.zeros((2 * clip + 1, g.shape[2]), np.result_type(g, np.float64))  # (2K + 1, k), summed in float64
    np.add.at(table, offsets, g)
    return _result(("dtable", table, g))


def multi_head_attention_vjp(
    x: ArrayLike,
    w_q: ArrayLike,
    w_k: ArrayLike,
    w_v: ArrayLike,
    w_o: ArrayLike,
    num_heads: int,
    g: ArrayLike,
    *,
    b_q: ArrayLike | None = None,
    b_k: ArrayLike | None = None,
    b_v: ArrayLike | None = None,
    b_o: ArrayLike | None = None,
    context: ArrayLike | None = None,
    mask: ArrayLike | None = None,
    causal: bool = False,
) -> MultiHeadGrads:
    r"""Backward pass of :func:`attncore.multi_head_attention`: the gradient of every argument.

    Parameters
    ----------
    x, w_q, w_k, w_v, w_o, num_heads, b_q, b_k, b_v, b_o, context, mask, causal
        As in :func:`attncore.multi_head_attention`.
    g : array_like, shape (..., n, d)
        The upstream gradient, shape of the output.

    Returns
    -------
    MultiHeadGrads
        A NamedTuple with one field per argument: ``dx``, ``dw_q``, ``dw_k``,
        ``dw_v``, ``dw_o``, ``db_q``, ``db_k``, ``db_v``, ``db_o`` (the biases'
        gradients whether or not a bias was passed, in the dtype of the bias or
        else of its weight) and ``dcontext`` (None in self-attention, where
        ``dx`` sums the three paths through queries, keys and values).

    Raises
    ------
    TypeError, ValueError
        As :func:`attncore.multi_head_attention`, and for a ``g`` that is not
        a finite real array of the output's shape.

    See Also
    --------
    multi_head_attention : the forward function.
    attention_vjp : the attention of each head.
    linear_vjp : each projection.

    Notes
    -----
    The forward is recomputed once (projections and attention), then its
    steps are run in reverse: :func:`linear_vjp` of the output
    projection, :func:`attncore.split_heads` of its input gradient (the vjp
    of :func:`attncore.merge_heads`, a reshape), :func:`attention_vjp` for
    every head at once, :func:`attncore.merge_heads` of ``dq``, ``dk``,
    ``dv`` (the vjp of the split) and :func:`linear_vjp` of the three input
    projections.

    Examples
    --------
    With zero weights the output is ``b_o`` for every token, and only ``b_o`` learns:

    >>> import numpy as np
    >>> from attncore import multi_head_attention_vjp
    >>> x, g = np.ones((3, 4)), np.random.default_rng(0).normal(size=(3, 4))
    >>> grads = multi_head_attention_vjp(x, *[np.zeros((4, 4))] * 4, 2, g)
    >>> bool(np.allclose(grads.db_o, g.sum(axis=0))), float(np.abs(grads.dw_q).max())
    (True, 0.0)
    """
    x, c, params, h, mask, causal = _mha_args(x, (w_q, w_k, w_v, w_o), num_heads, (b_q, b_k, b_v, b_o), context, mask,
                                              causal)
    g = _upstream(g, batch_shape(("x", x, 2), ("context", c, 2)) + x.shape[-2:], "the output (..., n, d)")
    work = compute_dtype(x, c, g, *(p for p in params if p is not None))
    cast = [None if a is None else a.astype(work, copy=False) for a in (x, c, g, *params)]
    cache = _mha_heads(*cast[:2], cast[3:], h, mask, causal)
    dx, dc, grads = _mha_grads(cache, cast[3:], h, mask, causal, cast[2])
    dx, dc = (dx + dc, None) if context is None else (dx, dc)
    pairs = [("dx", _unbroadcast(dx, x.shape), x)]
    if context is not None:
        pairs.append(("dcontext", _unbroadcast(dc, c.shape), c))
    names = ("dw_q", "dw_k", "dw_v", "dw_o", "db_q", "db_k", "db_v", "db_o")
    pairs += [(name, grad, params[i % 4] if p is None else p) for i, (name, grad, p) in enumerate(zip(names, grads, params))]
    out = _result(*pairs)
    return MultiHeadGrads(out[0], *out[-8:], dcontext=None if context is None else out[1])


def _mha_params(p):
    """The eight parameters of the attention of a block, in the order of :func:`_mha_heads`."""
    return (p.w_q, p.w_k, p.w_v, p.w_o, p.b_q, p.b_k, p.b_v, p.b_o)


def _block_grads(mha, ffn, ln1, ln2):
    """The gradients of a block's parameters by field name, from those of its four sublayers."""
    grads = dict(zip(("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"), mha))
    grads.update(zip(("w1", "b1", "w2", "b2"), ffn))
    return dict(grads, gamma1=ln1[0], beta1=ln1[1], gamma2=ln2[0], beta2=ln2[1])


def _post_ln_vjp(x, p, h, mask, g):
    """Post-LN, ``H = LN1(X + MHA(X))``, ``Y = LN2(H + FFN(H))``: each sublayer forward once, then back."""
    mha = _mha_heads(x, x, _mha_params(p), h, mask, False)
    hid, ln1 = _layer_norm_forward(x + _affine_map(mha.merged, p.w_o, p.b_o), p.gamma1, p.beta1)  # H
    pre = _affine_map(hid, p.w1, p.b1)  # (..., n, f), the FFN before its ReLU
    _, ln2 = _layer_norm_forward(hid + _affine_map(np.maximum(pre, 0), p.w2, p.b2), None, None)  # Y is not needed
    db, *ln2_grads = _layer_norm_grads(*ln2, g, p.gamma2)
    dh, *ffn_grads = _ffn_grads(hid, pre, p.w1, p.w2, db)
    da, *ln1_grads = _layer_norm_grads(*ln1, db + dh, p.gamma1)
    dx, dc, mha_grads = _mha_grads(mha, _mha_params(p), h, mask, False, da)
    return da + dx + dc, _block_grads(mha_grads, ffn_grads, ln1_grads, ln2_grads)


def _pre_ln_vjp(x, p, h, mask, g):
    """Pre-LN, ``H = X + MHA(LN1(X))``, ``Y = H + FFN(LN2(H))``: the FFN's output is not needed."""
    z1, ln1 = _layer_norm_forward(x, p.gamma1, p.beta1)
    mha = _mha_heads(z1, z1, _mha_params(p), h, mask, False)
    z2, ln2 = _layer_norm_forward(x + _affine_map(mha.merged, p.w_o, p.b_o), p.gamma2, p.beta2)  # LN2(H)
    dz2, *ffn_grads = _ffn_grads(z2, _affine_map(z2, p.w1, p.b1), p.w1, p.w2, g)
    dh_ln, *ln2_grads = _layer_norm_grads(*ln2, dz2, p.gamma2)
    dh = g + dh_ln
    dz1, dc, mha_grads = _mha_grads(mha, _mha_params(p), h, mask, False, dh)
    dx_ln, *ln1_grads = _layer_norm_grads(*ln1, dz1 + dc, p.gamma1)
    return dh + dx_ln, _block_grads(mha_grads, ffn_grads, ln1_grads, ln2_grads)


def _branch_ln_vjp(x, p, h, mask, g):
    """Branch-LN, ``H = X + LN1(MHA(X))``, ``Y = H + LN2(FFN(H))``."""
    mha = _mha_heads(x, x, _mha_params(p), h, mask, False)
    z1, ln1 = _layer_norm_forward(_affine_map(mha.merged, p.w_o, p.b_o), p.gamma1, p.beta1)
    hid = x + z1  # H
    pre = _affine_map(hid, p.w1, p.b1)  # (..., n, f)
    _, ln2 = _layer_norm_forward(_affine_map(np.maximum(pre, 0), p.w2, p.b2), None, None)
    df, *ln2_grads = _layer_norm_grads(*ln2, g, p.gamma2)
    dh_ffn, *ffn_grads = _ffn_grads(hid, pre, p.w1, p.w2, df)
    dh = g + dh_ffn
    dm, *ln1_grads = _layer_norm_grads(*ln1, dh, p.gamma1)
    dx, dc, mha_grads = _mha_grads(mha, _mha_params(p), h, mask, False, dm)
    return dh + dx + dc, _block_grads(mha_grads, ffn_grads, ln1_grads, ln2_grads)


_BLOCK_VJPS = {"post": _post_ln_vjp, "pre": _pre_ln_vjp, "branch": _branch_ln_vjp}


def transformer_block_vjp(
    x: ArrayLike,
    params: BlockParams,
    num_heads: int,
    g: ArrayLike,
    *,
    placement: str = "post",
    mask: ArrayLike | None = None,
) -> BlockGrads:
    r"""Backward pass of :func:`attncore.transformer_block`: ``(dx, dparams)``.

    Parameters
    ----------
    x, params, num_heads, placement, mask
        As in :func:`attncore.transformer_block`.
    g : array_like, shape (..., n, d)
        The upstream gradient, shape of the output.

    Returns
    -------
    BlockGrads
        A NamedTuple ``(dx, dparams)``: ``dx`` of the shape and dtype of
        ``x``, and ``dparams``, a :class:`attncore.BlockParams` holding the
        gradient of every field of ``params`` that is not None, in that
        field's dtype (None where the field is None).

    Raises
    ------
    TypeError, ValueError
        As :func:`attncore.transformer_block`, and for a ``g`` that is not a
        finite real array of the output's shape.

    See Also
    --------
    transformer_block : the forward function.
    multi_head_attention_vjp, ffn_vjp, layer_norm_vjp : its parts.

    Notes
    -----
    Each placement's two equations, differentiated from the output back; a
    residual connection passes its gradient through unchanged and adds the
    branch's.  Post-LN, :math:`H = \mathrm{LN}_1(X + \mathrm{MHA}(X))`,
    :math:`Y = \mathrm{LN}_2(H + \mathrm{FFN}(H))`:
    :math:`dB = \mathrm{LN}_2^*(G)`, :math:`dH = dB + \mathrm{FFN}^*(dB)`,
    :math:`dA = \mathrm{LN}_1^*(dH)`, :math:`dX = dA + \mathrm{MHA}^*(dA)`,
    with :math:`f^*` the vjp of :math:`f`; pre-LN and branch-LN likewise.

    Examples
    --------
    Permuting the tokens permutes ``dx`` and leaves the parameters' gradients unchanged:

    >>> import numpy as np
    >>> from attncore import init_block_params, transformer_block_vjp
    >>> rng = np.random.default_rng(0)
    >>> p, x, g = init_block_params(4, 8, rng), rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    >>> dx, dp = transformer_block_vjp(x, p, 2, g)
    >>> dx2, dp2 = transformer_block_vjp(x[[2, 0, 1]], p, 2, g[[2, 0, 1]])
    >>> bool(np.allclose(dx2, dx[[2, 0, 1]]) and np.allclose(dp2.w_q, dp.w_q))
    True
    """
    x, p = _block_args(x, params, placement)  # the checks of transformer_block, under the same names
    x, _, _, h, mask, _ = _mha_args(x, p[:4], num_heads, p[6:10], None, mask, False)  # num_heads and mask
    g = _upstream(g, x.shape, "the output (..., n, d)")
    work = compute_dtype(x, g, *(a for a in p if a is not None))
    pw = BlockParams(*(None if a is None else a.astype(work, copy=False) for a in p))
    dx, grads = _BLOCK_VJPS[placement](x.astype(work, copy=False), pw, h, mask, g.astype(work, copy=False))
    fields = [f for f, a in zip(BlockParams._fields, p) if a is not None]
    out = _result(("dx", dx, x), *((f"dparams.{f}", grads[f], getattr(p, f)) for f in fields))
    return BlockGrads(out[0], BlockParams(**dict(zip(fields, out[1:]))))
