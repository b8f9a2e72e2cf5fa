"""Scaled dot-product attention, single- and multi-head."""

from __future__ import annotations

import functools
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
from attncore._softmax import (
    NORMALIZERS,
    _normalize_inplace,
    _numerators_inplace,
    _shifted_exp_inplace,
    compute_dtype,
)


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
        Broadcastable to ``(..., n, m)``; ``True`` = query may attend key.
        Masked weights are exactly 0; a query with no key left gets a row of 0.
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
        ``mask=causal_mask(n, m)``, without building the mask.

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
        given; if ``normalize`` is not one of :data:`attncore.NORMALIZERS`.

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

    with the softmax over the last axis and masked entries removed before it.
    In einsum form (:func:`numpy.einsum`) the scores are ``einsum("...nk,...mk->...nm", q, k)``.
    Only ``"softmax"`` makes every row a probability distribution; the other
    normalisations are the remedies discussed in the chapter on relative
    position encodings.  The weights are computed in at least float32 and
    returned in the dtype of ``q`` and ``k``; with ``"none"``, a weight
    :math:`e^{s}` too large for that dtype raises ``ValueError`` (see
    :func:`attention`, Notes, for the numerics of every normalisation).

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
    q, k, mask, bias, shape, dtype = _prepare(q, k, mask, bias, scale, normalize)
    if check_bool(causal, "causal"):
        future = _future(0, shape[-2], 0, shape[-1])  # (n, m): True where key j > query i
        mask = ~future if mask is None else mask & ~future
    k = k.astype(q.dtype, copy=False)
    bias = None if bias is None else bias.astype(q.dtype, copy=False)
    q, bias, temperature, wider = _fit_scores(q, k, bias, _log_score_bound(q, k, bias))
    if wider is None:
        scores = np.matmul(q, np.swapaxes(k, -1, -2))  # (..., n, m)
        if bias is not None:
            scores += bias
    else:
        scores = np.empty(shape, dtype=q.dtype)  # (..., n, m)
        removed = None if mask is None else np.logical_not(mask)
        _wide_scores(scores, q, np.swapaxes(k, -1, -2), bias, removed, wider, normalize in SHIFT_INVARIANT)
    weights = _normalize_inplace(scores, normalize, mask=mask, temperature=temperature)
    return _finish(weights, dtype, normalize)


