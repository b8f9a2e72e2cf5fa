"""Normalisation layers, each defined by the axes it reduces over.

For activations of shape ``(..., n, d)`` (batch axes, tokens, features):

=================  ==============================  =====================================
function           statistics taken over           one set of statistics per
=================  ==============================  =====================================
``layer_norm``     ``d`` (the features)            token
``rms_norm``       ``d`` (no mean subtracted)      token
``instance_norm``  ``n`` (the tokens)              sequence and feature
``batch_norm``     every axis but ``d``            feature (training-mode statistics)
=================  ==============================  =====================================

``gamma`` (scale) and ``beta`` (shift), both of shape ``(d,)``, are applied
after normalising, per feature, in every layer.

Numerics: every norm computes in at least float32 (float16 input is rounded
once, at the end, as PyTorch does) and divides each group of statistics by a
power of two at least as large as its largest ``|x|`` before squaring, with
``eps`` rescaled to match; so the result is right to a few units in the last
place of the compute dtype times ``max|x - mean| / sqrt(var + eps)``, from
subnormal inputs to inputs near the largest float (``tests/test_numerics.py``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import as_float_array, check_fits, check_real
from attncore._softmax import compute_dtype

#: The axes each normalisation pools its statistics over, for activations of
#: shape ``(b, n, d)`` (batch, tokens, features); the remaining axes index the
#: separate sets of statistics.  The course generates its table of norms from it.
REDUCED_AXES = {
    "batch_norm": ("b", "n"),
    "layer_norm": ("d",),
    "instance_norm": ("n",),
    "rms_norm": ("d",),
}


def layer_norm(
    x: ArrayLike, gamma: ArrayLike | None = None, beta: ArrayLike | None = None, *, eps: float = 1e-5
) -> np.ndarray:
    r"""Layer normalisation over the features of each token.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    gamma, beta : array_like, shape (d,), optional
        Scale and shift; 1 and 0 by default.
    eps : float, optional
        Added to the variance.

    Returns
    -------
    ndarray, shape (..., n, d)

    Raises
    ------
    TypeError
        If ``x``, ``gamma`` or ``beta`` is not an array of real numbers, or
        ``eps`` is not a real number (a string, a bool).
    ValueError
        If ``x`` has the wrong number of axes, ``gamma`` or ``beta`` is not
        ``(d,)``, or any of them holds NaN or ``+-inf``; if ``eps`` is
        negative or not finite, or is not representable (``inf``, or a
        positive ``eps`` that rounds to 0) in float64, where it is added;
        if a float64 ``gamma`` or ``beta`` overflows the compute dtype
        (float32 for float16 ``x``).

    See Also
    --------
    rms_norm : Without centring.
    instance_norm
    batch_norm

    Notes
    -----
    .. math::

        \mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta,
        \qquad \mu = \tfrac1d \sum_j x_j,\quad \sigma^2 = \tfrac1d \sum_j (x_j - \mu)^2 .

    References
    ----------
    :cite:t:`ba2016layer`: layer normalisation.

    Examples
    --------
    Each token is normalised on its own, so a token's output does not depend
    on the other tokens:

    >>> import numpy as np
    >>> from attncore import layer_norm
    >>> x = np.random.default_rng(0).normal(size=(3, 4))
    >>> bool(np.allclose(layer_norm(x)[0], layer_norm(x[:1])[0]))
    True
    >>> layer_norm(x).mean(axis=-1).round(12) + 0.0
    array([0., 0., 0.])
    """
    x = as_float_array(x, "x", ("...", "d"))
    # eps is added in float64 (see _standardize): it must be finite there, and not round to 0 unless it is 0.
    eps = check_real(eps, "eps", np.result_type(x, np.float64), minimum=0)
    return _affine(_standardize(x, (-1,), eps), gamma, beta).astype(x.dtype, copy=False)


def rms_norm(x: ArrayLike, gamma: ArrayLike | None = None, *, eps: float = 1e-6) -> np.ndarray:
    r"""Root-mean-square normalisation over the features of each token.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    gamma : array_like, shape (d,), optional
        Scale; 1 by default.
    eps : float, optional
        Added to the mean square.

    Returns
    -------
    ndarray, shape (..., n, d)

    Raises
    ------
    TypeError
        If ``x``, ``gamma`` or ``beta`` is not an array of real numbers, or
        ``eps`` is not a real number (a string, a bool).
    ValueError
        If ``x`` has the wrong number of axes, ``gamma`` or ``beta`` is not
        ``(d,)``, or any of them holds NaN or ``+-inf``; if ``eps`` is
        negative or not finite, or is not representable (``inf``, or a
        positive ``eps`` that rounds to 0) in float64, where it is added;
        if a float64 ``gamma`` or ``beta`` overflows the compute dtype
        (float32 for float16 ``x``).

    See Also
    --------
    layer_norm

    Notes
    -----
    .. math::

        \mathrm{RMSNorm}(x) = \gamma \odot \frac{x}{\sqrt{\tfrac1d \sum_j x_j^2 + \epsilon}} .

    Unlike layer normalisation, the mean is not subtracted.

    References
    ----------
    :cite:t:`zhang2019root`: RMSNorm.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore import rms_norm
    >>> y = rms_norm(np.array([[3.0, 4.0]]), eps=0.0)
    >>> float(np.sqrt(np.mean(y ** 2)))
    1.0
    """
    x = as_float_array(x, "x", ("...", "d"))
    # eps is added in float64 (see _standardize): it must be finite there, and not round to 0 unless it is 0.
    eps = check_real(eps, "eps", np.result_type(x, np.float64), minimum=0)
    return _affine(_standardize(x, (-1,), eps, centre=False), gamma, None).astype(x.dtype, copy=False)


def instance_norm(
    x: ArrayLike, gamma: ArrayLike | None = None, beta: ArrayLike | None = None, *, eps: float = 1e-5
) -> np.ndarray:
    r"""Instance normalisation: each feature of each sequence over its tokens.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    gamma, beta : array_like, shape (d,), optional
    eps : float, optional

    Returns
    -------
    ndarray, shape (..., n, d)

    Raises
    ------
    TypeError
        If ``x``, ``gamma`` or ``beta`` is not an array of real numbers, or
        ``eps`` is not a real number (a string, a bool).
    ValueError
        If ``x`` has the wrong number of axes, ``gamma`` or ``beta`` is not
        ``(d,)``, or any of them holds NaN or ``+-inf``; if ``eps`` is
        negative or not finite, or is not representable (``inf``, or a
        positive ``eps`` that rounds to 0) in float64, where it is added;
        if a float64 ``gamma`` or ``beta`` overflows the compute dtype
        (float32 for float16 ``x``).

    See Also
    --------
    layer_norm
    batch_norm

    Notes
    -----
    The statistics :math:`\mu_{c}, \sigma^2_{c}` of feature ``c`` are taken over
    the ``n`` tokens of one sequence (axis ``-2``); then
    :math:`y_{ic} = \gamma_c (x_{ic} - \mu_c)/\sqrt{\sigma_c^2 + \epsilon} + \beta_c`.

    References
    ----------
    :cite:t:`ulyanov2016instance`: instance normalisation.

    Examples
    --------
    Mixing tokens, it changes a token's output when another token changes:

    >>> import numpy as np
    >>> from attncore import instance_norm
    >>> x = np.random.default_rng(0).normal(size=(3, 4))
    >>> x2 = x.copy(); x2[2] += 1.0
    >>> bool(np.allclose(instance_norm(x)[0], instance_norm(x2)[0]))
    False
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    # eps is added in float64 (see _standardize): it must be finite there, and not round to 0 unless it is 0.
    eps = check_real(eps, "eps", np.result_type(x, np.float64), minimum=0)
    return _affine(_standardize(x, (-2,), eps), gamma, beta).astype(x.dtype, copy=False)


