"""Scaled dot-product attention, single- and multi-head."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import (
    as_float_array,
    batch_shape,
    check_bool,
    check_broadcastable,
    check_choice,
    check_count,
    check_fits,
    check_mask,
    check_real,
)
from attncore._linear import linear
from attncore._softmax import NORMALIZERS, _shifted_exp, compute_dtype

#: Query rows per block in :func:`attention`: only the scores of one block,
#: ``(..., BLOCK_ROWS, m)``, exist at a time.
BLOCK_ROWS = 256


def attention_weights(
    q: ArrayLike,
    k: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    bias: ArrayLike | None = None,
    scale: float | None = None,
    normalize: str = "softmax",
    causal: bool = False,
) -> np.ndarray:
    r"""The attention matrix ``softmax(q k^T * scale + bias)`` over the keys.

    Parameters
    ----------
    q : array_like, shape (..., n, k)
        Queries, one per row.
    k : array_like, shape (..., m, k)
        Keys, one per row; the batch axes broadcast against those of ``q``.
    mask : array_like of bool, optional
        Broadcastable to ``(..., n, m)`` (a scalar too); ``True`` = query may
        attend key.  Masked weights are exactly 0; a query with no key left
        gets a row of 0.
    bias : array_like, optional
        Broadcastable to ``(..., n, m)``; added to the scaled scores before
        the softmax (a relative-position table, ALiBi, ...).  An entry
        ``-inf`` means "masked" (weight exactly 0, as with ``mask``); NaN and
        ``+inf`` are errors.
    scale : float, optional
        Multiplies ``q k^T``; ``1 / sqrt(k)`` by default.  A real number,
        finite in the compute dtype of the scores (``result_type(q, k)``,
        float32 for float16 input).
    normalize : {"softmax", "l2", "relu2", "none"}, optional
        How a row of scores ``s`` becomes a row of weights: ``"softmax"``,
        ``exp(s) / sum(exp(s))`` (rows sum to 1); ``"l2"``,
        ``exp(s) / ||exp(s)||_2`` (rows have unit Euclidean norm); ``"relu2"``,
        ``relu(s)**2 / m`` as in GAU; ``"none"``, ``exp(s)`` with no denominator.
    causal : bool, optional
        Query ``i`` may attend keys ``j <= i`` only, rows and columns aligned at
        the top left as in :func:`attncore.causal_mask` (``m != n`` allowed);
        combined with ``mask`` by "and".  The same as passing
        ``mask=causal_mask(n, m)``.

    Returns
    -------
    ndarray, shape (..., n, m)
        Row ``i`` holds the weights query ``i`` gives to every key.

    Raises
    ------
    TypeError
        If ``q``, ``k`` or ``bias`` is not an array of real numbers (bool,
        complex, strings), ``scale`` is not a real number, ``mask`` is not
        boolean, or ``causal`` is not ``True`` or ``False``.
    ValueError
        If ``q`` is not ``(..., n, k)``, ``k`` not ``(..., m, k)`` or their
        batch axes do not broadcast; if ``q`` or ``k`` holds NaN or ``+-inf``,
        or ``bias`` NaN or ``+inf``; if ``mask`` or ``bias`` does not
        broadcast to ``(..., n, m)``; if ``scale`` is not finite in the compute
        dtype of the scores, or ``q * scale`` overflows; if a float64 ``bias``
        overflows that compute dtype; if ``k = 0`` and no ``scale`` is
        given; if ``normalize`` is not one of :data:`attncore.NORMALIZERS`;
        if a score a query may attend, or a weight, overflows the dtype
        (scale the inputs down, or pass float64 arrays).

    See Also
    --------
    attention : the weights applied to the values, a block of rows at a time.
    causal_mask : the boolean mask that ``causal=True`` stands for.
    softmax : the ``"softmax"`` normalisation of one row.
    linear_attention_weights : the weights of linear attention, for comparison.

    Notes
    -----
    .. math::

        A = \mathrm{softmax}\!\left(s\, Q K^{\top} + B\right),
        \qquad s = 1/\sqrt{d_k},

    with the softmax over the last axis, shifted by each row's largest score,
    and masked entries set to :math:`-\infty` before it.  In einsum form
    (:func:`numpy.einsum`) the scores are ``einsum("...nk,...mk->...nm", q, k)``.
    Only ``"softmax"`` makes every row a probability distribution; the other
    normalisations are the remedies discussed in the chapter on relative
    position encodings.  The weights are computed in at least float32 and
    returned in the dtype of ``q`` and ``k``.

    References
    ----------
    :cite:t:`vaswani2017attention`: scaled dot-product attention.

    :cite:t:`hua2022transformer`: GAU, the origin of ``"relu2"`` (its pseudo-code
    squares ``relu(q . k / n + b)``; ``relu(s)**2 / m`` is the reading of
    :cite:t:`su2022flash`).

    :cite:t:`su2022relative`: the ``"l2"`` normalisation, proposed there as a
    remedy for relative position encodings.

    Examples
    --------
    Every row of the attention matrix is a probability distribution:

    >>> import numpy as np
    >>> from attncore import attention_weights
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(4, 8)), rng.normal(size=(6, 8))
    >>> a = attention_weights(q, k)
    >>> a.shape, bool(np.allclose(a.sum(axis=-1), 1.0))
    ((4, 6), True)
    """
    q, k, mask, bias, _, dtype = _prepare(q, k, mask, bias, scale, normalize)
    first = 0 if check_bool(causal, "causal") else None  # causal: query i attends keys j <= i
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is found and named below
        weights, denominators = _weights(_scores(q, k, mask, bias, first), normalize, k.shape[-2])
        weights /= denominators  # (..., n, m)
    return _finish(weights, dtype, "a weight", normalize)


def _prepare(q, k, mask, bias, scale, normalize):
    """Validate the arguments shared by the attention functions; scale ``q``.

    Returns ``(q * scale, k, mask, bias, shape of the scores, dtype of the result)``,
    with ``q * scale`` computed in :func:`attncore._softmax.compute_dtype` (so a
    float16 ``q`` is not rounded twice), ``k`` and ``bias`` in that dtype, and
    ``mask`` and ``bias`` with at least two axes.
    """
    q = as_float_array(q, "q", ("...", "n", "k"))
    k = as_float_array(k, "k", ("...", "m", q.shape[-1]), match=("q", q))
    shape = batch_shape(("q", q, 2), ("k", k, 2)) + (q.shape[-2], k.shape[-2])
    dtype = np.result_type(q, k)  # the dtype of the scores
    work = compute_dtype(q, k)  # the dtype they are computed in
    if scale is None:
        if q.shape[-1] == 0:
            raise ValueError(
                f"q and k have width k = 0 (q of shape {q.shape}), so the default scale "
                "1/sqrt(k) is undefined; pass scale explicitly or give them features"
            )
        scale = 1.0 / math.sqrt(q.shape[-1])
    else:
        scale = float(check_real(scale, "scale", work))
    check_choice(normalize, "normalize", NORMALIZERS)
    if mask is not None:
        mask = np.atleast_2d(check_mask(mask, shape, "the scores (..., n, m)"))
    if bias is not None:
        # -inf in the bias is a documented "masked"; NaN and +inf are errors.
        bias = as_float_array(bias, "bias", finite="-inf")
        check_broadcastable(bias, "bias", shape, "the scores (..., n, m)")
        check_fits(bias, "bias", work)
        bias = np.atleast_2d(bias.astype(work, copy=False))
    # Scaling q (n x k numbers) is cheaper than scaling the scores (n x m).
    with np.errstate(over="ignore"):
        scaled = q.astype(work, copy=False) * work.type(scale)
    if not np.all(np.isfinite(scaled)):
        raise ValueError(f"q * scale overflows {work} (scale = {scale:.4g}, q of shape {q.shape}); scale q down")
    return scaled, k.astype(work, copy=False), mask, bias, shape, dtype


def attention(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    bias: ArrayLike | None = None,
    scale: float | None = None,
    normalize: str = "softmax",
    reweight: ArrayLike | None = None,
    causal: bool = False,
) -> np.ndarray:
    r"""Scaled dot-product attention ``softmax(q k^T * scale + bias) v``.

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
    causal : bool, optional
        As in :func:`attention_weights`: keys ``j <= i`` only.  The keys after
        the last query of a block are never computed.

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
        compute dtype of the scores; if the output overflows its dtype (scale
        ``v`` or ``reweight`` down, or pass float64 arrays).

    See Also
    --------
    attention_weights : the ``(..., n, m)`` weights themselves.
    multi_head_attention : projections and heads around this function.
    linear_attention : the O(n) approximation with a feature map.
    shaw_attention : relative position embeddings added to keys and values.

    Notes
    -----
    .. math::

        \mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^{\top}}{\sqrt{d_k}} + B\right) V,

    in einsum form (:func:`numpy.einsum`) ``einsum("...nm,...mv->...nv", weights, v)``.
    Query rows are independent, so the output is computed :data:`BLOCK_ROWS`
    rows at a time (:cite:t:`rabe2021self`): only one block of scores, of shape
    ``(..., BLOCK_ROWS, m)``, exists at once.  With ``causal=True`` a block of
    rows ``i0:i1`` computes the keys ``0:i1`` only.  With no keys (``m = 0``)
    every output row is 0, as for a query whose keys are all masked.  float16
    input is computed in float32 and rounded once (see
    :func:`attncore._softmax.compute_dtype`).

    References
    ----------
    :cite:t:`vaswani2017attention`: scaled dot-product attention.

    :cite:t:`luo2022your`: URPE, the weights times a Toeplitz matrix (``reweight``).

    :cite:t:`rabe2021self`: attention computed a chunk of queries at a time;
    :cite:t:`dao2022flashattention` also split the keys, with a running
    maximum and sum per row, which whole rows of scores do not need.

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
    q, k, mask, bias, shape, dtype = _prepare(q, k, mask, bias, scale, normalize)
    causal = check_bool(causal, "causal")
    v = as_float_array(v, "v", ("...", k.shape[-2], "v"), match=("k", k))
    dtype = np.result_type(dtype, v)  # of the result, computed in at least float32
    if reweight is not None:
        reweight = as_float_array(reweight, "reweight")
        check_broadcastable(reweight, "reweight", shape, "the weights (..., n, m)")
        check_fits(reweight, "reweight", q.dtype)
        reweight = np.atleast_2d(reweight)  # multiplies the numerators in place, in their dtype
    work, (n, m) = compute_dtype(q, v), shape[-2:]
    q, k, v = (a.astype(work, copy=False) for a in (q, k, v))
    out = np.empty(batch_shape(("q", q, 2), ("k", k, 2), ("v", v, 2)) + (n, v.shape[-1]), dtype=work)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is found and named below
        for start in range(0, n, BLOCK_ROWS):
            rows = slice(start, min(start + BLOCK_ROWS, n))  # a block of query rows
            keys = slice(0, min(rows.stop, m) if causal else m)  # causal: no key after the block's last query (nor m)
            blocks = [None if a is None else _block(a, rows, keys) for a in (mask, bias, reweight)]  # (rows, keys)
            out[..., rows, :] = _attention_rows(q[..., rows, :], k[..., keys, :], v[..., keys, :], *blocks,
                                                normalize, m, first=start if causal else None)
    return _finish(out, dtype, "the output", normalize)


