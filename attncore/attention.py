"""Scaled dot-product attention, single- and multi-head."""

from __future__ import annotations

import math

import numpy as np

from attncore._checks import (
    as_float_array,
    batch_shape,
    check_broadcastable,
    check_choice,
    check_count,
    check_fits,
    check_mask,
    check_real,
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
        the softmax (a relative-position table, ALiBi, ...).  An entry
        ``-inf`` means "masked" (weight exactly 0, as with ``mask``); NaN and
        ``+inf`` are errors.
    scale : float, optional
        Multiplies ``q k^T``; ``1 / sqrt(k)`` by default.  A real number,
        finite in the dtype of the scores (``result_type(q, k)``).
    normalize : {"softmax", "l2", "relu2", "none"}, optional
        How a row of scores ``s`` becomes a row of weights: ``"softmax"``,
        ``exp(s) / sum(exp(s))`` (rows sum to 1); ``"l2"``,
        ``exp(s) / ||exp(s)||_2`` (rows have unit Euclidean norm); ``"relu2"``,
        ``relu(s)**2 / m`` as in GAU; ``"none"``, ``exp(s)`` with no denominator.

    Returns
    -------
    ndarray, shape (..., n, m)
        Row ``i`` holds the weights query ``i`` gives to every key.

    Raises
    ------
    TypeError
        If ``q``, ``k`` or ``bias`` is not an array of real numbers (bool,
        complex, strings), ``scale`` is not a real number, or ``mask`` is not
        boolean.
    ValueError
        If ``q`` is not ``(..., n, k)``, ``k`` not ``(..., m, k)`` or their
        batch axes do not broadcast; if ``q`` or ``k`` holds NaN or ``+-inf``,
        or ``bias`` NaN or ``+inf``; if ``mask`` or ``bias`` does not
        broadcast to ``(..., n, m)``; if ``scale`` is not finite in the dtype
        of the scores, or ``q * scale`` overflows; if a float64 ``bias``
        overflows the dtype of the scores; if ``k = 0`` and no ``scale`` is
        given; if ``normalize`` is not one of :data:`attncore.NORMALIZERS`.

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
    q = as_float_array(q, "q", ("...", "n", "k"))
    k = as_float_array(k, "k", ("...", "m", q.shape[-1]), match=("q", q))
    shape = batch_shape(("q", q, 2), ("k", k, 2)) + (q.shape[-2], k.shape[-2])
    dtype = np.result_type(q, k)  # the dtype of the scores
    if scale is None:
        if q.shape[-1] == 0:
            raise ValueError(
                f"q and k have width k = 0 (q of shape {q.shape}), so the default scale "
                "1/sqrt(k) is undefined; pass scale explicitly or give them features"
            )
        scale = 1.0 / math.sqrt(q.shape[-1])
    else:
        scale = float(check_real(scale, "scale", dtype))
    check_choice(normalize, "normalize", NORMALIZERS)
    if mask is not None:
        mask = check_mask(mask, shape, "the scores (..., n, m)")
    if bias is not None:
        # -inf in the bias is a documented "masked"; NaN and +inf are errors.
        bias = as_float_array(bias, "bias", finite="-inf")
        check_broadcastable(bias, "bias", shape, "the scores (..., n, m)")
        check_fits(bias, "bias", dtype)
    # Scaling q (n x k numbers) is cheaper than scaling the scores (n x m).
    with np.errstate(over="ignore"):
        scaled = q * q.dtype.type(scale)
    if not np.all(np.isfinite(scaled)):
        raise ValueError(f"q * scale overflows {q.dtype} (scale = {scale:.4g}, q of shape {q.shape}); scale q down")
    return scaled, k, mask, bias, shape


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

    Raises
    ------
    TypeError
        As :func:`attention_weights`, and if ``v`` or ``reweight`` is not an
        array of real numbers.
    ValueError
        As :func:`attention_weights`, and if ``v`` is not ``(..., m, v)`` or
        holds NaN or ``+-inf``, or ``reweight`` does not broadcast to
        ``(..., n, m)``, holds NaN or ``+-inf``, or (float64) overflows the
        dtype of the scores.

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
    v = as_float_array(v, "v", ("...", k.shape[-2], "v"), match=("k", k))
    if reweight is not None:
        reweight = as_float_array(reweight, "reweight")
        check_broadcastable(reweight, "reweight", shape, "the weights (..., n, m)")
        check_fits(reweight, "reweight", np.result_type(q, k))
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

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    num_heads : int
        ``h``, a divisor of ``d``.

    Returns
    -------
    ndarray, shape (..., h, n, d/h)

    Raises
    ------
    TypeError
        If ``x`` is not an array of real numbers or ``num_heads`` is not an integer.
    ValueError
        If ``x`` has fewer than 2 axes or holds NaN or ``+-inf``, or
        ``num_heads`` is not a positive divisor of ``d``.

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
    x = as_float_array(x, "x", ("...", "n", "d"))
    h = _num_heads(num_heads, x.shape[-1])
    x = x.reshape(*x.shape[:-1], h, x.shape[-1] // h)  # (..., n, h, k)
    return np.swapaxes(x, -2, -3)  # (..., h, n, k)


def merge_heads(x):
    """Concatenate heads back into features: ``(..., h, n, k) -> (..., n, h*k)``.

    The inverse of :func:`split_heads`.

    Parameters
    ----------
    x : array_like, shape (..., h, n, k)

    Returns
    -------
    ndarray, shape (..., n, h*k)

    Raises
    ------
    TypeError
        If ``x`` is not an array of real numbers.
    ValueError
        If ``x`` has fewer than 3 axes or holds NaN or ``+-inf``.
    """
    x = as_float_array(x, "x", ("...", "h", "n", "k"))
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

    Raises
    ------
    TypeError
        If ``x``, ``context``, a weight or a bias is not an array of real
        numbers, ``num_heads`` is not an integer, or ``mask`` is not boolean.
    ValueError
        If ``x`` is not ``(..., n, d)`` with ``d >= 1``, ``context`` not
        ``(..., m, d)``, a weight not ``(d, d)`` or a bias not ``(d,)`` (each
        named as passed: ``w_q``, ``b_k``...); if any of them holds NaN or
        ``+-inf``; if ``num_heads`` is not a positive divisor of ``d``; if
        ``mask`` does not broadcast to ``(..., n, m)``.

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
    x = as_float_array(x, "x", ("...", "n", "d"))
    d = x.shape[-1]
    if d == 0:
        raise ValueError(f"x must have at least one feature (d >= 1), got shape {x.shape}")
    context = x if context is None else as_float_array(context, "context", ("...", "m", d))
    h = _num_heads(num_heads, d)
    # Every parameter is checked here, under the caller's name, before linear() sees it.
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        as_float_array(w, name, (d, d))
    for name, b in (("b_q", b_q), ("b_k", b_k), ("b_v", b_v), ("b_o", b_o)):
        if b is not None:
            as_float_array(b, name, (d,))
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