def batch_norm(
    x: ArrayLike, gamma: ArrayLike | None = None, beta: ArrayLike | None = None, *, eps: float = 1e-5
) -> np.ndarray:
    r"""Batch normalisation with training-mode statistics, per feature.

    Parameters
    ----------
    x : array_like, shape (b, n, d) or (b, d)
        Every axis but the last is pooled: for a batch of sequences, the mean
        and variance of feature ``c`` are taken over all ``b * n`` tokens.
    gamma, beta : array_like, shape (d,), optional
    eps : float, optional

    Returns
    -------
    ndarray, same shape as ``x``

    Raises
    ------
    TypeError
        If ``x``, ``gamma`` or ``beta`` is not an array of real numbers, or
        ``eps`` is not a real number (a string, a bool).
    ValueError
        If ``x`` has the wrong number of axes, ``gamma`` or ``beta`` is not
        ``(d,)``, or any of them holds NaN or ``+-inf``; if ``eps`` is
        negative or not finite, or is not representable (``inf``, or a
        positive ``eps`` that rounds to 0) in float64, where it is added;
        if a float64 ``gamma`` or ``beta`` overflows the compute dtype
        (float32 for float16 ``x``).

    See Also
    --------
    layer_norm
    instance_norm

    Notes
    -----
    :math:`y = \gamma \odot (x - \mu)/\sqrt{\sigma^2 + \epsilon} + \beta` with
    :math:`\mu, \sigma^2 \in \mathbb{R}^d` over every axis but the last.  These
    are the statistics of training mode; at inference a trained network uses
    running averages instead, and then the layer acts on each token alone.

    References
    ----------
    :cite:t:`ioffe2015batch`: batch normalisation.

    Examples
    --------
    The result for one sequence depends on the rest of the batch:

    >>> import numpy as np
    >>> from attncore import batch_norm
    >>> x = np.random.default_rng(0).normal(size=(2, 3, 4))
    >>> bool(np.allclose(batch_norm(x)[:1], batch_norm(x[:1])))
    False
    """
    x = as_float_array(x, "x", ("...", "b", "d"))
    # eps is added in float64 (see _standardize): it must be finite there, and not round to 0 unless it is 0.
    eps = check_real(eps, "eps", np.result_type(x, np.float64), minimum=0)
    return _affine(_standardize(x, tuple(range(x.ndim - 1)), eps), gamma, beta).astype(x.dtype, copy=False)


