"""The intervals of trained results: ``wilson_interval``, ``mean_interval``, ``t_quantile``.

Three ways, and for each check the wrong implementation it rejects (run here, not assumed):

* independent routes: the Wilson interval found by scanning the score test over a grid of
  rates (rejects the Wald interval); the t quantile checked against the closed forms of the
  t distribution for integer degrees of freedom (Abramowitz and Stegun 26.7.3-4) and against
  a Simpson integral of its density for any (rejects a quantile one degree of freedom off);
  the mean's interval recomputed with ``statistics`` and that closed form (rejects ``s``
  degrees of freedom instead of ``s - 1``, and the divisor ``s`` in the spread); the normal
  quantile from ``statistics.NormalDist`` (rejects the rounded 1.96);
* invariants (hypothesis): a rate's interval holds the rate, lies in [0, 1], mirrors under
  ``k -> n - k``, narrows with more trials at a fixed rate and widens with the confidence;
  a mean's interval moves with a shift, scales with a factor, ignores the order of the seeds;
* structural: ``t_quantile(1, c) = tan(pi c / 2)`` (Cauchy; ``tan(0.45 pi) = 6.3138`` at
  ``c = 0.9``), ``t_quantile(2, c) = c sqrt(2 / (1 - c^2))``, the tables' 2.776 and 2.093,
  the limit 1.959964 for large ``df``, the two routes of ``t_quantile`` agreeing where they
  meet; the coverage of the mean's interval over 20,000 normal samples is 95% (rejects the
  normal quantile in place of Student's, and ``df = s``).

The error messages are checked by their facts (tests/messages.py).
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attncore as ac
from attncore._stats import LARGE_DF
from messages import raises_message

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile, as tabulated


def normal_z(confidence):
    """The two-sided normal quantile from the standard library (Wichura's algorithm); 1 - c is exact for c > 1/2."""
    return -statistics.NormalDist().inv_cdf((1 - confidence) / 2)


def wald(k, n, confidence=0.95):
    """The Wald interval p +- z sqrt(p (1 - p) / n): a wrong implementation the checks must reject."""
    p, z = np.asarray(k) / n, normal_z(confidence)
    return p - z * np.sqrt(p * (1 - p) / n), p + z * np.sqrt(p * (1 - p) / n)


def wilson_by_scan(k, n, confidence=0.95, points=400_001):
    """The rates p that the two-sided score test does not reject, |k - n p| <= z sqrt(n p (1 - p)), on a grid."""
    p = np.linspace(0.0, 1.0, points)
    inside = p[np.abs(k - n * p) <= normal_z(confidence) * np.sqrt(n * p * (1 - p))]
    return inside.min(), inside.max()


def central_by_trig_sum(t, df):
    """P(|T| <= t) for an integer df, by the finite sums of Abramowitz and Stegun 26.7.3 (odd) and 26.7.4 (even)."""
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2:  # cos + (2/3) cos^3 + ... + (2*4*...*(df-3)) / (1*3*...*(df-2)) cos^(df-2)
        term = total = c if df > 1 else 0.0
        for j in range(3, df - 1, 2):
            term *= (j - 1) / j * c * c
            total += term
        return 2 / math.pi * (theta + s * total)
    term = total = 1.0  # 1 + (1/2) cos^2 + (1*3)/(2*4) cos^4 + ... up to cos^(df-2)
    for j in range(2, df - 1, 2):
        term *= (j - 1) / j * c * c
        total += term
    return s * total


def central_by_simpson(t, df, intervals=4000):
    """P(|T| <= t) for any df: twice the integral of the t density from 0 to t, by Simpson's rule."""
    u = np.linspace(0.0, t, intervals + 1)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    f = np.exp(log_norm - (df + 1) / 2 * np.log1p(u * u / df))
    weights = np.ones(intervals + 1)
    weights[1:-1:2], weights[2:-1:2] = 4, 2
    return 2 * (t / intervals / 3) * float(weights @ f)


def cauchy_quantile(c):
    """tan(pi c / 2), written as cot(pi (1 - c) / 2) above c = 1/2 so that 1 - c is not lost near pi / 2."""
    return math.tan(math.pi * c / 2) if c <= 0.5 else 1 / math.tan(math.pi * (1 - c) / 2)


# --------------------------------------------------------------------------------------
# Independent routes
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 5, 20, 61])
def test_wilson_interval_is_the_scan_of_the_score_test(n):
    """Every count of n trials: the ends agree with the scanned score test to the grid's step."""
    low, high = ac.wilson_interval(np.arange(n + 1), n)
    scanned = np.array([wilson_by_scan(k, n) for k in range(n + 1)])
    np.testing.assert_allclose(low, scanned[:, 0], rtol=0, atol=3e-6)
    np.testing.assert_allclose(high, scanned[:, 1], rtol=0, atol=3e-6)


