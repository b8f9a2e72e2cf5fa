"""Scaled dot-product attention, single- and multi-head."""

from __future__ import annotations

import math

import numpy as np

from attncore._checks import (
    as_float_array,
    batch_shape,
    check_broadcastable,
    check_count,
    check_finite,
    check_mask,
    check_shape,
)
from attncore.linear import linear
from attncore.softmax import NORMALIZERS, _exp_is_safe, _normalize_inplace, _numerators_inplace


def attention_weights(q, k, *, mask=None, bias=None, scale=None, normalize="softmax"):
    """The attention matrix ``softmax(q k^T * scale + bias)`` over the keys.

    Parameters
    ----------
    q : array_like, shape (..., n, k)
        Queries, one per row.
    k : array_like, shape (..., m, k)
        Keys, one per row; the batch axes broadcast against those of ``q``.
    mask : array_like of bool, optional
        Broadcastable to ``(..., n, m)``; ``True`` = query may attend key.
        Masked weights are exactly 0; a query with no key left gets a row of 0.
    bias : array_like, optional
        Broadcastable to ``(..., n, m)``; added to the scaled scores before
        the softmax (a relative-position table, ALiBi, ...).
    scale : float, optional
        Multiplies ``q k^T``; ``1 / sqrt(k)`` by default.
    normalize : {"softmax", "l2", "relu2", "none"}, optional
        How a row of scores ``s`` becomes a row of weights: ``"softmax"``,
        ``exp(s) / sum(exp(s))`` (rows sum to 1); ``"l2"``,
        ``exp(s) / ||exp(s)||_2`` (rows have unit Euclidean norm); ``"relu2"``,
        ``relu(s)**2 / m`` as in GAU; ``"none"``, ``exp(s)`` with no denominator.

    Returns
    -------
    ndarray, shape (..., n, m)
        Row ``i`` holds the weights query ``i`` gives to every key.

    Notes
    -----
    .. math::

        A = \\mathrm{softmax}\\!\\left(s\\, Q K^{\\top} + B\\right),
        \\qquad s = 1/\\sqrt{d_k},

    with the softmax over the last axis and masked entries removed before it.
    In einsum form the scores are ``einsum("...nk,...mk->...nm", q, k)``.
    Only ``"softmax"`` makes every row a probability distribution; the other
    normalisations are the remedies discussed in the chapter on relative
    position encodings.

    Examples
    --------
    Every row of the attention matrix is a probability distribution:

    >>> import numpy as np
    >>> from attncore import attention_weights, causal_mask
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(4, 8)), rng.normal(size=(6, 8))
    >>> a = attention_weights(q, k)
    >>> a.shape, bool(np.allclose(a.sum(axis=-1), 1.0))
    ((4, 6), True)
    >>> a = attention_weights(q, k[:4], mask=causal_mask(4))
    >>> bool(np.all(a[np.triu_indices(4, 1)] == 0))
    True
    >>> a = attention_weights(q, k, normalize="l2")
    >>> bool(np.allclose(np.linalg.norm(a, axis=-1), 1.0))
    True
    """
    q, k, mask, bias, _ = _prepare(q, k, mask, bias, scale, normalize)
    scores = np.matmul(q, np.swapaxes(k, -1, -2))  # (..., n, m)
    if bias is not None:
        scores += bias
    return _normalize_inplace(scores, normalize, mask=mask)


def _prepare(q, k, mask, bias, scale, normalize):
    """Validate the arguments shared by the attention functions; scale ``q``.

    Returns ``(q * scale, k, mask, bias, shape of the scores)``.
    """
    q = as_float_array(q, "q")
    k = as_float_array(k, "k")
    check_shape(q, "q", ("...", "n", "k"))
    check_shape(k, "k", ("...", "m", q.shape[-1]))
    check_finite(q, "q")
    check_finite(k, "k")
    shape = batch_shape(("q", q, 2), ("k", k, 2)) + (q.shape[-2], k.shape[-2])
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    elif not math.isfinite(scale):
        raise ValueError(f"scale must be a finite number, got {scale}")
    if normalize not in NORMALIZERS:
        raise ValueError(f"normalize must be one of {', '.join(NORMALIZERS)}, got {normalize!r}")
    if mask is not None:
        mask = check_mask(mask, shape, "the scores (..., n, m)")
    if bias is not None:
        bias = as_float_array(bias, "bias")
        check_broadcastable(bias, "bias", shape, "the scores (..., n, m)")
        check_finite(bias, "bias")
    # Scaling q (n x k numbers) is cheaper than scaling the scores (n x m).
    return q * q.dtype.type(scale), k, mask, bias, shape