def _attention_rows(q, k, v, mask, bias, reweight, normalize, m, first=None):
    """Attention of one block of query rows ``q`` (..., b, k) over the keys ``k`` (..., keys, k);
    ``first`` as in :func:`_scores`.  Only this block's scores exist while it runs."""
    numerators, denominators = _weights(_scores(q, k, mask, bias, first), normalize, m)  # (..., b, keys)
    if reweight is not None:
        numerators *= reweight
    return (numerators @ v) / denominators  # (..., b, v): divide the d_v numbers of a row, not its weights


def _scores(q, k, mask, bias, first=None):
    """The scores ``q k^T + bias`` (``q`` already scaled), ``-inf`` where a query may not
    attend a key: ``mask`` False, and with ``first`` (causal, query rows ``first:``) every
    key after the query."""
    scores = q @ np.swapaxes(k, -1, -2)  # (..., b, keys): one block of query rows
    if bias is not None:
        scores = scores + bias
    _check_scores(scores, q, k, mask, bias, first)  # ValueError if an allowed score overflowed (a removed NaN -> -inf)
    if mask is not None:
        np.copyto(scores, -np.inf, where=~mask)  # a key a query may not attend: weight exp(-inf) = 0
    if first is not None:  # causal: keys before `first` precede every query of the block
        square = scores[..., first:]  # (..., b, keys - first), a view: row r is query first + r, column j key first + j
        allowed = np.tri(*square.shape[-2:], dtype=bool)  # [r, j]: True where key j <= query r, its lower triangle
        np.copyto(square, -np.inf, where=~allowed)  # key first + j after query first + r: removed
    return scores


