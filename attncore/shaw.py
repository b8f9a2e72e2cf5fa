"""Shaw et al.'s relative position representations: a relative term in the keys *and* the values."""

from __future__ import annotations


import numpy as np

from attncore._checks import as_float_array, check_count, check_finite, check_shape
from attncore.attention import attention_weights


def shaw_relative_embeddings(n, m, table):
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

    Notes
    -----
    Offsets beyond the clipping distance ``K`` share the embedding of
    ``+K`` or ``-K``; the embedding depends on ``j - i`` only.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore.shaw import shaw_relative_embeddings
    >>> a = shaw_relative_embeddings(4, 4, np.arange(5.0)[:, None])  # K = 2
    >>> a[..., 0]
    array([[2., 3., 4., 4.],
           [1., 2., 3., 4.],
           [0., 1., 2., 3.],
           [0., 0., 1., 2.]])
    """
    n, m = check_count(n, "n"), check_count(m, "m")
    table = as_float_array(table, "table")
    check_shape(table, "table", ("2K+1", "k"))
    if table.shape[0] % 2 == 0:
        raise ValueError(f"table must have an odd number 2K + 1 of rows, got shape {table.shape}")
    k_max = table.shape[0] // 2
    offsets = np.arange(m)[None, :] - np.arange(n)[:, None]  # (n, m), j - i
    return table[np.clip(offsets, -k_max, k_max) + k_max]  # (n, m, k)


def shaw_attention(q, k, v, rel_k, rel_v, *, mask=None, scale=None, normalize="softmax"):
    """Self-attention with relative position representations (Shaw et al., 2018).

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
        map from the scores :math:`e_{i\\cdot}` to the weights
        :math:`\\alpha_{i\\cdot}` (``"softmax"``, ``"l2"``, ``"relu2"`` or
        ``"none"``).

    Returns
    -------
    ndarray, shape (..., n, v)

    Notes
    -----
    .. math::

        e_{ij} = s\\, q_i \\cdot (k_j + a^K_{ij}), \\qquad
        \\alpha_{i\\cdot} = \\mathrm{softmax}(e_{i\\cdot}), \\qquad
        z_i = \\sum_j \\alpha_{ij}\\,(v_j + a^V_{ij}),

    with :math:`s = 1/\\sqrt{d_k}` and
    :math:`a^K_{ij} = w^K_{\\mathrm{clip}(j - i, -K, K)}`,
    :math:`a^V_{ij} = w^V_{\\mathrm{clip}(j - i, -K, K)}`
    (:func:`shaw_relative_embeddings`).  The softmax shown is the default;
    another ``normalize`` replaces it, row by row, by that normaliser, and
    the output formula is unchanged.  The value term :math:`a^V` is what
    sets this scheme apart: position enters the output outside the weights, so
    identical values do not give identical outputs.

    Examples
    --------
    With zero relative embeddings it is plain attention; with a value term,
    identical tokens get different outputs:

    >>> import numpy as np
    >>> from attncore import attention
    >>> from attncore.shaw import shaw_attention
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
    q = as_float_array(q, "q")
    k = as_float_array(k, "k")
    v = as_float_array(v, "v")
    check_shape(q, "q", ("...", "n", "k"))
    check_shape(k, "k", ("...", "m", q.shape[-1]))
    check_shape(v, "v", ("...", k.shape[-2], "v"))
    n, m = q.shape[-2], k.shape[-2]
    rel_k = as_float_array(rel_k, "rel_k")
    rel_v = as_float_array(rel_v, "rel_v")
    check_shape(rel_k, "rel_k", (n, m, q.shape[-1]))
    check_shape(rel_v, "rel_v", (n, m, v.shape[-1]))
    check_finite(v, "v")
    check_finite(rel_k, "rel_k")
    check_finite(rel_v, "rel_v")
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    rel_scores = scale * np.einsum("...nk,nmk->...nm", q, rel_k)  # (..., n, m)
    weights = attention_weights(q, k, mask=mask, bias=rel_scores, scale=scale, normalize=normalize)
    return weights @ v + np.einsum("...nm,nmv->...nv", weights, rel_v)  # (..., n, v)
