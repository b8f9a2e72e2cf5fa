"""Permutations of tokens, as index arrays and as matrices acting on the left.

A permutation of ``n`` tokens is an index array ``perm`` holding each of
``0, ..., n-1`` once.  Permuting the rows of ``x`` means ``x[perm]``: token ``i``
of the result is token ``perm[i]`` of the input.  The matching matrix ``P`` has
``P[i, perm[i]] = 1`` so that ``P @ x == x[perm]`` (tokens are rows, so ``P``
acts on the left).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import as_float_array


def _check_permutation(perm):
    arr = np.asarray(perm)
    if arr.size == 0 and arr.dtype == np.float64:
        arr = arr.astype(np.intp)  # [] is the empty permutation, whatever numpy's default dtype
    if arr.dtype.kind not in "iu":
        raise TypeError(f"perm must be a 1-d array of integers, got dtype {arr.dtype} and shape {arr.shape}")
    if arr.ndim != 1:
        raise ValueError(f"perm must be a 1-d array of integers, got shape {arr.shape}")
    ok = np.zeros(arr.size, dtype=bool)
    inside = (arr >= 0) & (arr < arr.size)
    ok[arr[inside]] = True
    if not (inside.all() and ok.all()):
        # Name one offending entry rather than print the whole array (it may hold millions).
        if not inside.all():
            i = int(np.argmin(inside))
            what = f"perm[{i}] = {int(arr[i])} is out of range"
        else:
            missing = int(np.count_nonzero(~ok))
            what = f"{missing} of them {'is' if missing == 1 else 'are'} missing (the first, {int(np.argmin(ok))}), so others repeat"
        raise ValueError(
            f"perm must contain each of 0..{arr.size - 1} exactly once (length {arr.size}); {what}"
        )
    return arr.astype(np.intp, copy=False)


def permutation_matrix(perm: ArrayLike) -> np.ndarray:
    r"""The matrix ``P`` with ``P @ x == x[perm]``.

    Parameters
    ----------
    perm : array_like of int, shape (n,)
        A permutation of ``0, ..., n-1``.

    Returns
    -------
    ndarray of float64, shape (n, n)
        ``P[i, j] = 1`` if ``j == perm[i]`` else 0.

    Raises
    ------
    TypeError
        If ``perm`` is not an array of integers (floats and bools are not indices).
    ValueError
        If ``perm`` is not 1-d or does not hold each of ``0, ..., n-1`` exactly once.

    See Also
    --------
    inverse_permutation
    permute_tokens

    Notes
    -----
    Every row and every column of ``P`` holds exactly one 1, so
    :math:`P P^{\top} = P^{\top} P = I`: the inverse of a permutation matrix is
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


def inverse_permutation(perm: ArrayLike) -> np.ndarray:
    """The index array ``inv`` with ``x[perm][inv] == x``.

    Parameters
    ----------
    perm : array_like of int, shape (n,)
        A permutation of ``0, ..., n-1``.

    Returns
    -------
    ndarray of intp, shape (n,)

    Raises
    ------
    TypeError
        If ``perm`` is not an array of integers (floats and bools are not indices).
    ValueError
        If ``perm`` is not 1-d or does not hold each of ``0, ..., n-1`` exactly once.

    See Also
    --------
    permutation_matrix
    permute_tokens

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


def permute_tokens(x: ArrayLike, perm: ArrayLike) -> np.ndarray:
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

    Raises
    ------
    TypeError
        If ``x`` is not an array of real numbers or ``perm`` not an array of integers.
    ValueError
        If ``perm`` is not a permutation, ``x`` does not have ``n`` tokens on
        axis ``-2``, or ``x`` holds NaN or ``+-inf``.

    See Also
    --------
    permutation_matrix
    inverse_permutation

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
    perm = _check_permutation(perm)
    x = as_float_array(x, "x", ("...", perm.size, "d"))
    return np.take(x, perm, axis=-2)