def _prepare(q, k, mask, bias, scale, normalize):
    """Validate the arguments shared by the attention functions; scale ``q``.

    Returns ``(q * scale, k, mask, bias, shape of the scores, dtype of the result)``,
    with ``q * scale`` computed in :func:`attncore._softmax.compute_dtype` (so a
    float16 ``q`` is not rounded twice).
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
        mask = check_mask(mask, shape, "the scores (..., n, m)")
    if bias is not None:
        # -inf in the bias is a documented "masked"; NaN and +inf are errors.
        bias = as_float_array(bias, "bias", finite="-inf")
        check_broadcastable(bias, "bias", shape, "the scores (..., n, m)")
        check_fits(bias, "bias", work)
    # Scaling q (n x k numbers) is cheaper than scaling the scores (n x m).
    with np.errstate(over="ignore"):
        scaled = q.astype(work, copy=False) * work.type(scale)
    if not np.all(np.isfinite(scaled)):
        raise ValueError(f"q * scale overflows {work} (scale = {scale:.4g}, q of shape {q.shape}); scale q down")
    return scaled, k, mask, bias, shape, dtype


def _rows(a, start, stop, n):
    """Rows ``start:stop`` of an array that broadcasts to ``(..., n, m)``."""
    if a is None or a.ndim < 2 or a.shape[-2] != n:
        return a  # broadcast along the rows: the same for every block
    return a[..., start:stop, :]


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
        As in :func:`attention_weights`: keys ``j <= i`` only.  Faster than an
        equal boolean ``mask``, since nothing is read to find the removed keys.

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
        compute dtype of the scores.

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

    in einsum form (:func:`numpy.einsum`) ``einsum("...nm,...mv->...nv", weights, v)``.  With no keys
    (``m = 0``) every output row is 0, as for a query whose keys are all masked;
    :func:`attention_weights` then returns an ``(..., n, 0)`` array and
    :func:`attncore.linear_attention` returns 0 too.

    *Numerics.*  float16 input is computed in float32 and rounded once (see
    :func:`attncore._softmax.compute_dtype`).  The output is computed as
    :math:`O = (E \odot R)(2^g V) / (2^g D)` with :math:`E_{ij} = e^{s_{ij} - c_i}`,
    :math:`D` the row sums (``"softmax"``) or norms (``"l2"``) of :math:`E`,
    :math:`R` the reweighting and :math:`2^g` an exact power of two, so the
    ``(n, m)`` weights are never divided.  Let :math:`B \ge |s_{ij}|` be
    :math:`\max_i\|q_i\| \max_j\|k_j\| + \max|b|` (Cauchy-Schwarz),
    :math:`W = \max|R|`, :math:`U = \max|V|`, :math:`M` and :math:`T` the largest
    and the smallest normal float.  The *shifted* route takes :math:`c_i = \max_j s_{ij}`:
    then :math:`E_{ij} \le 1 \le D_i \le m` and every partial sum of the
    product is at most :math:`m W U 2^g`, so :math:`g = 0`; only a block whose
    output then overflows (possible only when :math:`m W U > M/e`) is computed
    again with the :math:`g < 0` that brings the bound below :math:`M/e`, so that
    small products are not scaled into the subnormals in advance.  The *unshifted*
    route, :math:`c_i = 0`, saves two passes over the scores and is taken only
    when

    .. math::

        B \le -\ln T - 1 \quad\text{and}\quad
        \ln m + B + g \ln 2 + \max(0, \ln WU) \le \ln M - 1,
        \qquad g = \lceil B / \ln 2 \rceil,

    (for ``"l2"`` also :math:`2B \le -\ln T - 1` and :math:`\ln m + 2B \le \ln M - 1`).
    The first inequality makes every :math:`e^{s}` a normal number, so no row
    underflows to 0 and :math:`D` is as accurate as in the shifted route; the
    second bounds :math:`D_i 2^g`, every partial sum of :math:`(E \odot R)(2^g V)`,
    :math:`E \odot R 2^g` and :math:`2^g V` by :math:`M/e` (with ``reweight``,
    :math:`\ln WU` is replaced by :math:`\ln W + \max(0, \ln U)`, since
    :math:`E \odot R` is formed first); and :math:`2^g \ge e^{B} \ge e^{-c_i}` makes
    each product :math:`E_{ij} R_{ij} 2^g V_{jc}` at least as large in magnitude as
    in the shifted route, so nothing underflows that the shifted route keeps
    (without ``reweight`` and with :math:`\min|V| \ge e^{B+1} T`, no product can
    underflow at all and :math:`g = 0` saves scaling :math:`V`).
    When :math:`B` comes within :math:`e^2` of :math:`M`, the scores are formed
    in a wider dtype whose range holds every score of the work dtype's numbers
    (float64 for float32 work; long double for float64 where ``finfo`` shows it
    wider): the bias is added and the removed keys set to :math:`-\infty`
    there, each ``"softmax"`` or ``"l2"`` row is shifted by its largest
    remaining score, and only the shifted scores, all :math:`\le 0`, are
    rounded to the work dtype (one below its range to :math:`-\infty`, whose
    :math:`e^{s} = 0` is the correctly rounded value) for the shifted route.
    This is exact to the rounding of the work dtype: nothing overflows or
    underflows in the wide dtype, whose products and sums are rounded with a
    smaller eps (float32 products are even exact in float64), and the shift
    changes no weight (shift invariance), so the shifted scores reach the work
    dtype at least as accurate as the ordinary path's scores.  ``"relu2"`` and
    ``"none"`` are not shifted (a shift changes them): their scores are
    rounded as they are, one beyond the range to :math:`\pm\infty` where the
    exact :math:`e^{s}` or :math:`\mathrm{relu}(s)^2/m` (:math:`m < M`) is
    beyond it too.  Only where no wider dtype
    exists (float64 where long double is float64, and long double input) are
    ``q`` and ``bias`` divided by a power of two instead and the shifted
    exponent multiplied back; an entry of ``q`` that underflows there is lost
    (see ``_fit_scores``).  For ``"softmax"`` without ``reweight`` the
    denominators :math:`D_i 2^g` are computed as one more column of the value
    product (``v`` with a column :math:`2^g` appended): the same sums, rounded
    as the product's other columns are (at most :math:`m` eps relative).
    ``"none"`` has no denominator: if
    :math:`e^{s}` or the output overflows the result's dtype, the function
    raises ``ValueError`` rather than return ``inf``; an :math:`e^{s}` below
    the smallest float is 0, its correctly rounded value.

    *Blocks.*  The output is computed a block of query rows at a time in each
    (batch, head) slice, with as many rows as fit :data:`BLOCK_BYTES` of
    scores for one slice, so that the number of heads never shrinks the
    products (heads small enough are grouped into one block).  With ``mask``
    or ``causal``, a block computes only the keys ``lo:hi`` between the first
    and the last key that one of its rows may attend: every other key's weight
    is exactly 0 in both routes (:math:`e^{-\infty} = 0`), so the sums and
    products are those of the whole row less exact zeros, and every bound
    above holds with the smaller number of keys.  Inside the block, the keys
    ``causal`` removes get the score :math:`-\infty`, like a bias of
    :math:`-\infty`.  A block whose rows may attend no key is 0.  With
    ``causal`` and :math:`n = m`, the blocks compute about
    :math:`(1 + 1/b)/2` of the scores for :math:`b` blocks
    (:data:`SKIP_BLOCKS`).  ``"relu2"`` divides by :math:`m` itself and so
    computes every key.

    References
    ----------
    :cite:t:`vaswani2017attention`: scaled dot-product attention.

    :cite:t:`luo2022your`: URPE, the weights times a Toeplitz matrix (``reweight``).

    :cite:t:`rabe2021self`: attention computed a chunk of queries at a time, so
    that only one chunk of scores exists at once.  They (and
    :cite:t:`dao2022flashattention`, in FlashAttention) also split the keys
    and keep a running maximum and sum per row; the blocks here hold whole rows
    of scores and need neither.

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

    ``causal=True`` is the boolean causal mask, without the mask:

    >>> from attncore import causal_mask
    >>> bool(np.allclose(attention(q, k, v, causal=True), attention(q, k, v, mask=causal_mask(3, 5))))
    True
    """
    q, k, mask, bias, shape, dtype = _prepare(q, k, mask, bias, scale, normalize)
    causal = check_bool(causal, "causal")
    v = as_float_array(v, "v", ("...", k.shape[-2], "v"), match=("k", k))
    if reweight is not None:
        reweight = as_float_array(reweight, "reweight")
        check_broadcastable(reweight, "reweight", shape, "the weights (..., n, m)")
        check_fits(reweight, "reweight", np.result_type(q, k))
    batch = batch_shape(("q", q, 2), ("k", k, 2), ("v", v, 2))
    n, m = shape[-2], shape[-1]
    dtype = np.result_type(dtype, v)  # of the result; the work is done in `work`
    work = compute_dtype(q, v)
    q, k, v = (a.astype(work, copy=False) for a in (q, k, v))
    bias, reweight = (None if a is None else a.astype(work, copy=False) for a in (bias, reweight))
    out = np.empty(batch + (n, v.shape[-1]), dtype=work)  # (..., n, v)
    log_bound = _log_score_bound(q, k, bias)
    q, bias, temperature, wider = _fit_scores(q, k, bias, log_bound)
    shift, gain, rescue = True, 0, 0
    if normalize in ("softmax", "l2") and m > 0 and v.size:
        # Powers of two that scale v (or reweight) and the denominators alike: see Notes.
        log_vmin, log_values = _log_abs_range(v)
        if reweight is not None:
            # e^s reweight is formed before the product with v: bound it even where v is small or 0.
            log_vmin, log_values = -math.inf, max(log_values, 0.0) + _log_max_abs(reweight)
        shift, gain = _plan(log_bound if temperature == 1.0 else math.inf, m, log_values, normalize, work)
        if shift:
            # Scale the values down only for a block whose output overflows: scaling them
            # in advance would push products that are merely small into the subnormals.
            rescue, gain = gain, 0
        if not shift and log_vmin >= _limits(work)[1] + math.exp(log_bound) + 1:
            # min |v| >= e T e^B: no product e^s v can underflow, and 2**gain is not needed.
            gain = 0
        if gain and reweight is not None:
            reweight = np.ldexp(reweight, gain)
        elif gain:
            v = np.ldexp(v, gain)

    # Query rows are independent, and so are the (batch, head) slices: each block is
    # `rows` query rows of `group` whole slices of the last batch axis (the heads).
    # The row count depends on m alone, never on the number of heads, so every block
    # is a GEMM as large as in the single-head case; small heads are grouped instead.
    rows, group = _block_layout(n, m, batch[-1] if batch else 1, work.itemsize, causal or mask is not None)
    # One flat score buffer for all blocks: a fresh array per block would cost page faults.
    buffer = np.empty(group * rows * m, dtype=work)
    k_t = np.swapaxes(k, -1, -2)  # (..., k, m)
    if n >= 1024:  # laid out as (k, m) rows the score GEMM is a plain NN product, some 5-10% faster
        k_t = np.ascontiguousarray(k_t)  # worth its copy once there are enough query rows
    skip = normalize != "relu2"  # relu2 divides by m itself: it needs every key's column
    # softmax without reweight: a column 2**gain appended to v makes the product with the
    # numerators carry their row sums times 2**gain too, which saves a pass over the scores.
    fused = normalize == "softmax" and reweight is None and m > 0
    if fused:
        v = np.concatenate([v, np.full(v.shape[:-1] + (1,), np.ldexp(work.type(1), gain))], axis=-1)  # (..., m, v+1)
        wide = np.empty(group * rows * v.shape[-1], dtype=work)  # the (..., rows, v+1) products

    def block(outer, heads, start):
        stop = min(start + rows, n)
        part = functools.partial(_part, batch=batch, outer=outer, heads=heads)
        q_b, k_b, v_b = part(q)[..., start:stop, :], part(k_t), part(v)
        mask_b, bias_b, reweight_b = (_rows(part(a), start, stop, n) for a in (mask, bias, reweight))
        out_b = out[outer + (heads,) if batch else ()][..., start:stop, :]  # (g, rows, v) or (rows, v)
        # Keys lo:hi hold every key any of these rows may attend; the others get weight
        # exactly 0 (a masked key's e^s is 0 in both routes), so they are never computed.
        lo, hi = 0, m
        if causal and skip:
            hi = min(stop, m)  # query i attends keys j <= i
        if mask_b is not None and skip and mask_b.shape[-1] == m > 0:
            kept = np.flatnonzero(np.any(mask_b, axis=tuple(range(mask_b.ndim - 1))))  # (m,) reduced
            lo, hi = (int(kept[0]), min(hi, int(kept[-1]) + 1)) if kept.size else (0, 0)
        if m > 0 and hi <= lo:
            out_b[...] = 0  # every key of every row is masked: the documented 0 rows
            return
        if (lo, hi) != (0, m):
            k_b, v_b = k_b[..., lo:hi], v_b[..., lo:hi, :]
            mask_b, bias_b, reweight_b = (a if a is None or a.shape[-1] == 1 else a[..., lo:hi]
                                          for a in (mask_b, bias_b, reweight_b))
        keys = hi - lo
        scores_shape = np.broadcast_shapes(*(a.shape[:-2] for a in (q_b, k_b, mask_b, bias_b, reweight_b)
                                             if a is not None and a.ndim > 2))
        scores = buffer[: math.prod(scores_shape) * (stop - start) * keys].reshape(
            scores_shape + (stop - start, keys))  # (..., rows, keys), contiguous
        if wider is None:
            np.matmul(q_b, k_b, out=scores)
            if bias_b is not None:
                scores += bias_b
        else:
            # The bound overflows: form the scores in `wider`, removing the masked and the causal keys
            # before the row maximum is taken (only the keys a row may attend may set its shift).
            removed = None if mask_b is None else np.logical_not(mask_b)
            if causal:
                future = _future(start, stop, lo, hi)  # (rows, keys)
                removed = future if removed is None else removed | future
            _wide_scores(scores, q_b, k_b, bias_b, removed, wider, normalize in SHIFT_INVARIANT)
        if causal:
            first = max(start + 1, lo)  # the first key that a row of this block may not attend
            if first < hi:  # as a bias of -inf there: weight exactly 0, in either route
                np.copyto(scores[..., first - lo:], -np.inf, where=_future(start, stop, first, hi))
        # The per-row division is applied to the (rows, v) output, not the (rows, m) weights.
        if fused:
            numerators, denominator = _shifted_exp_inplace(
                scores, -1, mask=mask_b, shift=shift, temperature=temperature), None
        else:
            numerators, denominator = _numerators_inplace(
                scores, normalize, mask=mask_b, shift=shift, temperature=temperature)
        if reweight_b is not None:
            numerators *= reweight_b
        product = out_b if not fused else wide[: math.prod(out_b.shape[:-1]) * v.shape[-1]].reshape(
            out_b.shape[:-1] + (v.shape[-1],))  # (..., rows, v) or (..., rows, v+1)
        with np.errstate(over="ignore", invalid="ignore"):
            np.matmul(numerators, v_b, out=product)
        scaled = gain
        if rescue and not np.all(np.isfinite(product)):
            # Shifted weights are <= 1, so only m max|reweight| max|v| can overflow: retry with v * 2**rescue.
            np.matmul(numerators, np.ldexp(v_b, rescue), out=product)
            scaled = rescue
        if fused:
            # The last column is D 2**scaled (D >= 1 unless every key of the row is masked,
            # and then the row of products is 0 too).
            denominator = product[..., -1:]
            np.divide(product[..., :-1], np.where(denominator > 0, denominator, 1), out=out_b)
            return
        if denominator is not None:
            if scaled:
                denominator = np.ldexp(denominator, scaled)
            np.divide(out_b, denominator, out=out_b, where=denominator > 0)

    heads_total = batch[-1] if batch else 1
    for outer in np.ndindex(batch[:-1]):
        for h in range(0, heads_total, group):
            for start in range(0, n, rows):
                block(outer, slice(h, min(h + group, heads_total)), start)
    return _finish(out, dtype, normalize)