def _standardize(x, axes, eps, *, centre=True, rate=False):
    """``(x - mean) / sqrt(var + eps)`` over ``axes`` (population variance), or
    ``x / sqrt(mean(x**2) + eps)`` with ``centre=False``; in at least float32.

    Scale-robust: each group is first divided by a power of two ``2**p >= max |x|``
    (exact), so neither the mean nor the sum of squares can overflow, and the
    squares of the deviations that matter cannot underflow.  With ``y = x / 2**p``,

        (x - mean x) / sqrt(var x + eps) = (y - mean y) / sqrt(var y + eps * 4**-p),

    and ``eps * 4**-p`` is formed in float64 (or wider); where it overflows,
    ``var y <= 4`` is below its rounding error and the factor is ``2**p / sqrt(eps)``.
    A group with zero variance and ``eps = 0`` gives 0, the limit as ``eps -> 0``.
    With ``rate=True`` it also returns ``r = (var x + eps)**-1/2`` per group, in float64 (or
    wider; ``inf`` where ``r`` overflows it, or for zero variance with ``eps = 0``), which
    the backward pass needs.
    """
    work = compute_dtype(x)  # float16 accumulates in float32
    x = x.astype(work, copy=False)
    if x.size == 0:  # no groups, or groups without entries: nothing to normalise (and no mean of nothing)
        return (x.copy(), np.ones(np.sum(x, axis=axes, keepdims=True).shape)) if rate else x.copy()
    top = np.max(np.abs(x), axis=axes, keepdims=True)  # one per group
    p = np.frexp(top)[1]  # top < 2**p (p = 0 for an all-zero group)
    y = np.ldexp(x, -p)  # |y| < 1 and max |y| >= 1/2 unless the group is 0
    if centre:
        y -= np.mean(y, axis=axes, keepdims=True)
    stats = np.result_type(work, np.float64)
    var = np.mean(y * y, axis=axes, keepdims=True).astype(stats)  # in [0, 4]
    with np.errstate(over="ignore", divide="ignore"):
        tail = np.ldexp(stats.type(eps), -2 * p)  # eps in the units of y
        factor = 1 / np.sqrt(var + tail)
    huge = np.isinf(tail)
    if np.any(huge):
        factor[huge] = np.ldexp(1 / np.sqrt(stats.type(eps)), p[huge])
    # factor is inf only where every deviation is 0; clip so that 0 * factor = 0, not NaN.
    out = y * np.minimum(factor, np.finfo(work).max).astype(work)
    if not rate:
        return out
    with np.errstate(over="ignore"):
        return out, np.ldexp(factor, -p)  # r = factor / 2**p, of x itself


def _affine(y, gamma, beta):
    """Per-feature scale and shift of the normalised ``y``."""
    if gamma is not None:
        y = y * _feature_param(gamma, "gamma", y)
    if beta is not None:
        y = y + _feature_param(beta, "beta", y)
    return y


def _feature_param(p, name, y):
    p = as_float_array(p, name, (y.shape[-1],), match=("x", y))
    check_fits(p, name, y.dtype)
    return p.astype(y.dtype, copy=False)