def test_the_scan_rejects_the_wald_interval():
    """The check above has teeth: the Wald interval misses the scan by far more than its tolerance."""
    for k in (0, 1, 6, 15):
        assert np.max(np.abs(np.array(wald(k, 20)) - wilson_by_scan(k, 20))) > 0.03, k


@given(st.integers(1, 10**6).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
       st.floats(0.5, 0.999))
def test_wilson_ends_solve_the_score_equation(kn, confidence):
    """At each end p, (k - n p)^2 = z^2 n p (1 - p) with the standard library's z: the interval is the
    score test's (a Wald interval, or Wilson's with z rounded to 1.96, does not solve it)."""
    k, n = kn
    z = normal_z(confidence)
    for p in ac.wilson_interval(k, n, confidence):
        lhs, rhs = (k - n * p) ** 2, z * z * n * p * (1 - p)
        assert abs(lhs - rhs) <= 1e-9 * max(lhs, rhs, 1e-300) + 1e-12 * (k + 1), (k, n, p)


def test_the_score_equation_rejects_wald_and_a_rounded_z():
    k, n = 15, 20
    for p in wald(k, n):
        assert abs((k - n * p) ** 2 - Z95**2 * n * p * (1 - p)) > 0.1
    centre, half = (k + 1.96**2 / 2) / (n + 1.96**2), 1.96 * math.sqrt(k * (n - k) / n + 1.96**2 / 4) / (n + 1.96**2)
    lhs, rhs = (k - n * (centre + half)) ** 2, Z95**2 * n * (centre + half) * (1 - centre - half)
    assert abs(lhs - rhs) > 1e-9 * rhs


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99, 0.999999])
def test_wilson_uses_the_normal_quantile(confidence):
    """At k = 0 the upper end is z^2 / (n + z^2), so z can be read back: the standard library's, not 1.96."""
    high = ac.wilson_interval(0, 20, confidence)[1]
    z = math.sqrt(20 * high / (1 - high))
    assert abs(z - normal_z(confidence)) < 1e-12 * z
    if confidence == 0.95:
        assert abs(1.96 - normal_z(0.95)) > 1e-5  # the rounded quantile would fail the bound above


@pytest.mark.parametrize("df", list(range(1, 41)) + [57, 100, 333])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_t_quantile_inverts_the_closed_form_distribution(df, confidence):
    """P(|T| <= t) by the trigonometric sums equals the confidence at the quantile (A&S 26.7.3-4)."""
    assert abs(central_by_trig_sum(ac.t_quantile(df, confidence), df) - confidence) < 1e-13


def test_the_closed_form_rejects_a_quantile_one_degree_of_freedom_off():
    for df in (1, 4, 19):
        assert abs(central_by_trig_sum(ac.t_quantile(df + 1), df) - 0.95) > 1e-4
        assert abs(central_by_trig_sum(ac.t_quantile(df), df + 1) - 0.95) > 1e-4


@pytest.mark.parametrize("df", [1.0, 1.5, 2.5, 7.3, 30.5, 900.25])
@pytest.mark.parametrize("confidence", [0.3, 0.8, 0.95])
def test_t_quantile_inverts_the_integral_of_the_density(df, confidence):
    """Non-integer degrees of freedom: Simpson's integral of the density up to the quantile."""
    assert abs(central_by_simpson(ac.t_quantile(df, confidence), df) - confidence) < 1e-10
    assert abs(central_by_simpson(ac.t_quantile(df + 0.5, confidence), df) - confidence) > 1e-8  # a wrong df fails


