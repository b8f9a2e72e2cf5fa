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
    z = np.array(as_float_array(x, "x", finite="-inf"), copy=True)
    axis = check_axis(axis, z.ndim, "x")
    work = compute_dtype(z)
    # The logits are divided by T in the compute dtype: T and 1/T must both be finite and nonzero there.
    temperature = float(check_real(temperature, "temperature", work, positive=True, reciprocal=True))
    if z.shape[axis] == 0:
        raise ValueError(f"x must have at least one entry along axis {axis}, got shape {z.shape}")
    if mask is not None:
        mask = check_mask(mask, z.shape, "x")
    # float16 is computed in float32 (as PyTorch does) and rounded once at the end.
    work = z.astype(work, copy=False)
    return _softmax_inplace(work, axis, temperature=temperature, mask=mask).astype(z.dtype, copy=False)


def _softmax_inplace(z, axis=-1, *, temperature=1.0, mask=None):
    """Softmax of the validated float array ``z``, overwriting it; returns ``z``.

    Shared by :func:`softmax` and the attention functions, which own their
    score buffer and so need no copy.
    """
    _shifted_exp_inplace(z, axis, temperature=temperature, mask=mask)
    total = np.sum(z, axis=axis, keepdims=True)
    # total is >= 1 unless every entry was removed, and then z is already all 0.
    np.divide(z, total, out=z, where=total > 0)
    return z


def _shifted_exp_inplace(z, axis=-1, *, temperature=1.0, mask=None, shift=True):
    """``exp((z - max z) / T)`` along ``axis`` in place, removed entries 0; returns ``z``.

    ``shift=False`` skips subtracting the maximum, for callers that have proved
    that no score is large enough in absolute value for the unshifted route to
    lose accuracy (see :func:`attncore.attention`, Notes); the ratios it feeds
    are the same either way.
    """
    if mask is not None:
        np.copyto(z, -np.inf, where=np.logical_not(mask))
    if not shift:
        if temperature != 1.0:
            z /= z.dtype.type(temperature)
        return np.exp(z, out=z)
    zmax = np.max(z, axis=axis, keepdims=True, initial=-np.inf)
    # A slice with every entry removed (or none at all) has max -inf; use 0 so that exp gives 0, not NaN.
    zmax[~np.isfinite(zmax)] = 0
    z -= zmax
    if temperature != 1.0:
        with np.errstate(over="ignore"):  # z <= 0 here: an overflow is to -inf, and exp gives 0
            z /= z.dtype.type(temperature)
    np.exp(z, out=z)
    return z


#: The row normalisations of attention scores, by name (see :func:`attncore.attention_weights`).
NORMALIZERS = ("softmax", "l2", "relu2", "none")


def _normalize_inplace(z, kind, *, mask=None, temperature=1.0):
    """Turn the validated scores ``z`` (..., n, m) into weights, overwriting ``z``.

    ``"softmax"``: ``exp(z)`` over its sum (rows sum to 1);
    ``"l2"``: ``exp(z)`` over its Euclidean norm (rows have unit l2 norm);
    ``"relu2"``: ``relu(z)**2 / m`` with ``m`` the number of keys (GAU);
    ``"none"``: ``exp(z)`` with no denominator.
    Removed entries are 0 in every case, and a row with every entry removed is 0.
    """
    z, denominator = _numerators_inplace(z, kind, mask=mask, temperature=temperature)
    if denominator is not None:
        np.divide(z, denominator, out=z, where=denominator > 0)
    return z


def _numerators_inplace(z, kind, *, mask=None, shift=True, temperature=1.0):
    """The weights of :func:`_normalize_inplace` before their per-row division.

    Returns ``(z, denominator)``: ``z`` overwritten with the numerators and the
    denominators of shape ``(..., n, 1)``, or None where there is no division.
    Attention divides its *output* rows instead of the ``(n, m)`` weights.
    The scores are ``z / temperature``: attention passes scores divided by a
    power of two, and that power as ``temperature``, when ``q k^T`` itself
    could overflow and no wider dtype can hold it.
    """
    if kind in ("softmax", "l2"):
        # exp(z - c) over its sum or norm equals exp(z) over its sum or norm: the shift cancels.
        _shifted_exp_inplace(z, -1, mask=mask, shift=shift, temperature=temperature)
        if kind == "softmax":
            return z, np.sum(z, axis=-1, keepdims=True)
        return z, np.sqrt(np.einsum("...m,...m->...", z, z))[..., None]
    if temperature != 1.0 and kind in ("relu2", "none"):
        with np.errstate(over="ignore"):  # an overflow here is one of exp or of the square anyway
            z /= z.dtype.type(temperature)
    if kind == "relu2":
        np.maximum(z, 0, out=z)
        z *= z
        z /= z.dtype.type(z.shape[-1])
    elif kind == "none":
        if mask is not None:
            np.copyto(z, -np.inf, where=np.logical_not(mask))
        with np.errstate(over="ignore"):
            np.exp(z, out=z)
        if not np.all(np.isfinite(z)):
            raise ValueError(
                'a score is too large for exp without a denominator (normalize="none"); '
                "scale the scores down"
            )
    else:
        raise ValueError(f"normalize must be one of {', '.join(NORMALIZERS)}, got {kind!r}")
    if mask is not None:
        np.copyto(z, 0, where=np.logical_not(mask))
    return z, None