def _weights(scores, normalize, m):
    """Rows of scores (``-inf`` = masked) to ``(numerators, denominators)``, overwriting
    ``scores``: the weights are their ratio, 0 in a row with nothing to attend."""
    if normalize == "relu2":
        return np.maximum(scores, 0, out=scores) ** 2, max(m, 1)  # GAU: relu(s)^2 / m, m all the keys
    if normalize == "none":
        return np.exp(scores, out=scores), 1  # no denominator, so no shift either
    e = _shifted_exp(scores)  # exp(s - max s) row by row, as in the softmax: the largest is 1
    if normalize == "softmax":
        total = e @ np.ones((e.shape[-1], 1), e.dtype)  # (..., n, 1): the row sums, as a product (BLAS)
    else:
        total = np.sqrt(np.sum(e * e, axis=-1, keepdims=True))  # l2: the row norms
    return e, np.where(total > 0, total, 1)  # softmax: sum >= 1; l2: norm >= 1; 0 only for an empty row


def _check_scores(scores, q, k, mask, bias, first):
    """Raise ``ValueError`` if a score that a query may attend overflowed (``+-inf`` or NaN).

    Usually a bound decides it without looking at the scores: with no bias,
    ``|q_i . k_j| <= k max|q| max|k|`` (``k`` features), and below half the
    largest number of the dtype no score can overflow, rounding included.
    Otherwise two reductions over the scores decide the usual case, and only
    then is every entry looked at, since ``-inf`` in ``bias`` and the entries
    ``mask`` and ``first`` (causal, as in :func:`_scores`) remove may be
    anything.  A removed entry that is NaN (an overflow plus a bias of
    ``-inf``) becomes ``-inf``.
    """
    if bias is None and _score_bound(q, k) < np.finfo(scores.dtype).max / 2 or _all_finite(scores):
        return
    bad = ~np.isfinite(scores)
    if bias is not None:
        bad &= bias != -np.inf  # -inf in the bias: masked, not an overflow
    if mask is not None:
        bad = bad & mask
    if first is not None:
        bad[..., first:] &= np.tril(np.ones(bad[..., first:].shape[-2:], bool))
    if np.any(bad):
        raise ValueError(
            f"the scores q k^T * scale + bias overflow {scores.dtype}; "
            f"scale q, k or bias down{_WIDER if scores.dtype.itemsize < 8 else ''}"
        )
    np.copyto(scores, -np.inf, where=np.isnan(scores))  # an overflow plus a bias of -inf: removed


