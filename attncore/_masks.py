"""Boolean attention masks ("may attend": ``True`` keeps an entry)."""

from __future__ import annotations

import numpy as np

from attncore._checks import check_count


def causal_mask(n: int, m: int | None = None) -> np.ndarray:
    """The causal mask: query ``i`` may attend key ``j`` exactly when ``j <= i``.

    Parameters
    ----------
    n : int
        Number of queries (rows).
    m : int, optional
        Number of keys (columns); ``n`` by default.

    Returns
    -------
    ndarray of bool, shape (n, m)
        ``mask[i, j] = (j <= i)``.

    Raises
    ------
    TypeError
        If ``n`` or ``m`` is not an integer (floats, bools and strings are not counts).
    ValueError
        If ``n`` or ``m`` is below 1.

    See Also
    --------
    attention : Takes the mask as ``mask=``.
    softmax

    Notes
    -----
    Rows and columns are aligned at the top left, as in PyTorch's
    ``scaled_dot_product_attention(is_causal=True)``: query ``i`` and key ``i``
    sit at the same position.  With ``m > n`` the keys past ``n - 1`` are never
    visible; with ``n > m`` the last queries see every key.

    References
    ----------
    :cite:t:`vaswani2017attention`: the transformer.

    Examples
    --------
    A causal mask is lower triangular, and row ``i`` keeps ``i + 1`` keys:

    >>> from attncore import causal_mask
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(4).sum(axis=-1).tolist()
    [1, 2, 3, 4]
    """
    n = check_count(n, "n")
    m = n if m is None else check_count(m, "m")
    return np.arange(m)[None, :] <= np.arange(n)[:, None]  # (n, m)