@pytest.mark.parametrize("shape, axis", [((20,), -1), ((5,), 0), ((3, 20), 1), ((7, 4), 0), ((2, 3, 6), 2)])
def test_mean_interval_against_statistics(shape, axis):
    """Each slice by hand: statistics.mean and statistics.stdev (divisor s - 1), the quantile inverted
    from the closed form by bisection; a quantile with df = s, or the divisor s, is rejected."""
    x = np.random.default_rng(sum(shape)).normal(2.0, 3.0, size=shape)
    mean, half = ac.mean_interval(x, axis=axis)
    s = shape[axis]
    low, high = 0.0, 100.0
    for _ in range(200):  # bisection on the closed form: the quantile, independently of t_quantile
        middle = (low + high) / 2
        low, high = (middle, high) if central_by_trig_sum(middle, s - 1) < 0.95 else (low, middle)
    for index in np.ndindex(*np.delete(shape, axis)):
        values = np.moveaxis(x, axis, -1)[index].tolist()
        want_half = high * statistics.stdev(values) / math.sqrt(s)
        assert abs(mean[index] - statistics.mean(values)) < 1e-12
        assert abs(half[index] - want_half) < 1e-12 * want_half
        assert abs(ac.t_quantile(s) * statistics.stdev(values) / math.sqrt(s) - want_half) > 1e-3 * want_half
        assert abs(high * statistics.pstdev(values) / math.sqrt(s) - want_half) > 1e-3 * want_half


# --------------------------------------------------------------------------------------
# Invariants
# --------------------------------------------------------------------------------------
counts = st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


@given(counts, st.floats(0.05, 0.999))
def test_wilson_holds_the_rate_within_zero_and_one(kn, confidence):
    k, n = kn
    low, high = ac.wilson_interval(k, n, confidence)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert (low == 0.0) == (k == 0) and (high == 1.0) == (k == n)  # exact ends, and only there


def test_within_zero_and_one_rejects_wald():
    low, _ = wald(1, 20)
    assert low < 0  # the Wald interval of 1 of 20 leaves [0, 1]
    assert wald(0, 20) == (0.0, 0.0)  # and 0 of 20 collapses to a point, which the exact ends above reject


@given(counts, st.floats(0.05, 0.999))
def test_wilson_mirrors_under_failures_for_successes(kn, confidence):
    k, n = kn
    low, high = ac.wilson_interval(k, n, confidence)
    mirrored = ac.wilson_interval(n - k, n, confidence)
    assert abs(low - (1 - mirrored[1])) < 1e-12 and abs(high - (1 - mirrored[0])) < 1e-12


def test_the_mirror_rejects_an_interval_centred_on_the_wrong_side():
    """A slip that adds z^2/2 to the failures instead of the successes breaks the mirror."""
    def slipped(k, n, z=Z95):
        centre, half = (k + z * z / 2 * (k < n / 2)) / (n + z * z), z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
        return centre - half, centre + half
    assert abs(slipped(3, 20)[0] - (1 - slipped(17, 20)[1])) > 1e-3


@given(st.integers(1, 200), st.integers(0, 200), st.integers(2, 50), st.floats(0.5, 0.999))
def test_wilson_narrows_with_more_trials_at_a_fixed_rate(n, k, factor, confidence):
    k = min(k, n)
    low, high = ac.wilson_interval(k, n, confidence)
    more = ac.wilson_interval(factor * k, factor * n, confidence)
    assert more[1] - more[0] < high - low