def _score_bound(q, k):
    """An upper bound on every ``|q_i . k_j|``: ``k max|q| max|k|``, in Python floats (float64),
    from two reductions of each array (``np.abs`` would copy it)."""
    q_max, k_max = (max(float(np.max(a, initial=0)), -float(np.min(a, initial=0))) for a in (q, k))
    return q.shape[-1] * q_max * k_max


def _all_finite(a):
    """No ``+-inf`` or NaN in ``a``: two reductions, no array of booleans."""
    return a.size == 0 or bool(np.isfinite(a.min()) and np.isfinite(a.max()))


def _block(a, rows, keys):
    """The block ``(rows, keys)`` of an array that broadcasts to ``(..., n, m)``: a row axis of
    length 1 broadcasts and is not sliced; ``keys`` starts at 0, which a key axis of length 1 keeps."""
    return a[..., rows if a.shape[-2] > 1 else slice(None), keys]


def _finish(result, dtype, what, normalize):
    """``result`` rounded to the result's ``dtype``; ``ValueError`` if it overflowed."""
    with np.errstate(over="ignore"):
        result = result.astype(dtype, copy=False)
    if not _all_finite(result):
        cause = 'a score is too large for exp without a denominator (normalize="none"): ' if normalize == "none" else ""
        raise ValueError(
            f"{cause}{what} of attention overflows {result.dtype}; scale the scores (q, k, bias) "
            f"or v and reweight down{_WIDER if result.dtype.itemsize < 8 else ''}"
        )
    return result


_WIDER = ", or pass float64 arrays"


def split_heads(x: ArrayLike, num_heads: int) -> np.ndarray:
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

    See Also
    --------
    merge_heads : the inverse.
    multi_head_attention : attention over the heads this function makes.

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
    return _split_heads(x, _num_heads(num_heads, x.shape[-1]))  # (..., h, n, k)


