r"""Intervals for trained evidence: a success rate over seeds, and a mean over seeds.

A trained experiment reports how many of its seeds succeed, or the mean of a
score over its seeds, and either number comes with a 95% interval:
:func:`wilson_interval` for a rate of successes (Wilson's score interval) and
:func:`mean_interval` for a mean (Student's :math:`t` interval), whose
quantile :func:`t_quantile` computes from the regularised incomplete beta
function, with the standard library's ``math`` only (no scipy at run time).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import as_float_array, check_axis, check_real, describe

#: The continued fraction of the incomplete beta function stops when a step changes it by less.
_CF_TOLERANCE = 1e-16
#: ... or after this many steps (it needs a few times sqrt(df) of them: a few hundred at df = 1e4).
_CF_STEPS = 100_000
#: From this many degrees of freedom on, the t quantile is the normal one plus four terms of
#: its expansion in 1/df, whose error, of order z^11 / df^5, is below 1e-14 there even for
#: z = 8.3 (a confidence of 1 - 1e-16); below it, the continued fraction.
LARGE_DF = 1e4


class MeanInterval(NamedTuple):
    """A mean and the half-width of its symmetric interval, ``mean +- half_width``.

    It unpacks as ``mean, half_width = mean_interval(x)``; :attr:`low` and
    :attr:`high` are the ends of the interval.
    """

    mean: np.ndarray | np.float64
    half_width: np.ndarray | np.float64

    @property
    def low(self) -> np.ndarray | np.float64:
        """The lower end, ``mean - half_width``."""
        return self.mean - self.half_width

    @property
    def high(self) -> np.ndarray | np.float64:
        """The upper end, ``mean + half_width``."""
        return self.mean + self.half_width


def _check_confidence(confidence) -> float:
    """``confidence`` as a float strictly between 0 and 1, or a TypeError/ValueError that says so."""
    value = float(check_real(confidence, "confidence"))
    if not 0 < value < 1:
        raise ValueError(f"confidence must lie between 0 and 1, both excluded (0.95 for a 95% interval), "
                         f"got {describe(confidence)}; pass a fraction, not a percentage")
    return value


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)`` (modified Lentz), converging for ``x < (a + 1) / (a + b + 2)``."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, _CF_STEPS):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d, c = 1.0 + numerator * d, 1.0 + numerator / c
            d, c = 1.0 / (d if abs(d) > tiny else tiny), (c if abs(c) > tiny else tiny)
            fraction *= d * c
        if abs(d * c - 1.0) < _CF_TOLERANCE:
            return fraction
    raise ArithmeticError(f"the incomplete beta fraction did not converge (a = {a}, b = {b}, x = {x})")


def _log_gamma_ratio(a: float) -> float:
    """``log(Gamma(a + 1/2) / Gamma(a))``, without the cancellation of two large ``lgamma`` for large ``a``."""
    if a < 50:
        return math.lgamma(a + 0.5) - math.lgamma(a)
    stirling = lambda z: 1 / (12 * z) - 1 / (360 * z**3) + 1 / (1260 * z**5)  # log Gamma(z) minus its leading terms
    return a * math.log1p(0.5 / a) + 0.5 * math.log(a) - 0.5 + stirling(a + 0.5) - stirling(a)


def _t_probabilities(t: float, df: float) -> tuple[float, float]:
    """``(P(|T| <= t), P(T > t))`` for Student's ``T`` with ``df`` degrees of freedom and ``t > 0``.

    With ``x = df / (df + t^2)``, ``P(T > t) = I_x(df/2, 1/2) / 2`` and ``P(|T| <= t) = I_{1-x}(1/2, df/2)``
    (regularised incomplete beta functions); the smaller of the two is computed, the other is its complement.
    """
    a, b, r = df / 2, 0.5, t * t / df
    x, y = 1 / (1 + r), r / (1 + r)  # x and 1 - x, each without cancellation
    log_r = 2 * math.log(t) - math.log(df)  # finite even where r underflows
    log_front = -a * math.log1p(r) + b * (log_r - math.log1p(r)) - 0.5 * math.log(math.pi) + _log_gamma_ratio(a)
    if x < (a + 1) / (a + b + 2):  # the fraction of I_x(a, b) converges: the tail is the small one
        tail = math.exp(log_front) * _beta_fraction(a, b, x) / a / 2
        return 1 - 2 * tail, tail
    central = math.exp(log_front) * _beta_fraction(b, a, y) / b
    return central, (1 - central) / 2


def _two_sided_quantile(central, tail, confidence: float) -> float:
    """The ``t >= 0`` with ``central(t) = P(|X| <= t) = confidence``, for a law symmetric about 0.

    ``tail(t) = P(X > t)``.  The side whose probability is small is compared, so that neither a
    confidence near 0 nor one near 1 is lost to the rounding of ``1 - confidence``; ``t`` is then
    bracketed by doubling and found by bisection, down to two neighbouring floats.
    """
    alpha = (1.0 - confidence) / 2
    short = (lambda t: central(t) < confidence) if confidence <= 0.5 else (lambda t: tail(t) > alpha)
    low, high = 0.0, 1.0
    while short(high):
        low, high = high, 2 * high
    while True:
        middle = (low + high) / 2
        if not low < middle < high:
            return high
        low, high = (middle, high) if short(middle) else (low, middle)


def _normal_quantile(confidence: float) -> float:
    """The ``z`` with ``P(|Z| <= z) = confidence`` for a standard normal ``Z``."""
    root2 = math.sqrt(2.0)
    return _two_sided_quantile(lambda z: math.erf(z / root2), lambda z: math.erfc(z / root2) / 2, confidence)


def _t_quantile_large_df(df: float, confidence: float) -> float:
    """Student's two-sided quantile for ``df >= LARGE_DF``: the expansion of Abramowitz and Stegun, 26.7.5."""
    z = _normal_quantile(confidence)
    g = ((z**3 + z) / 4,
         (5 * z**5 + 16 * z**3 + 3 * z) / 96,
         (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
         (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
    return z + sum(term / df ** (i + 1) for i, term in enumerate(g))


def t_quantile(df: float, confidence: float = 0.95) -> float:
    r"""The two-sided critical value of Student's :math:`t` distribution.

    Parameters
    ----------
    df : float
        Degrees of freedom :math:`\nu \ge 1` (``s - 1`` for a mean over ``s``
        values); need not be an integer.
    confidence : float
        The probability the interval :math:`[-t, t]` holds, strictly between
        0 and 1 (0.95 for a 95% interval).

    Returns
    -------
    float
        :math:`t > 0` with :math:`P(|T| \le t) =` ``confidence``, i.e. the
        quantile :math:`t_{(1 + c)/2,\,\nu}` of the tables, to a relative
        error below :math:`10^{-12}`.

    Raises
    ------
    TypeError
        If ``df`` or ``confidence`` is not a real number.
    ValueError
        If ``df`` is below 1 or not finite, or ``confidence`` is not strictly
        between 0 and 1.

    See Also
    --------
    mean_interval : the interval of a mean over seeds, which uses it.

    Notes
    -----
    The tail of :math:`T` is a regularised incomplete beta function,

    .. math::

        P(T > t) = \tfrac12\, I_{\nu / (\nu + t^2)}\!\left(\tfrac{\nu}{2}, \tfrac12\right),

    evaluated by its continued fraction (modified Lentz) with ``math.lgamma``
    (for a confidence up to 1/2, :math:`P(|T| \le t) = I_{t^2/(\nu + t^2)}
    (\tfrac12, \tfrac{\nu}{2})` instead, so that a small confidence is not
    rounded away); :math:`t` is then found by bisection to the last bit of a
    float.  For :math:`\nu \ge 10^4` the fraction is
    slow and the quantile is the normal one, :math:`z`, plus four terms of its
    expansion in :math:`1/\nu` (Abramowitz and Stegun, 26.7.5), whose error
    is below :math:`10^{-14}` there.  :math:`\nu = 1` is the Cauchy law,
    :math:`t = \tan(\pi c / 2)`.

    Examples
    --------
    The quantile falls with the degrees of freedom, towards the normal 1.96:

    >>> from attncore import t_quantile
    >>> [round(t_quantile(df), 3) for df in (1, 4, 19, 1000)]
    [12.706, 2.776, 2.093, 1.962]
    """
    df = float(check_real(df, "df"))
    if df < 1:
        raise ValueError(f"df must be >= 1 (s - 1 degrees of freedom for a mean over s >= 2 values), got {describe(df)}")
    confidence = _check_confidence(confidence)
    if df >= LARGE_DF:
        return _t_quantile_large_df(df, confidence)
    return _t_quantile_fraction(df, confidence)


@functools.lru_cache(maxsize=256)  # a pure function of two floats: trained notebooks ask for the same few often
def _t_quantile_fraction(df: float, confidence: float) -> float:
    """:func:`t_quantile` for validated ``df < LARGE_DF``: bisection on the continued fraction."""
    return _two_sided_quantile(lambda t: _t_probabilities(t, df)[0], lambda t: _t_probabilities(t, df)[1], confidence)


def _counts(value, name: str, minimum: int, what: str) -> np.ndarray:
    """``value`` as an integer array of entries ``>= minimum``: TypeError unless integers, ValueError below."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):  # ragged nested sequences
        arr = np.asarray(None)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be {what}: an integer or an array of integers, got {describe(value)}; "
                        f"pass {name} as whole numbers (a rate or a float count is not {what})")
    if np.any(arr < minimum):
        first = tuple(int(i) for i in np.argwhere(arr < minimum)[0]) if arr.ndim else ()
        where = f" at index {first} of an array of shape {arr.shape}" if arr.ndim else ""
        raise ValueError(f"{name} must be >= {minimum}, got {int(arr[first])}{where}")
    return arr


def wilson_interval(
    successes: ArrayLike, trials: ArrayLike, confidence: float = 0.95
) -> tuple[np.ndarray | np.float64, np.ndarray | np.float64]:
    r"""Wilson's score interval for a success rate: ``successes`` of ``trials``.

    Parameters
    ----------
    successes : int or array_like of int
        Number of successes :math:`k`, ``0 <= k <= trials``.
    trials : int or array_like of int
        Number of trials :math:`n \ge 1` (seeds); broadcast against
        ``successes``.
    confidence : float
        Strictly between 0 and 1 (0.95 for a 95% interval).

    Returns
    -------
    low, high : ndarray of float64, shape of ``successes`` and ``trials`` broadcast
        The ends of the interval, within :math:`[0, 1]`; numpy float64
        scalars for scalar input.  ``low`` is exactly 0 at :math:`k = 0` and
        ``high`` exactly 1 at :math:`k = n`.

    Raises
    ------
    TypeError
        If ``successes`` or ``trials`` is not an integer or an integer array
        (a float, even ``20.0``, a bool or a rate), or ``confidence`` not a
        real number.
    ValueError
        If ``successes < 0``, ``trials < 1`` or ``successes > trials``
        anywhere, if their shapes do not broadcast, or if ``confidence`` is
        not strictly between 0 and 1.

    See Also
    --------
    mean_interval : the interval of a mean over seeds.

    Notes
    -----
    The interval holds the rates :math:`p` that a two-sided score test at
    level :math:`1 - c` does not reject, :math:`|k - np| \le z \sqrt{n p (1 - p)}`
    with :math:`P(|Z| \le z) = c`; solving the quadratic in :math:`p`,

    .. math::

        p_\pm = \frac{k + z^2/2 \pm z \sqrt{k (n - k) / n + z^2 / 4}}{n + z^2}.

    Unlike the Wald interval :math:`\hat p \pm z \sqrt{\hat p (1 - \hat p) / n}`
    it does not shrink to a point at :math:`k = 0` or :math:`k = n` and never
    leaves :math:`[0, 1]`: 20 successes of 20 give :math:`[0.839, 1]`.

    References
    ----------
    :cite:t:`wilson1927probable`: the score interval.

    Examples
    --------
    Every count's interval holds its rate, and ``n - k`` successes mirror
    ``k`` of them:

    >>> import numpy as np
    >>> from attncore import wilson_interval
    >>> k = np.arange(21)
    >>> low, high = wilson_interval(k, 20)
    >>> bool(np.all((low <= k / 20) & (k / 20 <= high)) and np.allclose(low, 1 - high[::-1]))
    True
    """
    k = _counts(successes, "successes", 0, "a count of successes")
    n = _counts(trials, "trials", 1, "a count of trials")
    try:
        shape = np.broadcast_shapes(k.shape, n.shape)
    except ValueError:
        raise ValueError(f"successes of shape {k.shape} and trials of shape {n.shape} do not broadcast; "
                         "pass one trials count, or one per successes count") from None
    over = np.broadcast_to(k > n, shape)
    if over.any():
        first = tuple(int(i) for i in np.argwhere(over)[0])
        where = f" at index {first} of the broadcast shape {shape}" if shape else ""
        raise ValueError(f"successes must be <= trials, got {np.broadcast_to(k, shape)[first]} successes of "
                         f"{np.broadcast_to(n, shape)[first]} trials{where}")
    z = _normal_quantile(_check_confidence(confidence))
    k, n = k.astype(np.float64), n.astype(np.float64)
    centre = (k + z * z / 2) / (n + z * z)
    half = z * np.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    low = np.where(k == 0, 0.0, centre - half)  # exactly 0 and 1 at the ends, not 0 up to rounding
    high = np.where(k == n, 1.0, centre + half)
    return low[()], high[()]


def mean_interval(x: ArrayLike, axis: int = -1, confidence: float = 0.95) -> MeanInterval:
    r"""The mean of ``x`` along ``axis`` and the half-width of its Student :math:`t` interval.

    Parameters
    ----------
    x : array_like of real numbers, shape (..., s, ...)
        The values, for example one score per seed along ``axis``; at least
        two along ``axis``, all finite.
    axis : int
        The axis of the values (the seeds).
    confidence : float
        Strictly between 0 and 1 (0.95 for a 95% interval).

    Returns
    -------
    MeanInterval
        A NamedTuple ``(mean, half_width)`` of float64 arrays, ``x``'s shape
        without ``axis`` (numpy float64 scalars for 1-d ``x``): the interval
        is ``mean +- half_width``, its ends ``.low`` and ``.high``.

    Raises
    ------
    TypeError
        If ``x`` is not an array of real numbers, ``axis`` not an integer or
        ``confidence`` not a real number.
    ValueError
        If ``x`` holds NaN or an infinity, has fewer than two values along
        ``axis``, or its mean or spread overflows float64; if ``axis`` is out
        of range; if ``confidence`` is not strictly between 0 and 1.

    See Also
    --------
    t_quantile : the quantile the half-width is scaled by.
    wilson_interval : the interval of a success rate.

    Notes
    -----
    For :math:`s` values with mean :math:`\bar x` and sample standard
    deviation :math:`\mathrm{sd}` (divisor :math:`s - 1`),

    .. math::

        \bar x \pm t_{s-1}\, \frac{\mathrm{sd}}{\sqrt s},

    with :math:`t_{s-1}` = ``t_quantile(s - 1, confidence)`` (2.093 for 20
    seeds at 95%, 2.776 for 5): exact for normal values, approximate for
    others.  It is an interval for the *mean* of the values' distribution, not
    a range in which another seed's value will fall.

    References
    ----------
    :cite:t:`student1908probable`: the :math:`t` distribution of the mean.

    Examples
    --------
    The interval is centred on the mean, and moves with the values:

    >>> import numpy as np
    >>> from attncore import mean_interval
    >>> x = np.random.default_rng(0).normal(size=(3, 20))
    >>> mean, half = mean_interval(x)
    >>> shifted = mean_interval(x + 5.0)
    >>> bool(np.allclose(shifted.mean, mean + 5) and np.allclose(shifted.half_width, half) and np.all(half > 0))
    True
    """
    x = as_float_array(x, "x")
    axis = check_axis(axis, x.ndim, "x")
    s = x.shape[axis]
    if s < 2:
        raise ValueError(f"x must have at least 2 values along axis {axis} for a spread, got shape {x.shape}; "
                         "pass the values (seeds) along axis, or another axis")
    confidence = _check_confidence(confidence)
    x = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        mean, sd = x.mean(axis=axis), x.std(axis=axis, ddof=1)
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(sd))):
        raise ValueError(f"the mean or the spread of x (shape {x.shape}, largest |x| {np.abs(x).max():.3g}) "
                         "overflows float64; rescale x")
    return MeanInterval(mean[()], (t_quantile(s - 1, confidence) * sd / math.sqrt(s))[()])
