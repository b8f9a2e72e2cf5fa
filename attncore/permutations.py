"""Permutations of tokens, as index arrays and as matrices acting on the left.

A permutation of ``n`` tokens is an index array ``perm`` holding each of
``0, ..., n-1`` once.  Permuting the rows of ``x`` means ``x[perm]``: token ``i``
of the result is token ``perm[i]`` of the input.  The matching matrix ``P`` has
``P[i, perm[i]] = 1`` so that ``P @ x == x[perm]`` (tokens are rows, so ``P``
acts on the left).
"""

from __future__ import annotations

import numpy as np

from attncore._checks import check_shape


def _check_permutation(perm):
    arr = np.asarray(perm)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise TypeError(
            f"perm must be a 1-d array of integers, got dtype {arr.dtype} and shape {arr.shape}"
        )
    if not np.array_equal(np.sort(arr), np.arange(arr.size)):
        raise ValueError(
            f"perm must contain each of 0..{arr.size - 1} exactly once, got {arr.tolist()}"
        )
    return arr.astype(np.intp, copy=False)


def permutation_matrix(perm):
    """The matrix ``P`` with ``P @ x == x[perm]``.

    Parameters
    ----------
    perm : array_like of int, shape (n,)
        A permutation of ``0, ..., n-1``.

    Returns
    -------
    ndarray of float64, shape (n, n)
        ``P[i, j] = 1`` if ``j == perm[i]`` else 0.

    Notes
    -----
    Every row and every column of ``P`` holds exactly one 1, so
    :math:`P P^{\\top} = P^{\\top} P = I`: the inverse of a permutation matrix is
    its transpose.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore import permutation_matrix
    >>> p = permutation_matrix([2, 0, 1])
    >>> p.astype(int)
    array([[0, 0, 1],
           [1, 0, 0],
           [0, 1, 0]])
    >>> bool(np.array_equal(p @ p.T, np.eye(3)))
    True
    """
    perm = _check_permutation(perm)
    n = perm.size
    p = np.zeros((n, n))
    p[np.arange(n), perm] = 1.0
    return p


def inverse_permutation(perm):
    """The index array ``inv`` with ``x[perm][inv] == x``.

    Examples
    --------
    >>> from attncore import inverse_permutation
    >>> inverse_permutation([2, 0, 1]).tolist()
    [1, 2, 0]
    """
    perm = _check_permutation(perm)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size)
    return inv


def permute_tokens(x, perm):
    """Reorder the tokens (axis ``-2``) of ``x``: ``x[..., perm, :]``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    perm : array_like of int, shape (n,)
        A permutation of ``0, ..., n-1``.

    Returns
    -------
    ndarray, shape (..., n, d)
        Token ``i`` of the result is token ``perm[i]`` of ``x``; equal to
        ``permutation_matrix(perm) @ x``.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore import permute_tokens, permutation_matrix
    >>> x = np.arange(6.0).reshape(3, 2)
    >>> permute_tokens(x, [2, 0, 1]).tolist()
    [[4.0, 5.0], [0.0, 1.0], [2.0, 3.0]]
    >>> bool(np.array_equal(permute_tokens(x, [2, 0, 1]), permutation_matrix([2, 0, 1]) @ x))
    True
    """
    x = np.asarray(x)
    perm = _check_permutation(perm)
    check_shape(x, "x", ("...", perm.size, "d"))
    return np.take(x, perm, axis=-2)