def merge_heads(x: ArrayLike) -> np.ndarray:
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

    See Also
    --------
    split_heads : the inverse.
    multi_head_attention : where the heads are concatenated.
    """
    return _merge_heads(as_float_array(x, "x", ("...", "h", "n", "k")))  # (..., n, h*k)


def multi_head_attention(
    x: ArrayLike,
    w_q: ArrayLike,
    w_k: ArrayLike,
    w_v: ArrayLike,
    w_o: ArrayLike,
    num_heads: int,
    *,
    b_q: ArrayLike | None = None,
    b_k: ArrayLike | None = None,
    b_v: ArrayLike | None = None,
    b_o: ArrayLike | None = None,
    context: ArrayLike | None = None,
    mask: ArrayLike | None = None,
    causal: bool = False,
) -> np.ndarray:
    r"""Multi-head attention of ``x`` over itself, or over ``context``.

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
    causal : bool, optional
        Token ``i`` attends tokens ``j <= i`` only (see :func:`attention`).

    Returns
    -------
    ndarray, shape (..., n, d)

    Raises
    ------
    TypeError
        If ``x``, ``context``, a weight or a bias is not an array of real
        numbers, ``num_heads`` is not an integer, ``mask`` is not boolean or
        ``causal`` is not ``True`` or ``False``.
    ValueError
        If ``x`` is not ``(..., n, d)`` with ``d >= 1``, ``context`` not
        ``(..., m, d)``, a weight not ``(d, d)`` or a bias not ``(d,)`` (each
        named as passed: ``w_q``, ``b_k``...); if any of them holds NaN or
        ``+-inf``; if ``num_heads`` is not a positive divisor of ``d``; if
        ``mask`` does not broadcast to ``(..., n, m)``.

    See Also
    --------
    attention : the attention of each head.
    split_heads : the column blocks of the heads.
    merge_heads : the heads concatenated again.
    transformer_block : the block built around this layer.

    Notes
    -----
    With :math:`Q = XW_Q + b_Q`, :math:`K = CW_K + b_K`, :math:`V = CW_V + b_V`
    (``C`` the context) split column-wise into ``h`` blocks of width
    :math:`d_k = d/h`,

    .. math::

        \mathrm{MHA}(X) = \left[\mathrm{head}_1, \dots, \mathrm{head}_h\right] W_O + b_O,
        \qquad \mathrm{head}_i = \mathrm{Attention}(Q_i, K_i, V_i).

    References
    ----------
    :cite:t:`vaswani2017attention`: multi-head attention.

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
    x, context, _, h, mask, causal = _mha_args(x, (w_q, w_k, w_v, w_o), num_heads, (b_q, b_k, b_v, b_o), context, mask, causal)
    q = split_heads(linear(x, w_q, b_q, name="w_q"), h)  # (..., h, n, k)
    k = split_heads(linear(context, w_k, b_k, name="w_k"), h)  # (..., h, m, k)
    v = split_heads(linear(context, w_v, b_v, name="w_v"), h)  # (..., h, m, k)
    heads = attention(q, k, v, mask=mask, causal=causal)  # (..., h, n, k)
    return linear(merge_heads(heads), w_o, b_o, name="w_o")  # (..., n, d)


def _mha_args(x, weights, num_heads, biases, context, mask, causal):
    """Validate the arguments of :func:`multi_head_attention`, each under the caller's name.

    Returns ``(x, context, weights and biases, h, mask, causal)``: ``context`` is ``x`` in
    self-attention, the eight parameters are arrays (a bias may be None) in the order
    ``w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o``, and ``mask`` is ``(..., 1, n, m)``, the same for every head.
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    d = x.shape[-1]
    if d == 0:
        raise ValueError(f"x must have at least one feature (d >= 1), got shape {x.shape}")
    context = x if context is None else as_float_array(context, "context", ("...", "m", d))
    causal = check_bool(causal, "causal")
    # Every parameter is checked here, under the caller's name, before linear() sees it, and before
    # num_heads: a width that x and the weights disagree on is their fault, not the number of heads'.
    params = [as_float_array(w, name, (d, d)) for name, w in zip(("w_q", "w_k", "w_v", "w_o"), weights)]
    params += [None if b is None else as_float_array(b, name, (d,)) for name, b in zip(("b_q", "b_k", "b_v", "b_o"), biases)]
    h = _num_heads(num_heads, d)
    shape = batch_shape(("x", x, 2), ("context", context, 2)) + (x.shape[-2], context.shape[-2])
    if mask is not None:
        mask = check_mask(mask, shape, "the scores (..., n, m)")
        mask = np.expand_dims(np.broadcast_to(mask, shape), -3)  # (..., 1, n, m)
    return x, context, params, h, mask, causal


def _split_heads(x, h):
    """:func:`split_heads` of a checked array: ``(..., n, d) -> (..., h, n, d/h)``."""
    x = x.reshape(*x.shape[:-1], h, x.shape[-1] // h)  # (..., n, h, k)
    return np.swapaxes(x, -2, -3)  # (..., h, n, k)


def _merge_heads(x):
    """:func:`merge_heads` of a checked array: ``(..., h, n, k) -> (..., n, h*k)``."""
    x = np.swapaxes(x, -2, -3)  # (..., n, h, k)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])  # (..., n, h*k)


def _num_heads(num_heads, d):
    h = check_count(num_heads, "num_heads")
    if d % h:
        raise ValueError(f"num_heads must be a positive divisor of the width d = {d}, got {h}")
    return h
