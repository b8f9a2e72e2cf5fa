"""Toeplitz matrices: one value per offset ``j - i``."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import as_float_array


def toeplitz(diagonals: ArrayLike) -> np.ndarray:
    r"""The square Toeplitz matrix with the given ``2n - 1`` diagonals.

    Parameters
    ----------
    diagonals : array_like, shape (..., 2n - 1)
        ``diagonals[..., r + n - 1]`` is the value on the diagonal of offset
        ``r = j - i`` (key position minus query position), for
        ``r = -(n - 1), ..., n - 1``.

    Returns
    -------
    ndarray, shape (..., n, n)
        ``T[..., i, j] = diagonals[..., j - i + n - 1]``.

    Raises
    ------
    TypeError
        If ``diagonals`` is not an array of real numbers.
    ValueError
        If ``diagonals`` is 0-d, has an even length on its last axis, or holds
        NaN or ``+-inf``.

    See Also
    --------
    relative_bias

    Notes
    -----
    A Toeplitz matrix is constant along every diagonal, :math:`T_{ij} = c_{j-i}`,
    so multiplying by it is a convolution over positions.  URPE re-weights
    attention with one, :math:`(A \odot C)V`.

    References
    ----------
    :cite:t:`luo2022your`: URPE: attention weights multiplied by a Toeplitz matrix.

    Examples
    --------
    Every diagonal is constant:

    >>> import numpy as np
    >>> from attncore import toeplitz
    >>> t = toeplitz(np.array([-2.0, -1.0, 0.0, 1.0, 2.0]))
    >>> t
    array([[ 0.,  1.,  2.],
           [-1.,  0.,  1.],
           [-2., -1.,  0.]])
    >>> bool(np.all(np.diag(t, 1) == 1.0))
    True
    """
    c = as_float_array(diagonals, "diagonals", ("...", "2n-1"))
    if c.shape[-1] % 2 == 0:
        raise ValueError(f"diagonals must have an odd length 2n - 1 on its last axis, got shape {c.shape}")
    n = (c.shape[-1] + 1) // 2
    offsets = np.arange(n)[None, :] - np.arange(n)[:, None] + (n - 1)  # (n, n), j - i + n - 1
    return c[..., offsets]  # (..., n, n)