def test_narrowing_rejects_a_width_that_ignores_the_trials():
    """An interval with n fixed at 20 (the notebooks' seed count, hard-coded) does not narrow."""
    width = lambda k, n: np.subtract(*ac.wilson_interval(k * 20 // n, 20))[()]
    assert width(15, 20) == width(150, 200)


@given(counts, st.floats(0.05, 0.9), st.floats(0.01, 0.09))
def test_wilson_widens_with_the_confidence_and_grows_with_k(kn, confidence, more):
    """Rejected (test below): a z fixed at 1.96 whatever the confidence does not widen."""
    k, n = kn
    low, high = ac.wilson_interval(k, n, confidence)
    wide = ac.wilson_interval(k, n, confidence + more)
    assert wide[0] <= low and high <= wide[1] and wide[1] - wide[0] > high - low
    if k < n:
        up = ac.wilson_interval(k + 1, n, confidence)
        assert up[0] > low and up[1] > high


def test_widening_rejects_a_fixed_z():
    def fixed(k, n, confidence, z=1.96):  # the confidence is ignored
        half = z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
        return (k + z * z / 2) / (n + z * z) - half, (k + z * z / 2) / (n + z * z) + half
    width = lambda interval: interval[1] - interval[0]
    assert not width(fixed(3, 20, 0.99)) > width(fixed(3, 20, 0.9))
    assert width(ac.wilson_interval(3, 20, 0.99)) > width(ac.wilson_interval(3, 20, 0.9))


@given(st.integers(0, 2**32 - 1), st.integers(2, 30), st.floats(-1e3, 1e3), st.floats(0.01, 100.0))
def test_mean_interval_moves_and_scales_with_the_values(seed, s, shift, factor):
    """Rejected (test below): a spread taken about 0 instead of the mean, sqrt(mean(x^2)), moves with a shift."""
    x = np.random.default_rng(seed).normal(size=(3, s))
    mean, half = ac.mean_interval(x)
    moved = ac.mean_interval(factor * x + shift)
    np.testing.assert_allclose(moved.mean, factor * mean + shift, rtol=1e-9, atol=1e-9 * (abs(shift) + factor))
    # a shift leaves rounding of the shifted values' size in the spread (two nearly equal values)
    np.testing.assert_allclose(moved.half_width, factor * half, rtol=1e-9, atol=1e-9 * (abs(shift) + factor))
    np.testing.assert_allclose(ac.mean_interval(-x).half_width, half, rtol=1e-12)  # a spread, never negative
    perm = np.random.default_rng(seed + 1).permutation(s)
    np.testing.assert_allclose(ac.mean_interval(x[:, perm]).half_width, half, rtol=1e-12)
    np.testing.assert_allclose(ac.mean_interval(x.T, axis=0).mean, mean, rtol=1e-12)
    interval = ac.mean_interval(x)
    assert np.all((interval.low < mean) & (mean < interval.high))
    np.testing.assert_array_equal(interval.low, mean - half)


def test_shift_invariance_rejects_a_spread_about_zero():
    x = np.random.default_rng(3).normal(size=20)
    about_zero = lambda v: np.sqrt(np.mean(v**2))
    assert abs(about_zero(x + 5.0) - about_zero(x)) > 1.0
    assert abs(ac.mean_interval(x + 5.0).half_width - ac.mean_interval(x).half_width) < 1e-12


@given(st.floats(1.0, 1e6), st.floats(0.05, 0.999))
def test_t_quantile_falls_with_df_towards_the_normal(df, confidence):
    """Rejected: the normal quantile at every df (not above z), or a quantile that grows with df."""
    z = normal_z(confidence)
    t, t_more = ac.t_quantile(df, confidence), ac.t_quantile(df * 1.5 + 1, confidence)
    assert z < t_more < t


# --------------------------------------------------------------------------------------
# Structural
# --------------------------------------------------------------------------------------
@given(st.floats(1e-6, 1 - 1e-9))
def test_one_and_two_degrees_of_freedom_in_closed_form(confidence):
    """df = 1 is the Cauchy law, t = tan(pi c / 2); df = 2 has P(|T| <= t) = t / sqrt(2 + t^2)."""
    assert abs(ac.t_quantile(1, confidence) - cauchy_quantile(confidence)) < 1e-12 * cauchy_quantile(confidence)
    two = confidence * math.sqrt(2 / ((1 - confidence) * (1 + confidence)))
    assert abs(ac.t_quantile(2, confidence) - two) < 1e-12 * two


def test_the_tables():
    """Published values: tan(0.45 pi) = 6.3138 (df 1, 90%), 12.706 (df 1), 2.776 (df 4), 2.093 (df 19) at 95%."""
    assert round(ac.t_quantile(1, 0.9), 4) == 6.3138 == round(math.tan(0.45 * math.pi), 4)
    assert [round(ac.t_quantile(df), 3) for df in (1, 4, 19)] == [12.706, 2.776, 2.093]
    assert round(ac.t_quantile(1, 0.9), 4) != round(ac.t_quantile(1, 0.95), 4)  # the one-sided reading differs
    assert round(ac.t_quantile(1e9), 6) == 1.959964  # the normal's, as df grows


@pytest.mark.parametrize("df", [1e4, 1e5, 1e6, 1e9, 1e15])
def test_large_df_approaches_the_normal_quantile(df):
    """t = z + (z^3 + z) / (4 df) + O(1/df^2) (Abramowitz and Stegun 26.7.5), towards 1.959964.
    Rejected: a first term off by a factor 2, (z^3 + z) / (2 df), misses by 2.4 / df, far above 10 / df^2."""
    t = ac.t_quantile(df)
    assert abs(t - Z95 - (Z95**3 + Z95) / (4 * df)) < 10 / df**2 + 4e-15
    assert t > Z95


@pytest.mark.parametrize("confidence", [1e-9, 0.3, 0.95, 0.999999])
def test_the_two_routes_of_t_quantile_meet(confidence):
    """Below LARGE_DF the continued fraction, from it on the expansion: no step where they meet.
    Rejected (tried): the switch moved down to df = 100, where the expansion's error is about 1e-10."""
    below, at = ac.t_quantile(LARGE_DF * (1 - 1e-12), confidence), ac.t_quantile(LARGE_DF, confidence)
    assert abs(below - at) < 1e-13 * at
    slope = ac.t_quantile(LARGE_DF / 2, confidence) - ac.t_quantile(LARGE_DF, confidence)
    assert slope > 0 and abs(ac.t_quantile(LARGE_DF * 2, confidence) - at) < slope  # smooth, no jump


def test_extreme_confidences_keep_their_digits():
    """A confidence near 0 or near 1 is not lost to the rounding of 1 - c.
    Rejected (tried): always comparing the tail with (1 - c) / 2 returns 5e-324 for c = 1e-300, not 1.6e-300."""
    for c in (1e-300, 1e-12):
        assert abs(ac.t_quantile(1, c) / cauchy_quantile(c) - 1) < 1e-12
    c = 1e-12  # z = c sqrt(pi / 2) (1 + O(c^2)), and at k = 0 of 1 trial the upper end is z^2 / (1 + z^2)
    assert abs(ac.wilson_interval(0, 1, c)[1] - c * c * math.pi / 2) < 1e-9 * c * c
    c = 1 - 2**-50
    assert abs(ac.t_quantile(1, c) / cauchy_quantile(c) - 1) < 1e-12


def test_mean_interval_covers_the_mean_95_percent_of_the_time():
    """20,000 samples of 3 normal values: 95% of the intervals hold the true mean (binomial sd 0.0015).
    The normal quantile in place of Student's covers 81%, df = s instead of s - 1 covers 91%
    (P(|T_2| <= t) = t / sqrt(2 + t^2) at t = 1.960 and 3.182)."""
    x = np.random.default_rng(20261122).normal(1.0, 2.0, size=(20_000, 3))
    mean, half = ac.mean_interval(x)
    sd = x.std(axis=1, ddof=1) / math.sqrt(3)
    coverage = lambda h: np.mean(np.abs(mean - 1.0) <= h)
    assert abs(coverage(half) - 0.95) < 0.006
    assert coverage(Z95 * sd) < 0.85 and coverage(ac.t_quantile(3) * sd) < 0.93


# --------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------
def test_messages_state_the_facts():
    with raises_message(ValueError, "successes", names=["trials"], values=[21, 20], says="out of range"):
        ac.wilson_interval(21, 20)
    with raises_message(ValueError, "successes", names=["trials"], shapes=[(3,), (1,)], values=[5, 4]):
        ac.wilson_interval(np.array([1, 5, 2]), 4)
    with raises_message(TypeError, "successes", values=[0.75], says="integer", remedy=("pass", "successes")):
        ac.wilson_interval(0.75, 20)
    with raises_message(TypeError, "trials", dtypes=["float64"], says="integer"):
        ac.wilson_interval(3, np.array([20.0]))
    with raises_message(ValueError, "trials", values=[0], says="out of range"):
        ac.wilson_interval(0, 0)
    with raises_message(ValueError, "successes", names=["trials"], shapes=[(2,), (3,)], says="broadcast",
                        remedy=("pass", "trials")):
        ac.wilson_interval([1, 2], [3, 4, 5])
    with raises_message(ValueError, "confidence", values=[95], says="out of range", remedy=("pass", "fraction")):
        ac.wilson_interval(1, 2, confidence=95)
    with raises_message(ValueError, "x", names=["axis"], shapes=[(3, 1)], says="at least two", remedy=("pass", "axis")):
        ac.mean_interval(np.ones((3, 1)))
    with raises_message(ValueError, "x", shapes=[(2,)], says="finite"):
        ac.mean_interval([1.0, np.inf])
    with raises_message(ValueError, "x", shapes=[(3,)], dtypes=["float64"], says="overflow", remedy=("shrink", "x")):
        ac.mean_interval([1e308, -1e308, 1e308])
    with raises_message(ValueError, "df", values=[0.5], says="out of range"):
        ac.t_quantile(0.5)
    with raises_message(TypeError, "df", says="real"):
        ac.t_quantile("4")
