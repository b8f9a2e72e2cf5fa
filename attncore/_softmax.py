"""The softmax, stable for any finite logits, with masks and a temperature."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import as_float_array, check_axis, check_mask, check_real


def compute_dtype(*arrays: np.ndarray) -> np.dtype:
    """The dtype ``attncore`` computes in for these floating arrays: at least float32.

    float16 has 5 exponent bits: ``exp(12)``, a sum of squares of numbers near
    300 and a product of 16 weights near 100 already overflow it.  Like
    PyTorch's CPU kernels, the package computes float16 input in float32 and
    rounds the result to float16 once; float32, float64 and longer types are
    computed in their own precision.

    >>> import numpy as np
    >>> compute_dtype(np.ones(2, np.float16)), compute_dtype(np.ones(2), np.ones(2, np.float32))
    (dtype('float32'), dtype('float64'))
    """
    return np.result_type(*arrays, np.float32)


def softmax(
    x: ArrayLike, axis: int = -1, *, temperature: float = 1.0, mask: ArrayLike | None = None
) -> np.ndarray:
    r"""Softmax of ``x`` along ``axis``, with an optional temperature and mask.

    Parameters
    ----------
    x : array_like, shape (..., m)
        Logits (scores).  Finite values and ``-inf`` are allowed; ``-inf``
        behaves like a masked entry.  NaN and ``+inf`` raise ``ValueError``.
    axis : int, optional
        The axis to normalise over; the last one (the keys) by default.
    temperature : float, optional
        ``T > 0``; the logits are divided by it.  ``T -> 0`` tends to the
        hardmax, ``T -> inf`` to the uniform distribution.  ``T`` and ``1/T``
        must be finite and nonzero in the compute dtype (float32 for float16 ``x``).
    mask : array_like of bool, optional
        Broadcastable to ``x.shape``; ``True`` = may attend.  Masked entries get
        a weight of exactly 0.

    Returns
    -------
    ndarray, same shape and floating dtype as ``x``
        Non-negative weights that sum to 1 along ``axis``, except that a slice
        in which every entry is masked gets weights of exactly 0 (never NaN), so
        the attention output of a query that may attend nothing is 0.  float16
        input is computed in float32 and rounded to float16 once, at the end
        (see :func:`compute_dtype`).

    Raises
    ------
    TypeError
        If ``x`` is not an array of real numbers (bool, complex, strings), if
        ``axis`` is not an integer, if ``temperature`` is not a real number
        (a string, a bool), or if ``mask`` is not boolean.
    ValueError
        If ``x`` holds NaN or ``+inf``; if ``axis`` is out of range or ``x``
        has no entry along it; if ``temperature`` is not ``> 0`` and finite,
        or it or its reciprocal is 0 or ``inf`` in the compute dtype; if
        ``mask`` does not broadcast to the shape of ``x``.

    See Also
    --------
    attention_weights : Softmax of scaled scores, the attention matrix.
    compute_dtype : The dtype the computation runs in.

    Notes
    -----
    .. math::

        \mathrm{softmax}(x)_j = \frac{\exp((x_j - c)/T)}{\sum_{l} \exp((x_l - c)/T)},
        \qquad c = \max_l x_l .

    Subtracting the maximum ``c`` changes nothing (shift invariance, the
    first theorem of the course) and makes every exponent ``<= 0``, so nothing
    overflows; the largest term is ``exp(0) = 1``, so the denominator is at
    least 1 and nothing divides by zero.

    Examples
    --------
    Shifting every logit by the same constant leaves the weights unchanged:

    >>> import numpy as np
    >>> from attncore import softmax
    >>> x = np.array([1.0, 2.0, 3.0])
    >>> bool(np.allclose(softmax(x), softmax(x + 1000.0)))
    True
    >>> softmax(np.array([1000.0, 0.0])).round(6)
    array([1., 0.])
    >>> softmax(x, mask=np.array([True, False, True])).round(4)
    array([0.1192, 0.    , 0.8808])
    >>> softmax(x, mask=np.zeros(3, dtype=bool))
    array([0., 0., 0.])
    """
    z = as_float_array(x, "x", finite="-inf")
    x_dtype = z.dtype
    axis = check_axis(axis, z.ndim, "x")
    work = compute_dtype(z)
    # The logits are divided by T in the compute dtype: T and 1/T must both be finite and nonzero there.
    temperature = float(check_real(temperature, "temperature", work, positive=True, reciprocal=True))
    if z.shape[axis] == 0:
        raise ValueError(f"x must have at least one entry along axis {axis}, got shape {z.shape}")
    # A copy in the compute dtype (float16 is computed in float32, as PyTorch does, and rounded
    # once at the end), which _softmax overwrites; a masked logit becomes -inf, of weight 0.
    z = np.array(z, dtype=work) if mask is None else np.where(check_mask(mask, z.shape, "x"), z, work.type(-np.inf))
    with np.errstate(over="ignore"):  # (z - c) / T <= 0: an overflow is to -inf, whose exp is 0
        return _softmax(z, axis, temperature).astype(x_dtype, copy=False)


def _softmax(x, axis, temperature):
    """The softmax of ``x`` along ``axis`` at temperature ``T``, computed in place in ``x``:
    :func:`_shifted_exp` over its sum, which is at least 1 (0 for a slice of only ``-inf``)."""
    e = _shifted_exp(x, axis, temperature)  # exp((x - c) / temperature), c the maximum
    total = np.sum(e, axis=axis, keepdims=True)  # >= 1, or 0 for a row with nothing allowed
    e /= np.where(total > 0, total, 1)  # a row with nothing allowed: 0 / 1 = 0
    return e


def _shifted_exp(x, axis=-1, temperature=1.0):
    """``exp((x - c) / T)`` with ``c = max x`` along ``axis``, computed in place in ``x``.

    Subtracting the maximum makes every exponent ``<= 0``, and dividing by ``T > 0``
    keeps them so; the largest term is ``exp(0) = 1``.  A slice of only ``-inf``
    (every entry masked) has no maximum: it is shifted by 0 instead, and its terms
    are 0.  The softmax and :func:`attncore.attention` both start with this step.
    """
    c = np.max(x, axis=axis, keepdims=True, initial=-np.inf)  # initial: a row of no entries has max -inf
    x -= np.where(np.isfinite(c), c, 0)  # x - c <= 0; a row of only -inf is shifted by 0 (-inf - -inf is nan)
    if temperature != 1.0:
        x /= temperature  # temperature > 0: still <= 0
    return np.exp(x, out=x)  # the largest is exp(0) = 1


#: The row normalisations of attention scores, by name (see :func:`attncore.attention_weights`).
NORMALIZERS = ("softmax", "l2", "relu2", "none")