#: Score bytes per block of query rows in ``attention``: small enough for the
#: block to stay in cache between the score, softmax and value passes.
BLOCK_BYTES = 1 << 22

#: With a mask or ``causal``, a block of query rows skips the keys that none of its
#: rows may attend; at least this many blocks make that skipping fine-grained (a
#: causal mask then costs about (1 + 1/blocks) / 2 of the full scores) ...
SKIP_BLOCKS = 16
#: ... as long as a block keeps this many rows (smaller GEMMs run below the BLAS peak).
SKIP_MIN_ROWS = 64


def _future(start, stop, lo, hi):
    """``(stop - start, hi - lo)`` booleans: True where key ``lo + c`` comes after query
    ``start + r`` (the entries a causal mask removes, rows and columns aligned at the top left)."""
    return np.arange(lo, hi)[None, :] > np.arange(start, stop)[:, None]


def _block_layout(n, m, heads, itemsize, sparse):
    """``(rows, group)``: query rows per block and slices of the last batch axis per block.

    ``rows`` fills :data:`BLOCK_BYTES` with ``m`` scores per row, whatever the number
    of heads; with a mask (``sparse``) it is cut to about ``n / SKIP_BLOCKS``.  When
    one slice's block is smaller than the budget, ``group`` slices share it.
    """
    rows = max(1, min(n, BLOCK_BYTES // max(1, m * itemsize)))
    if sparse:
        rows = min(rows, max(SKIP_MIN_ROWS, -(-n // SKIP_BLOCKS)))
    group = max(1, min(heads, BLOCK_BYTES // max(1, rows * m * itemsize)))
    return rows, group


def _part(a, *, batch, outer, heads):
    """The block of ``a`` (batch axes aligned right with ``batch``, then two more) at
    the index ``outer`` of all batch axes but the last and ``heads`` (a slice) of the
    last; an axis of length 1 broadcasts.  A view; ``a`` without batch axes is returned."""
    if a is None or a.ndim <= 2:
        return a
    own = a.ndim - 2  # batch axes of a: the last `own` of `batch`
    index = []
    for axis in range(own):
        j = len(batch) - own + axis
        if j < len(batch) - 1:
            index.append(0 if a.shape[axis] == 1 else outer[j])
        else:
            index.append(slice(0, 1) if a.shape[axis] == 1 else heads)
    return a[tuple(index)]


def _limits(dtype):
    """``(log max, log tiny, eps)`` of a floating dtype, as Python floats.

    Not cached: numpy caches ``finfo``, two logarithms cost a microsecond, and a
    cache would hide a wrong limit from the tests that run after the first call
    (mutation testing found every mutant of these lines alive behind one).
    """
    info = np.finfo(dtype)
    return _log_beyond_float(info.max), _log_beyond_float(info.tiny), float(info.eps)


def _log_beyond_float(a):
    """``log(a) > -inf`` as a Python float, also for long double's extremes (inf or 0 as a float)."""
    f = float(a)
    return math.log(f) if 0 < f < math.inf else float(np.log(a))


def _log(a):
    """``log(a)`` as a Python float (``-inf`` for 0), for any floating scalar.

    Taken in double precision (or in the scalar's own dtype where it is wider):
    a float32 logarithm is rounded to float32, off by up to about ``1e-6`` near
    ``log(1e38)``, more than the margins the score bounds add for rounding.
    """
    return _log_beyond_float(a) if a > 0 else -math.inf


def _log_max_abs(x):
    """``log max |x|`` (``-inf`` for an empty or all-zero ``x``)."""
    return _log(np.max(np.abs(x), initial=0))


def _log_abs_range(x):
    """``(log min |x|, log max |x|)``, ``-inf`` for 0 (``x`` not empty)."""
    a = np.abs(x)
    return _log(a.min()), _log(a.max())


def _log_max_row_norm(x):
    """``log`` of an upper bound on the largest Euclidean norm of a row of ``x``.

    The sums of squares are exact to a factor ``1 + k eps`` unless they
    overflow or the largest is below the smallest normal float; only then are
    the rows first divided by a power of two ``2**e >= max |x|`` (exact), so
    that the sums can neither overflow nor lose the largest entries to underflow.
    """
    info = np.finfo(x.dtype)
    slack = x.shape[-1] * float(info.eps)  # the computed sum of k squares is within 1 + k eps
    squares = np.einsum("...k,...k->...", x, x)  # einsum sets no FP warnings
    squares = squares.max() if squares.size else 0.0
    if info.tiny <= squares < math.inf:  # compared as numbers: a float32 log could round across the limit
        return 0.5 * _log(squares) + slack
    top = np.max(np.abs(x), initial=0)
    if not top > 0:
        return -math.inf
    e = int(np.frexp(top)[1])  # top < 2**e
    y = np.ldexp(x, -e)  # |y| < 1, and max |y| >= 1/2
    squares = np.max(np.einsum("...k,...k->...", y, y))
    return e * math.log(2.0) + 0.5 * _log(squares) + slack


def _log_score_bound(q, k, bias):
    """``log B`` with ``B >= |q_i . k_j + bias_ij|`` for every finite score, as computed.

    Cauchy-Schwarz, ``|q_i . k_j| <= |q_i| |k_j|``, plus the largest finite
    ``|bias|``.  The last term, ``(k + 4) eps`` added to the logarithm (a factor
    ``e**((k + 4) eps) >= 1 + (k + 4) eps``), covers the rounding of the
    ``k``-term dot product (at most about ``k eps |q_i| |k_j|``), of adding the
    bias and of the logarithms, with room to spare; the row norms carry their
    own margin (:func:`_log_max_row_norm`).
    """
    log_qk = _log_max_row_norm(q) + _log_max_row_norm(k)
    if bias is not None:
        log_qk = float(np.logaddexp(log_qk, _log(np.max(np.abs(bias), initial=0, where=np.isfinite(bias)))))
    return log_qk + (q.shape[-1] + 4) * _limits(q.dtype)[2]


def _fit_scores(q, k, bias, log_bound):
    """``(q, bias, temperature, wide)`` such that the scores ``q k^T + bias`` cannot overflow.

    When the bound ``B`` on the scores comes within a factor ``e**2`` of the
    largest float of ``q``'s dtype, the scores are to be formed by
    :func:`_wide_scores` in ``wide``, a dtype with the range for every score
    (:func:`_wide_dtype`); ``q`` and ``bias`` are returned unchanged, with
    temperature 1.  ``wide`` is None otherwise: always on the ordinary path
    (``B`` far below the largest float), and also where no wider dtype exists.

    There (float64 where long double is float64, and long double input) ``q``
    and ``bias`` are divided by a power of two ``2**j``, the smallest that
    brings ``B`` below the largest float over ``e**2``, and ``2**-j`` is
    returned as the temperature by which the normalisation divides them again,
    after the shift by the row maximum.  Limitation of that fallback: ``B`` is
    the Cauchy-Schwarz bound, and the actual scores can be far below it; an
    entry of ``q`` or ``bias`` that leaves the range when divided by ``2**j``
    (below the smallest subnormal) is then lost, or rounded to fewer bits, even
    if its score matters.  In float64 this needs ``|q_i| |k_j|`` above about
    ``1e308`` together with an entry of ``q`` below about ``2**-1074 * 2**j``.
    """
    log_max = _limits(q.dtype)[0]
    if log_bound <= log_max - 2 or log_bound == math.inf:  # inf: an infinite q or k, for validation
        return q, bias, 1.0, None
    wide = _wide_dtype(q.dtype)
    if wide is not None:
        return q, bias, 1.0, wide
    j = math.ceil((log_bound - log_max + 2) / math.log(2.0))
    bias = None if bias is None else np.ldexp(bias, -j)
    return np.ldexp(q, -j), bias, np.ldexp(q.dtype.type(1), -j), None


#: The normalisations unchanged by adding a constant to a row of scores (the shift by its maximum).
SHIFT_INVARIANT = ("softmax", "l2")


def _wide_dtype(dtype):
    """The first of float64 and long double whose range holds every score of ``dtype`` numbers, or None.

    A nonzero product of two ``dtype`` numbers is at least the smallest
    subnormal squared, which must be a normal number of the wide dtype; that
    is the whole test.  The other requirement, that a score of ``k`` products
    plus a bias, at most ``(k + 1) max**2``, stay below the wide dtype's
    largest float, follows from it for every width ``k`` below ``2**700``
    (checked by the tests for the dtypes at hand): the test passes only for
    float32 in float64 (``max**2 < 2**256`` against ``2**1024``) and for
    float64 in 80-bit extended or IEEE quad (``2**2048`` against ``2**16384``).
    Decided from ``finfo``: long double is float64 on some platforms (and
    double-double, with float64's range, on others), 80-bit extended on x86-64
    Linux, and IEEE quad elsewhere; neither candidate passes for long double
    itself, and float16 never reaches here (it is computed in float32).
    """
    log_least = _log_beyond_float(np.finfo(dtype).smallest_subnormal)
    for wide in (np.float64, np.longdouble):
        if _limits(wide)[1] <= 2 * log_least:
            return np.dtype(wide)
    return None


def _wide_scores(out, q, k_t, bias, removed, wide, shift):
    """Write the scores ``q k_t + bias`` into ``out``, formed in the wider dtype ``wide``.

    Removed entries (``removed`` True, broadcast to ``out``) are ``-inf``.  With
    ``shift`` every row is first shifted by the largest of its remaining scores
    (by 0 if none remains), so the scores written are ``<= 0``: one below the
    range of ``out``'s dtype becomes ``-inf``, whose exp is the correctly
    rounded 0.  Without ``shift`` (``"relu2"`` and ``"none"``, which the shift
    would change) a score beyond that range becomes ``+-inf``, as its exp or
    square is beyond the range too.  Rows are never empty: the route is taken
    only for a bound beyond the range, which needs a key (with no key, or no
    query, the bound is 0), and attention never passes a block of no keys.
    """
    scores = np.empty(out.shape, dtype=wide)  # (..., n, m): out's shape, in the wide dtype
    np.matmul(q.astype(wide), k_t.astype(wide), out=scores)
    if bias is not None:
        scores += bias
    if removed is not None:
        np.copyto(scores, -np.inf, where=removed)
    if shift:
        top = np.max(scores, axis=-1, keepdims=True)  # (..., n, 1); a row is never empty here (see above)
        top[~np.isfinite(top)] = 0  # a row with nothing left stays -inf, not NaN
        scores -= top
    with np.errstate(over="ignore"):  # beyond out's range: +-inf, see above
        np.copyto(out, scores)  # a narrowing float cast, which copyto's "same_kind" allows


def _plan(log_bound, m, log_values, normalize, dtype):
    """``(shift, gain)`` for attention's softmax and l2 rows: whether to subtract
    the row maximum, and the power of two ``2**gain`` that multiplies the values
    (or the reweighting) and the denominators.  The argument is in
    :func:`attention`, Notes.
    """
    log_max, log_tiny, _ = _limits(dtype)
    log2 = math.log(2.0)
    growth = max(0.0, log_values)  # log of max |reweight| * max |v|, when above 1
    if log_bound < 64:  # the unshifted route needs e**B (and e**2B) well inside the range
        bound = math.exp(log_bound)
        gain = math.ceil(bound / log2)  # 2**gain >= e**B: no product underflows sooner than when shifted
        safe = bound <= -log_tiny - 1 and math.log(m) + bound + gain * log2 + growth <= log_max - 1
        if normalize == "l2":
            safe = safe and 2 * bound <= -log_tiny - 1 and math.log(m) + 2 * bound <= log_max - 1
        if safe:
            return False, gain
    # Shifted: weights <= 1 and denominators in [1, m], so the output numerators
    # are at most m max|reweight| max|v|; scale the values down if that can overflow.
    excess = math.log(m) + log_values - (log_max - 1)
    return True, (-math.ceil(excess / log2) if excess > 0 else 0)


def _finish(result, dtype, normalize):
    """``result`` rounded to the result's ``dtype`` (an overflow there is the correct
    rounding of an answer beyond it), checked when there is no denominator: attention
    with ``normalize="none"`` has no shift to save ``exp(s)`` from overflow."""
    if result.dtype != dtype:
        with np.errstate(over="ignore"):
            result = result.astype(dtype)
    if normalize == "none" and not np.all(np.isfinite(result)):
        raise ValueError(
            'a score is too large for exp without a denominator (normalize="none"): exp(s) or its '
            f"product with the values overflows {result.dtype}; scale the scores down"
        )
    return result


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
    h = _num_heads(num_heads, x.shape[-1])
    x = x.reshape(*x.shape[:-1], h, x.shape[-1] // h)  # (..., n, h, k)
    return np.swapaxes(x, -2, -3)  # (..., h, n, k)


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
    x = as_float_array(x, "x", ("...", "h", "n", "k"))
    x = np.swapaxes(x, -2, -3)  # (..., n, h, k)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])  # (..., n, h*k)


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
    x = as_float_array(x, "x", ("...", "n", "d"))
    d = x.shape[-1]
    if d == 0:
        raise ValueError(f"x must have at least one feature (d >= 1), got shape {x.shape}")
    context = x if context is None else as_float_array(context, "context", ("...", "m", d))
    h = _num_heads(num_heads, d)
    causal = check_bool(causal, "causal")
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
    heads = attention(q, k, v, mask=mask, causal=causal)  # (..., h, n, k)
    return linear(merge_heads(heads), w_o, b_o, name="w_o")  # (..., n, d)


def _num_heads(num_heads, d):
    h = check_count(num_heads, "num_heads")
    if d % h:
        raise ValueError(f"num_heads must be a positive divisor of the width d = {d}, got {h}")
    return h
