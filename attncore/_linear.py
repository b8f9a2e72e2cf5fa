"""The token-wise affine map ``x @ w + b`` that every projection uses."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import as_float_array, check_fits


def linear(x: ArrayLike, w: ArrayLike, b: ArrayLike | None = None, *, name: str = "w") -> np.ndarray:
    """Apply the same affine map to every token: ``x @ w + b``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
        Tokens as rows.
    w : array_like, shape (d, e)
        Weights, acting on the right.
    b : array_like, shape (e,), optional
        Bias, added to every token.
    name : str, optional
        The weight's name in error messages (``"w_q"``, ``"w1"``...); the bias
        is reported as ``b`` followed by the same suffix.

    Returns
    -------
    ndarray, shape (..., n, e)

    Raises
    ------
    TypeError
        If ``x``, ``w`` or ``b`` is not an array of real numbers.
    ValueError
        If a shape does not match (``x`` not ``(..., n, d)``, ``w`` not
        ``(d, e)``, ``b`` not ``(e,)``); if any of them holds NaN or
        ``+-inf``; if a float64 ``b`` does not fit the dtype of ``x @ w``.

    See Also
    --------
    ffn
    permute_tokens : A linear layer commutes with it.

    Notes
    -----
    Row ``i`` of the result is :math:`x_i W + b`, which depends on token ``i``
    alone: a linear layer never mixes tokens, so it commutes with any
    permutation of them.

    Examples
    --------
    Permuting the tokens before or after a linear layer gives the same result:

    >>> import numpy as np
    >>> from attncore._linear import linear
    >>> rng = np.random.default_rng(0)
    >>> x, w, b = rng.normal(size=(4, 3)), rng.normal(size=(3, 2)), rng.normal(size=2)
    >>> perm = [2, 0, 3, 1]
    >>> bool(np.allclose(linear(x[perm], w, b), linear(x, w, b)[perm]))
    True
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    w = as_float_array(w, name, (x.shape[-1], "e"), match=("x", x))
    b_name = "b" + name[1:] if name.startswith("w") else f"bias of {name}"
    if b is not None:
        b = as_float_array(b, b_name, (w.shape[-1],), match=(name, w))
    y = x @ w  # (..., n, e)
    if b is not None:
        check_fits(b, b_name, y.dtype)
        y += b.astype(y.dtype, copy=False)
    return y