def _rows(a, start, stop, n):
    """Rows ``start:stop`` of an array that broadcasts to ``(..., n, m)``."""
    if a is None or a.ndim < 2 or a.shape[-2] != n:
        return a  # broadcast along the rows: the same for every block
    return a[..., start:stop, :]


#: Score bytes per block of query rows in ``attention``: small enough for the
#: block to stay in cache between the score, softmax and value passes.
BLOCK_BYTES = 1 << 22


def attention(q, k, v, *, mask=None, bias=None, scale=None, normalize="softmax", reweight=None):
    """Scaled dot-product attention ``softmax(q k^T * scale + bias) v``.

    Parameters
    ----------
    q : array_like, shape (..., n, k)
        Queries.
    k : array_like, shape (..., m, k)
        Keys.
    v : array_like, shape (..., m, v)
        Values, one per key.
    mask, bias, scale, normalize
        As in :func:`attention_weights`.
    reweight : array_like, optional
        Broadcastable to ``(..., n, m)``; multiplies the normalised weights
        elementwise before they average the values (URPE's Toeplitz matrix
        ``C`` in ``(A * C) v``).

    Returns
    -------
    ndarray, shape (..., n, v)
        Row ``i`` is the average of the values weighted by row ``i`` of
        :func:`attention_weights`; it is 0 for a query whose keys are all masked.

    Notes
    -----
    .. math::

        \\mathrm{Attention}(Q, K, V) = \\mathrm{softmax}\\!\\left(\\frac{Q K^{\\top}}{\\sqrt{d_k}} + B\\right) V,

    in einsum form ``einsum("...nm,...mv->...nv", weights, v)``.

    Examples
    --------
    Permuting keys and values together leaves the output unchanged:

    >>> import numpy as np
    >>> from attncore import attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    >>> perm = [4, 2, 0, 1, 3]
    >>> bool(np.allclose(attention(q, k[perm], v[perm]), attention(q, k, v)))
    True
    """
    q, k, mask, bias, shape = _prepare(q, k, mask, bias, scale, normalize)
    v = as_float_array(v, "v")
    check_shape(v, "v", ("...", k.shape[-2], "v"))
    check_finite(v, "v")
    if reweight is not None:
        reweight = as_float_array(reweight, "reweight")
        check_broadcastable(reweight, "reweight", shape, "the weights (..., n, m)")
        check_finite(reweight, "reweight")
    batch = batch_shape(("q", q, 2), ("k", k, 2), ("v", v, 2))
    n, m = shape[-2], shape[-1]
    out = np.empty(batch + (n, v.shape[-1]), dtype=np.result_type(q, k, v))  # (..., n, v)
    # Query rows are independent: computing them a block at a time keeps each
    # block of scores in cache and never holds the full (..., n, m) matrix.
    rows_per_block = max(1, BLOCK_BYTES // max(1, math.prod(shape[:-2]) * m * q.dtype.itemsize))

    # |q_i . k_j| <= |q_i| |k_j|: when no score can be large, exp needs no shift by the row maximum.
    bound = np.sqrt(np.max(np.einsum("...nk,...nk->...n", q, q), initial=0.0) * np.max(np.einsum("...mk,...mk->...m", k, k), initial=0.0))
    if bias is not None:
        bound += np.max(np.abs(bias), initial=0.0, where=np.isfinite(bias))
    shift = not _exp_is_safe(bound, m, q.dtype)

    # One score buffer for all blocks: a fresh (rows, m) array per block would cost page faults.
    buffer = np.empty(shape[:-2] + (min(rows_per_block, n), m), dtype=np.result_type(q, k))  # (..., rows, m)
    k_t = np.swapaxes(k, -1, -2)  # (..., k, m)

    def block(start):
        stop = min(start + rows_per_block, n)
        scores = buffer[..., : stop - start, :]  # (..., rows, m)
        np.matmul(q[..., start:stop, :], k_t, out=scores)
        if bias is not None:
            scores += _rows(bias, start, stop, n)
        # The per-row division is applied to the (rows, v) output, not the (rows, m) weights.
        numerators, denominator = _numerators_inplace(scores, normalize, mask=_rows(mask, start, stop, n), shift=shift)
        if reweight is not None:
            numerators *= _rows(reweight, start, stop, n)
        rows = out[..., start:stop, :]  # (..., rows, v)
        np.matmul(numerators, v, out=rows)
        if denominator is not None:
            np.divide(rows, denominator, out=rows, where=denominator > 0)

    for start in range(0, n, rows_per_block):
        block(start)
    return out


def split_heads(x, num_heads):
    """Split the feature axis into heads: ``(..., n, d) -> (..., h, n, d/h)``.

    Head ``i`` takes the feature columns ``i*d/h`` to ``(i+1)*d/h - 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore import split_heads, merge_heads
    >>> x = np.arange(12.0).reshape(2, 6)
    >>> split_heads(x, 3)[1].tolist()
    [[2.0, 3.0], [8.0, 9.0]]
    >>> bool(np.array_equal(merge_heads(split_heads(x, 3)), x))
    True
    """
    x = np.asarray(x)
    check_shape(x, "x", ("...", "n", "d"))
    h = _num_heads(num_heads, x.shape[-1])
    x = x.reshape(*x.shape[:-1], h, x.shape[-1] // h)  # (..., n, h, k)
    return np.swapaxes(x, -2, -3)  # (..., h, n, k)


def merge_heads(x):
    """Concatenate heads back into features: ``(..., h, n, k) -> (..., n, h*k)``.

    The inverse of :func:`split_heads`.
    """
    x = np.asarray(x)
    check_shape(x, "x", ("...", "h", "n", "k"))
    x = np.swapaxes(x, -2, -3)  # (..., n, h, k)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])  # (..., n, h*k)


def multi_head_attention(
    x,
    w_q,
    w_k,
    w_v,
    w_o,
    num_heads,
    *,
    b_q=None,
    b_k=None,
    b_v=None,
    b_o=None,
    context=None,
    mask=None,
):
    """Multi-head attention of ``x`` over itself, or over ``context``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
        The tokens that ask (queries).
    w_q, w_k, w_v, w_o : array_like, shape (d, d)
        Projections, used as ``x @ w``.
    num_heads : int
        ``h``; must divide ``d``.  Head ``i`` uses feature columns
        ``i*d/h`` to ``(i+1)*d/h - 1`` of the projected queries, keys and values.
    b_q, b_k, b_v, b_o : array_like, shape (d,), optional
        Biases of the four projections.
    context : array_like, shape (..., m, d), optional
        The tokens that answer (keys and values), for cross-attention;
        ``x`` itself by default (self-attention).
    mask : array_like of bool, optional
        Broadcastable to ``(..., n, m)``; the same mask for every head.

    Returns
    -------
    ndarray, shape (..., n, d)

    Notes
    -----
    With :math:`Q = XW_Q + b_Q`, :math:`K = CW_K + b_K`, :math:`V = CW_V + b_V`
    (``C`` the context) split column-wise into ``h`` blocks of width
    :math:`d_k = d/h`,

    .. math::

        \\mathrm{MHA}(X) = \\left[\\mathrm{head}_1, \\dots, \\mathrm{head}_h\\right] W_O + b_O,
        \\qquad \\mathrm{head}_i = \\mathrm{Attention}(Q_i, K_i, V_i).

    Examples
    --------
    Self-attention is equivariant under a permutation of the tokens:

    >>> import numpy as np
    >>> from attncore import multi_head_attention
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(5, 8))
    >>> w = [rng.normal(size=(8, 8)) for _ in range(4)]
    >>> perm = [3, 1, 4, 0, 2]
    >>> bool(np.allclose(multi_head_attention(x[perm], *w, 2),
    ...                  multi_head_attention(x, *w, 2)[perm]))
    True
    """
    x = as_float_array(x, "x")
    check_shape(x, "x", ("...", "n", "d"))
    d = x.shape[-1]
    context = x if context is None else as_float_array(context, "context")
    check_shape(context, "context", ("...", "m", d))
    h = _num_heads(num_heads, d)
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        check_shape(as_float_array(w, name), name, (d, d))
    shape = batch_shape(("x", x, 2), ("context", context, 2)) + (x.shape[-2], context.shape[-2])
    if mask is not None:
        mask = check_mask(mask, shape, "the scores (..., n, m)")
        mask = np.expand_dims(np.broadcast_to(mask, shape), -3)  # (..., 1, n, m)
    q = split_heads(linear(x, w_q, b_q, name="w_q"), h)  # (..., h, n, k)
    k = split_heads(linear(context, w_k, b_k, name="w_k"), h)  # (..., h, m, k)
    v = split_heads(linear(context, w_v, b_v, name="w_v"), h)  # (..., h, m, k)
    heads = attention(q, k, v, mask=mask)  # (..., h, n, k)
    return linear(merge_heads(heads), w_o, b_o, name="w_o")  # (..., n, d)


def _num_heads(num_heads, d):
    h = check_count(num_heads, "num_heads")
    if d % h:
        raise ValueError(f"num_heads must be a positive divisor of the width d = {d}, got {h}")
    return h
