"""Shaw et al.'s relative position representations: a relative term in the keys *and* the values."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attncore._attention import attention_weights
from attncore._checks import as_float_array, check_choice, check_count, check_real
from attncore._softmax import NORMALIZERS, compute_dtype


def shaw_relative_embeddings(n: int, m: int, table: ArrayLike) -> np.ndarray:
    """The relative embeddings ``a[i, j] = w[clip(j - i, -K, K)]`` of Shaw et al. (2018).

    Parameters
    ----------
    n, m : int
        Query and key lengths.
    table : array_like, shape (2K + 1, k)
        Row ``r + K`` is the embedding ``w_r`` of the clipped offset ``r``,
        ``r = -K, ..., K``; its width is the key width ``k`` for the key
        table :math:`w^K` and the value width ``v`` for the value table
        :math:`w^V`.

    Returns
    -------
    ndarray, shape (n, m, k)
        ``out[i, j] = table[clip(j - i, -K, K) + K]``.

    Raises
    ------
    TypeError
        If ``n`` or ``m`` is not an integer, or ``table`` is not an array of
        real numbers.
    ValueError
        If ``n`` or ``m`` is below 1, or ``table`` is not 2-d with an odd
        number of rows, or holds NaN or ``+-inf``.

    See Also
    --------
    shaw_attention

    Notes
    -----
    Offsets beyond the clipping distance ``K`` share the embedding of
    ``+K`` or ``-K``; the embedding depends on ``j - i`` only.

    References
    ----------
    :cite:t:`shaw2018self`: relative position representations.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._shaw import shaw_relative_embeddings
    >>> a = shaw_relative_embeddings(4, 4, np.arange(5.0)[:, None])  # K = 2
    >>> a[..., 0]
    array([[2., 3., 4., 4.],
           [1., 2., 3., 4.],
           [0., 1., 2., 3.],
           [0., 0., 1., 2.]])
    """
    n, m = check_count(n, "n"), check_count(m, "m")
    table = as_float_array(table, "table", ("2K+1", "k"))
    if table.shape[0] % 2 == 0:
        raise ValueError(f"table must have an odd number 2K + 1 of rows, got shape {table.shape}")
    k_max = table.shape[0] // 2
    offsets = np.arange(m)[None, :] - np.arange(n)[:, None]  # (n, m), j - i
    return table[np.clip(offsets, -k_max, k_max) + k_max]  # (n, m, k)


def shaw_attention(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    rel_k: ArrayLike,
    rel_v: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    scale: float | None = None,
    normalize: str = "softmax",
) -> np.ndarray:
    r"""Self-attention with relative position representations (Shaw et al., 2018).

    Parameters
    ----------
    q : array_like, shape (..., n, k)
    k : array_like, shape (..., m, k)
    v : array_like, shape (..., m, v)
    rel_k : array_like, shape (n, m, k)
        ``a^K[i, j]``, added to key ``j`` when query ``i`` looks at it.
    rel_v : array_like, shape (n, m, v)
        ``a^V[i, j]``, added to value ``j`` when query ``i`` averages it.
    mask, scale, normalize
        As in :func:`attncore.attention_weights`; ``normalize`` chooses the
        map from the scores :math:`e_{i\cdot}` to the weights
        :math:`\alpha_{i\cdot}` (``"softmax"``, ``"l2"``, ``"relu2"`` or
        ``"none"``).

    Returns
    -------
    ndarray, shape (..., n, v)

    Raises
    ------
    TypeError
        If an array argument is not an array of real numbers, ``scale`` is
        not a real number, or ``mask`` is not boolean.
    ValueError
        If the shapes do not match (``rel_k`` must be ``(n, m, k)`` and
        ``rel_v`` ``(n, m, v)``); if an array holds NaN or ``+-inf``; if
        ``scale`` is not finite in the dtype of the scores (at least float32);
        if the relative scores ``scale * q . rel_k`` overflow that dtype; if
        ``normalize`` is not one of :data:`attncore.NORMALIZERS`; if ``mask``
        does not broadcast to ``(..., n, m)``.

    See Also
    --------
    shaw_relative_embeddings
    attention

    Notes
    -----
    .. math::

        e_{ij} = s\, q_i \cdot (k_j + a^K_{ij}), \qquad
        \alpha_{i\cdot} = \mathrm{softmax}(e_{i\cdot}), \qquad
        z_i = \sum_j \alpha_{ij}\,(v_j + a^V_{ij}),

    with :math:`s = 1/\sqrt{d_k}` and
    :math:`a^K_{ij} = w^K_{\mathrm{clip}(j - i, -K, K)}`,
    :math:`a^V_{ij} = w^V_{\mathrm{clip}(j - i, -K, K)}`
    (:func:`shaw_relative_embeddings`).  The softmax shown is the default;
    another ``normalize`` replaces it, row by row, by that normaliser, and
    the output formula is unchanged.  The value term :math:`a^V` is what
    sets this scheme apart: position enters the output outside the weights, so
    identical values do not give identical outputs.

    References
    ----------
    :cite:t:`shaw2018self`: relative position representations.

    :cite:t:`hua2022transformer`: GAU, whose attention normalises with ``relu(s)**2 / m`` (``normalize="relu2"``).

    Examples
    --------
    With zero relative embeddings it is plain attention; with a value term,
    identical tokens get different outputs:

    >>> import numpy as np
    >>> from attncore import attention
    >>> from attncore._shaw import shaw_attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 3))
    >>> zk, zv = np.zeros((4, 4, 2)), np.zeros((4, 4, 3))
    >>> bool(np.allclose(shaw_attention(q, k, v, zk, zv), attention(q, k, v)))
    True
    >>> x = np.ones((4, 2))
    >>> z = shaw_attention(x, x, np.ones((4, 3)), zk, rng.normal(size=(4, 4, 3)))
    >>> bool(np.allclose(z[0], z[1]))
    False
    """
    (q, k, v, rel_k, rel_v), scale, score_dtype = _shaw_args(q, k, v, rel_k, rel_v, scale, normalize)
    rel_scores = _relative_scores(q, rel_k, scale, score_dtype)  # (..., n, m): s q_i . a^K_ij
    # e_ij = s q_i . k_j + s q_i . a^K_ij: the relative scores join attention's as a bias
    weights = attention_weights(q, k, mask=mask, bias=rel_scores, scale=scale, normalize=normalize)  # (..., n, m)
    return weights @ v + np.einsum("...nm,nmv->...nv", weights, rel_v)  # (..., n, v): sum_j alpha_ij (v_j + a^V_ij)


def _shaw_args(q, k, v, rel_k, rel_v, scale, normalize):
    """Validate the arguments of :func:`shaw_attention` (``mask`` is checked by attention_weights):
    return them as arrays, the scale, and the dtype of attention's scores."""
    q = as_float_array(q, "q", ("...", "n", "k"))
    k = as_float_array(k, "k", ("...", "m", q.shape[-1]), match=("q", q))
    v = as_float_array(v, "v", ("...", k.shape[-2], "v"), match=("k", k))
    n, m = q.shape[-2], k.shape[-2]
    rel_k = as_float_array(rel_k, "rel_k", (n, m, q.shape[-1]), match=("q and k", q))
    rel_v = as_float_array(rel_v, "rel_v", (n, m, v.shape[-1]), match=("q and v", v))
    check_choice(normalize, "normalize", NORMALIZERS)
    score_dtype = compute_dtype(q, k)  # the dtype of attention's scores (float16 computed in float32)
    if scale is None:
        if q.shape[-1] == 0:
            raise ValueError(f"q has width k = 0 (shape {q.shape}): the default scale 1/sqrt(k) is undefined")
        scale = 1.0 / np.sqrt(q.shape[-1])
    else:
        scale = float(check_real(scale, "scale", score_dtype))
    return (q, k, v, rel_k, rel_v), scale, score_dtype


def _relative_scores(q, rel_k, scale, dtype):
    """The relative scores ``scale * q_i . rel_k[i, j]``, ``(..., n, m)``, computed in ``dtype``;
    ``ValueError`` if they overflow it (they enter attention as a bias, which must be finite).
    Both operands are made contiguous first: einsum sums in another order over a strided
    array, so the scores would depend, in their last bits, on how the caller's arrays lie in memory."""
    with np.errstate(over="ignore"):  # an overflow, of the cast or of the sum, is found below
        q, rel_k = np.ascontiguousarray(q, dtype=dtype), np.ascontiguousarray(rel_k, dtype=dtype)
        rel_scores = dtype.type(scale) * np.einsum("...nk,nmk->...nm", q, rel_k)  # (..., n, m)
    if not np.all(np.isfinite(rel_scores)):
        raise ValueError(
            f"scale * q . rel_k (the relative scores) overflows {dtype} (scale {scale:g}, q {q.shape}, "
            f"rel_k {rel_k.shape}); scale them down"
        )
    return rel_scores
