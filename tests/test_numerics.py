"""Numerics across each dtype's range: attention, softmax and the norms against exact references.

The references are plain loops over ``mpmath`` numbers (60 significant digits and
an unbounded exponent), written from the formulas, never from ``attncore``: every
float16/32/64 input converts to ``mpmath`` exactly, so the reference is the exact
answer for the exact input, rounded once to float64 for the comparison.

Tolerances come from the dtype's unit roundoff ``eps`` (``finfo.eps``), its smallest
subnormal ``tiny``, and how much the problem amplifies rounding (a condition
factor); each helper below states its bound and why.  A wrong answer of the kinds
the issue found (``inf``, ``nan``, a row of zeros, a norm of zeros) misses every
one of these tolerances by orders of magnitude, and ``test_an_unshifted_softmax_is_rejected``
removes the shift by the row maximum to show that the edge cases catch it.

Where the plain method cannot compute an answer in the dtype (a score, a weight of
``normalize="none"`` or an output beyond its largest float), attention must raise
``ValueError`` instead; :func:`plain_verdict` decides which case an input is in from the
exact numbers, with a grey zone near the largest float where either is right.
"""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import importlib
from attncore import attention, attention_weights, batch_norm, instance_norm, layer_norm, rms_norm, softmax
from attncore._kernels import linear_attention, positive_random_features
from messages import assert_message, raises_message

attention_module = importlib.import_module("attncore._attention")

mp = mpmath.mp
mp.dps = 60

DTYPES = [np.float16, np.float32, np.float64]
WIDTH = {np.dtype(np.float16): 16, np.dtype(np.float32): 32, np.dtype(np.float64): 64}


def eps(dtype):
    return float(np.finfo(dtype).eps)


def work_eps(dtype):
    """The unit roundoff of the documented compute dtype: float16 is computed in float32
    and rounded once, so its results must be float32-accurate before that rounding."""
    return eps(np.result_type(dtype, np.float32))


def tiny(dtype):
    """The smallest subnormal: the absolute rounding error of gradual underflow."""
    return float(np.finfo(dtype).smallest_subnormal)


def big(dtype):
    return float(np.finfo(dtype).max)


def X(value):
    """A float16/32/64 number as an exact mpmath number."""
    return mp.mpf(float(value))


# ---------------------------------------------------------------- references


def ref_attention(q, k, v, *, scale=None, bias=None, reweight=None, normalize="softmax", bounds=None):
    """Exact attention by plain loops: ``(out, A, C)``.

    With a dict ``bounds``, also records there ``"sums"``, the largest
    ``sum_t |q_it k_jt| scale + |b_ij|`` (a bound on every partial sum of a score),
    ``"score"``, the largest exact ``|s_ij|``, and ``"weight"``, the largest exact
    weight times ``max(1, |r_ij|)``.

    ``A[i, c] = sum_j |w_ij r_ij v_jc|`` is the scale of the arithmetic's rounding error.
    ``C[i, c] = sum_j min(w_ij expm1(2 delta_i), 1) |r_ij v_jc|`` bounds the effect of the
    rounded scores: ``delta_i`` bounds the error of every computed score of row ``i``
    (``(k + 3) eps sum_t |q_it k_jt| scale`` for the dot product and the scaling,
    ``eps |b_ij|`` for the bias, ``tiny`` per product that can underflow); a score error
    ``delta_j`` multiplies weight ``j`` by ``exp(delta_j)`` and the denominator by at most
    ``exp(max delta)``, so a weight moves by at most ``w expm1(2 delta)``, and by at most 1
    since softmax and l2 weights lie in [0, 1].
    """
    n, dk = q.shape
    m, dv = v.shape
    if bounds is not None:
        bounds["keys"] = 1 if normalize == "none" else m
    dtype = np.result_type(q, k, v)
    e_, t_ = work_eps(dtype), tiny(dtype)
    scale = 1 / mp.sqrt(dk) if scale is None else X(scale)
    out, A, C = np.zeros((n, dv)), np.zeros((n, dv)), np.zeros((n, dv))
    for i in range(n):
        scores, sizes = [], []
        for j in range(m):
            products = [X(q[i, t]) * X(k[j, t]) for t in range(dk)]
            b = X(bias[i, j]) if bias is not None else mp.mpf(0)
            scores.append(mp.fsum(products) * scale + b)
            if bounds is not None:
                bounds["sums"] = max(bounds.get("sums", 0), mp.fsum(abs(p) for p in products) * abs(scale) + abs(b))
                bounds["score"] = max(bounds.get("score", 0), abs(scores[-1]))
            sizes.append(float((dk + 3) * e_ * (mp.fsum(abs(p) for p in products) * scale + abs(b))
                               + t_ * (dk + 1) * (1 + mp.fsum(abs(X(k[j, t])) for t in range(dk)))))
        delta = max(sizes, default=0.0)
        if m == 0:
            continue
        # exp(s - c) / D(exp(s - c)) = exp(s) / D(exp(s)) exactly; "none" has no ratio to shift.
        c = max(scores) if normalize != "none" else 0
        e = [mp.exp(s - c) for s in scores]
        if normalize == "softmax":
            weights = [x / mp.fsum(e) for x in e]
        elif normalize == "l2":
            norm = mp.sqrt(mp.fsum(x * x for x in e))
            weights = [x / norm for x in e]
        else:
            weights = e
        if bounds is not None:
            size = [w * max(1, abs(X(reweight[i, j])) if reweight is not None else 1) for j, w in enumerate(weights)]
            bounds["weight"] = max(bounds.get("weight", 0), *size)
        for col in range(dv):
            values = [(X(reweight[i, j]) if reweight is not None else 1) * X(v[j, col]) for j in range(m)]
            terms = [w * x for w, x in zip(weights, values)]
            out[i, col] = float(mp.fsum(terms))
            A[i, col] = float(mp.fsum(abs(t) for t in terms))
            moved = [min(w * mp.expm1(2 * delta), 1) if normalize != "none" else w * mp.expm1(2 * delta)
                     for w in weights]
            C[i, col] = float(mp.fsum(d * abs(x) for d, x in zip(moved, values)))
    return out, A, C


def attention_tolerance(dtype, m, A, C, ref):
    """Forward error bound of attention, times 2: the rounded scores move the output by
    at most ``C`` (see :func:`ref_attention`); exp, the m-term sums and the division add
    ``(2m + 10) eps`` (of the compute dtype) relative to ``sum_j |w~_j r_j v_j| <= A + C``;
    the final rounding to ``dtype`` adds ``eps/2 |out|``; gradual underflow of the
    products and of the quotient adds at most ``(4m + 4) tiny``.
    """
    with np.errstate(over="ignore"):
        return 2 * (C + (2 * m + 10) * work_eps(dtype) * (A + C) + eps(dtype) / 2 * np.abs(ref)
                    + (4 * m + 4) * tiny(dtype))


def ref_softmax(x, delta):
    """Exact softmax along the last axis of a 2-D array: ``(out, C)``, where
    ``C = min(w expm1(2 delta), 1)`` bounds how far a weight moves when every logit of
    its row is off by at most ``delta`` (row-wise), as in :func:`ref_attention`."""
    out, C = np.zeros(x.shape), np.zeros(x.shape)
    for i in range(x.shape[0]):
        row = [X(a) for a in x[i]]
        c = max(row)
        e = [mp.exp(a - c) for a in row]
        total = mp.fsum(e)
        out[i] = [float(a / total) for a in e]
        C[i] = [float(min(a / total * mp.expm1(2 * X(delta[i])), 1)) for a in e]
    return out, C


def ref_norm(x, axes, eps_, centre=True):
    """Exact ``(x - mean) / sqrt(var + eps)`` (or RMS) over ``axes``: ``(out, cond)``.

    ``cond = max |x| / sqrt(var + eps)`` per group: the rounding errors of the mean
    and of the deviations are relative to ``max |x|``, and they are divided by the
    computed standard deviation.
    """
    x64 = x.astype(np.float64)
    moved = np.moveaxis(x64, axes, tuple(range(-len(axes), 0)))
    flat = moved.reshape(moved.shape[: moved.ndim - len(axes)] + (-1,))
    out = np.zeros(flat.shape)
    cond = np.zeros(flat.shape)
    for idx in np.ndindex(flat.shape[:-1]):
        group = [X(a) for a in flat[idx]]
        mean = mp.fsum(group) / len(group) if centre else mp.mpf(0)
        dev = [a - mean for a in group]
        var = mp.fsum(d * d for d in dev) / len(group)
        den = mp.sqrt(var + X(eps_))
        if den == 0:  # constant group, eps = 0: the limit eps -> 0 of 0 / sqrt(eps) is 0, but
            out[idx] = 0.0  # the rounding of the mean is divided by sigma = 0: no accuracy to ask for
            cond[idx] = math.inf
            continue
        out[idx] = [float(d / den) for d in dev]
        cond[idx] = float(max(abs(a) for a in group) / den)
    shape = moved.shape
    back = lambda a: np.moveaxis(a.reshape(shape), tuple(range(-len(axes), 0)), axes)  # noqa: E731
    return back(out), back(cond)


def assert_within(got, ref, tol, what):
    got = np.asarray(got, dtype=np.float64)
    assert np.all(np.isfinite(got)), f"{what}: non-finite result {got}"
    err = np.abs(got - ref)
    worst = np.unravel_index(np.argmax(err - tol), err.shape) if err.size else ()
    assert np.all(err <= tol), (
        f"{what}: |error| {err[worst]:.3g} > tolerance {tol[worst]:.3g} at {worst}; "
        f"got {got[worst]!r}, exact {ref[worst]!r}")


def plain_verdict(dtype, bounds, ref, A, C):
    """``"result"``, ``"error"`` or ``"either"``: what attention must do for an input whose
    exact numbers are ``bounds`` (see :func:`ref_attention`), answer ``ref``, ``A`` and ``C``.

    The plain method forms every score in the compute dtype (float32 for float16), the
    numerators of the weights there too (at most 1 for softmax and l2, whose denominators are
    at most m), their product with v, divided by the denominators, and rounds the output to
    ``dtype``.  It can compute the answer when every partial sum of a score, every weight
    (times the reweight) and ``m (A + C + |ref|)`` (which bounds every partial sum of the
    product) stay below a quarter of the largest float: then
    nothing overflows by rounding (with ``C``, the most the rounded scores can move the output).  It cannot when an exact score, a weight or an output
    lies beyond the largest float: a ``ValueError`` is due.  Between the two, either is right.
    """
    work = big(np.result_type(dtype, np.float32))
    with np.errstate(over="ignore"):
        out = float(np.max(np.abs(ref) + A + C, initial=0.0))
        beyond_out = bool(np.any(np.abs(ref) > big(dtype)))
    if bounds.get("score", 0) > work or bounds.get("weight", 0) > work or beyond_out:
        return "error"
    if bounds.get("sums", 0) <= work / 4 and bounds.get("weight", 0) <= work / 4 and out * bounds["keys"] <= big(dtype) / 4:
        return "result"
    return "either"


def check_attention(q, k, v, *, example=True, expect=None, **kw):
    """attention against the exact answer, within the bound, or a ``ValueError`` where the
    plain method overflows (:func:`plain_verdict`; ``expect`` overrides it).  In a hypothesis
    ``example`` an answer too close to the largest float is skipped; elsewhere it is an error."""
    bounds = {}
    ref, A, C = ref_attention(q, k, v, bounds=bounds, **kw)
    dtype = np.result_type(q, k, v)
    verdict = expect or plain_verdict(dtype, bounds, ref, A, C)
    if call_or_overflow(lambda: attention(q, k, v, **kw), [verdict]) is None:
        return
    tol = attention_tolerance(dtype, k.shape[0], A, C, ref)
    if kw.get("reweight") is not None:
        # The weights times reweight are rounded before the product with v: a product in
        # the subnormal range is off by tiny/2, which v then multiplies (m terms).
        tol = tol + 2 * k.shape[0] * tiny(dtype) * np.max(np.abs(v.astype(np.float64)), axis=0)
    assume_representable(ref, tol, dtype, example)
    got = attention(q, k, v, **kw)
    assert got.dtype == dtype
    assert_within(got, ref, tol, f"attention {dtype.name} {kw}")


def call_or_overflow(call, verdicts):
    """``call()``, or None after a ``ValueError`` about an overflow; which of the two is due
    follows from the verdicts (:func:`plain_verdict`) of the rows the call computes."""
    try:
        with np.errstate(over="ignore", under="ignore"):
            got = call()
    except ValueError as error:
        assert_message(error, says="overflow")
        assert set(verdicts) != {"result"}, error
        return None
    assert "error" not in verdicts, f"a result where the plain method overflows: {verdicts}"
    return got


def assume_representable(ref, tol, dtype, example):
    """Only answers that every result within the tolerance can represent: an
    ill-conditioned problem may round to just beyond the largest float."""
    with np.errstate(over="ignore"):
        ok = bool(np.all(np.abs(ref) + tol <= big(dtype)))
    if example:
        assume(ok)
    else:
        assert ok, f"edge case with an answer the dtype cannot hold: {ref}"


# ---------------------------------------------------------------- strategies


@st.composite
def float_arrays(draw, dtype, shape):
    """Finite arrays of ``dtype`` from one of three regimes: moderate values, moderate
    values scaled by one power of two anywhere in the exponent range, or entries each
    drawn from the whole range (subnormals and the largest floats included)."""
    width = WIDTH[np.dtype(dtype)]
    regime = draw(st.sampled_from(["moderate", "scaled", "wide"]))
    if regime == "wide":
        elements = st.floats(allow_nan=False, allow_infinity=False, width=width)
        return draw(hnp.arrays(dtype, shape, elements=elements))
    a = draw(hnp.arrays(dtype, shape, elements=st.floats(-4, 4, width=width)))
    if regime == "scaled":
        info = np.finfo(dtype)
        e = draw(st.integers(int(info.minexp) - int(info.nmant), int(info.maxexp) - 3))
        with np.errstate(under="ignore"):
            a = np.ldexp(a, e).astype(dtype)
    return a


dtypes = st.sampled_from(DTYPES)
sizes = st.integers(1, 3)


# ---------------------------------------------------------------- properties


@given(st.data(), dtypes, sizes, st.integers(1, 4), sizes, st.integers(1, 2),
       st.sampled_from(["softmax", "l2"]), st.booleans(), st.booleans())
def test_attention_matches_exact_answer(data, dtype, n, m, dk, dv, normalize, with_bias, with_reweight):
    q = data.draw(float_arrays(dtype, (n, dk)))
    k = data.draw(float_arrays(dtype, (m, dk)))
    v = data.draw(float_arrays(dtype, (m, dv)))
    bias = data.draw(float_arrays(dtype, (n, m))) if with_bias else None
    reweight = data.draw(float_arrays(dtype, (n, m))) if with_reweight else None
    check_attention(q, k, v, bias=bias, reweight=reweight, normalize=normalize)


@given(st.data(), dtypes, sizes, st.integers(1, 5))
def test_softmax_matches_exact_answer(data, dtype, n, m):
    x = data.draw(float_arrays(dtype, (n, m)))
    got = softmax(x)
    assert got.dtype == dtype
    # Subtracting the row maximum c rounds x_j - c by eps |x_j - c| <= 2 eps max|x| (delta),
    # which moves weight j by at most C (see ref_softmax); exp, the sum and the division add
    # (m + 6) eps of the compute dtype, the final rounding eps/2 of the result's; underflowing
    # weights are off by at most 4 tiny.
    delta = 2 * work_eps(dtype) * np.max(np.abs(x.astype(np.float64)), axis=-1)
    ref, C = ref_softmax(x, delta)
    tol = 2 * (C + (m + 6) * work_eps(dtype) * (ref + C) + eps(dtype) / 2 * ref + 4 * tiny(dtype))
    assert_within(got, ref, tol, f"softmax {np.dtype(dtype).name}")


NORMS = {
    "layer_norm": (layer_norm, lambda x: (x.ndim - 1,), True),
    "rms_norm": (rms_norm, lambda x: (x.ndim - 1,), False),
    "instance_norm": (instance_norm, lambda x: (x.ndim - 2,), True),
    "batch_norm": (batch_norm, lambda x: tuple(range(x.ndim - 1)), True),
}


def check_norm(name, x, eps_):
    fn, axes, centre = NORMS[name]
    axes = axes(x)
    got = fn(x, eps=eps_)
    assert got.dtype == x.dtype
    ref, cond = ref_norm(x, axes, eps_, centre)
    # A group of N entries: the mean and the deviations are off by (N + 4) eps max|x| (eps
    # of the compute dtype), divided by the standard deviation (cond); the result is rounded
    # to x's dtype (eps/2 |y|); outputs in the subnormal range are off by tiny.  Twice that.
    groups = math.prod(x.shape[a] for a in axes)
    with np.errstate(invalid="ignore"):
        tol = 2 * ((groups + 4) * work_eps(x.dtype) * (cond + np.abs(ref)) + eps(x.dtype) / 2 * np.abs(ref)
                   + 4 * tiny(x.dtype))
    assert_within(got, ref, tol, f"{name} {x.dtype.name} eps={eps_}")


@pytest.mark.parametrize("name", sorted(NORMS))
@given(data=st.data(), dtype=dtypes, shape=st.tuples(sizes, st.integers(1, 4), st.integers(1, 4)),
       eps_=st.sampled_from([0.0, 1e-5, 1e-3]))
def test_norm_matches_exact_answer(name, data, dtype, shape, eps_):
    check_norm(name, data.draw(float_arrays(dtype, shape)), eps_)


# ---------------------------------------------------------------- edges of each dtype's range


def edge_cases(dtype):
    """(label, q, k, v, keyword arguments): inputs at the edges of ``dtype``'s range: scores
    near the limits of exp, values and reweights near the largest float, products that
    underflow, and scores that overflow (where a ``ValueError`` is due)."""
    f = np.dtype(dtype).type
    info = np.finfo(dtype)
    log_max = math.log(float(info.max))
    log_tiny = math.log(float(info.tiny))
    a = lambda *rows: np.array(rows, dtype=dtype)  # noqa: E731
    r = math.sqrt(log_max)
    cases = [
        ("issue: |q||k| small enough, v too large for exp(s) v", a([9.2]), a([9.2]), a([100.0]), {}),
        ("issue: l2 needs exp(2s)", a([min(20.0, 0.6 * r)]), a([min(20.0, 0.6 * r)]), a([1.0]),
         {"normalize": "l2"}),
        ("scores just below log(max)", a([r]), a([r * 0.99], [r * 0.5]), a([3.0], [-2.0]), {}),
        ("scores just below log(max), l2", a([r]), a([r * 0.99], [r * 0.5]), a([3.0], [-2.0]),
         {"normalize": "l2"}),
        ("scores just below log(max)/2, l2", a([r / 1.42]), a([r / 1.42], [r / 2]), a([3.0], [-2.0]),
         {"normalize": "l2"}),
        ("v near max/m", a([0.5]), a([0.25], [0.5], [0.0], [-0.5]), np.full((4, 1), f(info.max / 4.5)), {}),
        ("v near max, m = 4", a([0.5]), a([0.25], [0.5], [0.0], [-0.5]), np.full((4, 1), f(info.max / 1.1)), {}),
        ("reweight near max/m", a([0.5]), a([0.25], [0.5]), a([2.0], [1.0]),
         {"reweight": np.full((1, 2), f(info.max / 8))}),
        ("scores far beyond log(max)", a([2 * r]), a([2 * r], [1.9 * r]), a([3.0], [-2.0]), {}),
        ("scores far beyond log(max), l2", a([2 * r]), a([2 * r], [1.9 * r]), a([3.0], [-2.0]), {"normalize": "l2"}),
        ("every exp(s) below tiny", a([math.sqrt(-log_tiny) * 1.05]),
         a([-math.sqrt(-log_tiny) * 1.05], [-math.sqrt(-log_tiny) * 1.1]), a([5.0], [7.0]), {}),
        ("scores near log(tiny), tiny values", a([math.sqrt(-log_tiny) * 0.9]),
         a([-math.sqrt(-log_tiny) * 0.9], [-math.sqrt(-log_tiny) * 0.8]),
         a([float(info.tiny) * 8], [float(info.tiny) * 4]), {}),
        ("moderate negative scores, subnormal values", a([2.0]), a([-2.0], [-1.5]),
         a([float(info.smallest_subnormal) * 64], [float(info.smallest_subnormal) * 16]), {}),
        ("q k^T overflows", a([float(info.max) ** 0.5 * 2]), a([float(info.max) ** 0.5 * 2], [-1.0]),
         a([3.0], [4.0]), {}),
        ("bias near max", a([1.0]), a([1.0], [2.0]), a([3.0], [4.0]),
         {"bias": a([float(info.max) / 2, -float(info.max) / 2])}),
        ("scale near max", a([1.0]), a([1.0], [-1.0]), a([3.0], [4.0]), {"scale": float(info.max) / 2}),
    ]
    # Negative scores near -0.4 log(max) and values far below tiny e^B: products that underflow.
    b = 0.4 * log_max
    value = float(info.tiny) * math.exp(b) * 1e-7
    if value > float(info.smallest_subnormal) * 2**10:  # representable with 10 bits (not float16)
        cases.append(("negative scores, values below tiny e^B", a([math.sqrt(b)]),
                      a([-math.sqrt(b)], [-math.sqrt(b) * 0.99]), a([value], [value * 3]), {}))
    return cases


EDGES = [(np.dtype(d).name, *case) for d in DTYPES for case in edge_cases(d)]


@pytest.mark.parametrize("dtype_name, label, q, k, v, kw", EDGES, ids=[f"{e[0]}-{e[1]}" for e in EDGES])
def test_attention_at_the_edges(dtype_name, label, q, k, v, kw):
    with np.errstate(over="ignore", under="ignore"):
        check_attention(q, k, v, example=False, **kw)


def test_issue_reproducers():
    f32 = np.float32
    assert attention(np.array([[9.2]], f32), np.array([[9.2]], f32), np.array([[100.0]], f32))[0, 0] == 100
    assert attention([[20.0]], [[20.0]], [[1.0]], normalize="l2")[0, 0] == pytest.approx(1.0, rel=1e-15)
    check_norm("layer_norm", np.array([[300.0, -300.0, 100.0]], np.float16), 1e-5)


def unshifted_weights(scores, normalize, m):
    """The wrong variant: exp(s) over its sum or norm, without subtracting the row maximum."""
    e = np.exp(scores)
    total = np.sum(e, axis=-1, keepdims=True) if normalize == "softmax" else np.sqrt(np.sum(e * e, axis=-1, keepdims=True))
    return e, np.where(total > 0, total, 1)


def test_an_unshifted_softmax_is_rejected(monkeypatch):
    """The edge cases above fail without the shift by the row maximum (evidence that can fail):
    exp(s) overflows, or every exp(s) of a row underflows to 0."""
    monkeypatch.setattr(attention_module, "_weights", unshifted_weights)
    failed = set()
    for _, label, q, k, v, kw in EDGES:
        try:
            with np.errstate(all="ignore"):
                check_attention(q, k, v, example=False, **kw)
        except AssertionError:
            failed.add(label)
    assert {"scores far beyond log(max)", "scores far beyond log(max), l2", "every exp(s) below tiny"} <= failed, failed


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("normalize", ["softmax", "l2"])
def test_ordinary_inputs_match_the_exact_answer(dtype, normalize, rng):
    q, k, v = (rng.standard_normal(shape).astype(dtype) for shape in ((5, 8), (7, 8), (7, 3)))
    check_attention(q, k, v, example=False, expect="result", normalize=normalize)


@pytest.mark.parametrize("dtype", DTYPES)
def test_none_defines_overflow(dtype):
    """normalize="none" has no denominator: exp(s) beyond the dtype is a ValueError, just
    below it an exact-to-rounding answer; exp(s) below the smallest float is 0."""
    log_max = math.log(float(np.finfo(dtype).max))
    a = lambda *rows: np.array(rows, dtype=dtype)  # noqa: E731
    r = math.sqrt(log_max)
    with raises_message(ValueError, "exp", names=["normalize"], values=["none"], says="overflow"):
        attention(a([r * 1.01]), a([r * 1.01]), a([1.0]), normalize="none")
    with raises_message(ValueError, "exp", names=["normalize"], values=["none"], says="overflow"):
        attention_weights(a([r * 1.01]), a([r * 1.01]), normalize="none")
    check_attention(a([r * 0.99]), a([r * 0.99]), a([1.0]), example=False, normalize="none")
    check_attention(a([r * 3]), a([-r * 3]), a([1.0]), example=False, normalize="none")


def test_empty_keys_agree():
    """No keys: attention and linear attention give 0 rows, attention_weights an (n, 0) array."""
    q, k, v = np.ones((2, 3)), np.ones((0, 3)), np.ones((0, 4))
    omega = np.random.default_rng(0).standard_normal((5, 3))
    assert attention_weights(q, k).shape == (2, 0)
    for normalize in ("softmax", "l2", "relu2", "none"):
        assert np.array_equal(attention(q, k, v, normalize=normalize), np.zeros((2, 4)))
    assert np.array_equal(linear_attention(q, k, v, lambda x: positive_random_features(x, omega)), np.zeros((2, 4)))
    with raises_message(ValueError, "omega", shapes=[(0, 3)]):  # a feature map with no features is an error, not an empty map
        positive_random_features(q, omega[:0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(NORMS))
@pytest.mark.parametrize("where", ["tiny", "subnormal", "one", "near max", "max/2 offset"])
@pytest.mark.parametrize("eps_", [0.0, 1e-5])
def test_norms_at_the_edges(dtype, name, where, eps_):
    info = np.finfo(dtype)
    base = np.array([[[3.0, -3.0, 1.0, 0.5], [1.0, 2.0, -4.0, 0.25]]])
    scale = {"tiny": float(info.tiny) * 2, "subnormal": float(info.smallest_subnormal) * 64, "one": 1.0,
             "near max": float(info.max) / 8, "max/2 offset": 1.0}[where]
    with np.errstate(under="ignore"):
        x = (base * scale).astype(dtype)
    if where == "max/2 offset":
        x = (np.float64(info.max) / 2 + base * (float(info.max) / 64)).astype(dtype)
    check_norm(name, x, eps_)


@pytest.mark.parametrize("dtype_name, label, q, k, v, kw", EDGES, ids=[f"{e[0]}-{e[1]}" for e in EDGES])
def test_causal_key_skipping_at_the_edges(dtype_name, label, q, k, v, kw, monkeypatch):
    """The causal key slicing at each edge case: the query repeated once per key, causal=True,
    one row per block, so block i computes keys 0..i only and masks none; row i must be the
    exact attention of the query over the first i + 1 keys, within the same bound (or, where
    some row's plain method overflows, a ValueError)."""
    monkeypatch.setattr(attention_module, "BLOCK_ROWS", 1)
    m = k.shape[0]
    rows = {name: np.repeat(val, m, axis=0) if isinstance(val, np.ndarray) else val for name, val in kw.items()}
    verdicts = []
    for i in range(m):
        sub = {name: val[:, : i + 1] if isinstance(val, np.ndarray) else val for name, val in kw.items()}
        bounds = {}
        ref, A, C = ref_attention(q, k[: i + 1], v[: i + 1], bounds=bounds, **sub)
        verdicts.append(plain_verdict(np.result_type(q, k, v), bounds, ref, A, C))
    got = call_or_overflow(lambda: attention(np.repeat(q, m, axis=0), k, v, causal=True, **rows), verdicts)
    if got is None:
        return
    for i in range(m):
        sub = {name: val[:, : i + 1] if isinstance(val, np.ndarray) else val for name, val in kw.items()}
        ref, A, C = ref_attention(q, k[: i + 1], v[: i + 1], **sub)
        tol = attention_tolerance(got.dtype, i + 1, A, C, ref)
        if sub.get("reweight") is not None:
            tol = tol + 2 * (i + 1) * tiny(got.dtype) * np.max(np.abs(v[: i + 1].astype(np.float64)), axis=0)
        assume_representable(ref, tol, got.dtype, example=False)
        assert_within(got[i : i + 1], ref, tol, f"causal row {i} {label}")


# ---------------------------------------------------------------- score bounds beyond the dtype


def check_masked(q, k, *, keep=None, causal=False, v=None, bias=None, normalize="softmax", scale=None):
    """attention (with ``v``) or attention_weights (without) against the exact answer of each
    query over the keys it may attend, taken one row at a time with the removed keys left out:
    the reference never sees a mask, a causal rule or a removed key's score."""
    n, m = q.shape[0], k.shape[0]
    kw = dict(mask=keep, causal=causal, bias=bias, normalize=normalize, scale=scale)
    keep = np.ones((n, m), bool) if keep is None else keep
    if causal:
        keep = keep & (np.arange(m)[None, :] <= np.arange(n)[:, None])
    values = np.eye(m, dtype=q.dtype) if v is None else v  # the weights are attention over eye(m)
    rows = []
    for i in range(n):
        kept = np.flatnonzero(keep[i])
        sub = None if bias is None else bias[i : i + 1, kept]
        bounds = {}
        ref, A, C = ref_attention(q[i : i + 1], k[kept], values[kept], scale=scale, bias=sub, normalize=normalize,
                                  bounds=bounds)
        rows.append((kept, ref, A, C, plain_verdict(np.result_type(q, k, values), bounds, ref, A, C)))
    got = call_or_overflow(lambda: attention_weights(q, k, **kw) if v is None else attention(q, k, v, **kw),
                           [row[-1] for row in rows])
    if got is None:
        return
    assert got.dtype == np.result_type(q, k, values)
    for i, (kept, ref, A, C, _) in enumerate(rows):
        tol = attention_tolerance(got.dtype, kept.size, A, C, ref)
        assume_representable(ref, tol, got.dtype, example=False)
        assert_within(got[i : i + 1], ref, tol, f"row {i} {normalize} {'weights' if v is None else 'attention'}")


def counterexample(dtype):
    """The bug's input: q = (big, 3 * 2**-(e + 2)) and keys (0, +-2**e).  The scores are +-0.75
    (with scale 1), but |q| |k| = big 2**e overflows the dtype; dividing q by the power of two
    that brings that bound into range makes 3 * 2**-(e + 2) underflow to 0 (weights 0.5, 0.5)."""
    big_q, e = {np.float32: (1e19, 106), np.float64: (1e300, 999)}[dtype]
    q = np.array([[big_q, 3 * 2.0 ** -(e + 2)]], dtype)
    k = np.array([[0.0, 2.0**e], [0.0, -(2.0**e)]], dtype)
    return q, k


ROUTES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", ROUTES)
@pytest.mark.parametrize("normalize", ["softmax", "l2", "none"])
def test_scores_whose_bound_overflows_are_exact(dtype, normalize):
    """The counterexample, through attention_weights and attention: |q| |k| overflows, every
    score is moderate.  Dividing q by a power of two to bring |q| |k| into range would make its
    small entry underflow and every case give equal weights (exp(0) for "none")."""
    q, k = counterexample(dtype)
    check_masked(q, k, normalize=normalize, scale=1.0)
    check_masked(q, k, v=np.array([[3.0, 1.0], [-2.0, 5.0]], dtype), normalize=normalize, scale=1.0)
    check_masked(q, k, bias=np.array([[0.25, -0.5]], dtype), normalize=normalize, scale=1.0)
    check_masked(np.repeat(q, 2, axis=0), k, bias=np.array([[0.25, -0.5], [-1.0, 0.5]], dtype),
                 v=np.array([[3.0, 1.0], [-2.0, 5.0]], dtype), normalize=normalize, scale=1.0)


@pytest.mark.parametrize("dtype", ROUTES)
@pytest.mark.parametrize("normalize", ["softmax", "l2", "none"])
@pytest.mark.parametrize("block_rows", [None, 1])
def test_removed_keys_of_an_overflowing_bound_never_set_the_shift(dtype, normalize, block_rows, monkeypatch):
    """The counterexample's keys and a third key (big, 0) whose score big**2 (1e38 or 1e600) dwarfs
    theirs: masked, or in the future of a causal query, it must not be the row maximum that the
    other scores are shifted by (they would all become exp(-big**2) = 0).  One row per block
    (block_rows 1) also takes the causal key slicing of attention."""
    if block_rows is not None:
        monkeypatch.setattr(attention_module, "BLOCK_ROWS", block_rows)
    q, k = counterexample(dtype)
    k = np.concatenate([k, [[q[0, 0], 0.0]]]).astype(dtype)  # (3, 2)
    q3 = np.repeat(q, 3, axis=0)  # query i may attend keys 0..i with causal=True
    v = np.array([[3.0], [-2.0], [7.0]], dtype)
    keep = np.array([[True, True, False], [True, False, False], [False, True, False]])
    late = np.array([[True, False, True], [True, True, True], [False, True, True]])  # causal removes key 2 of rows 0, 1
    for v_ in (None, v):
        check_masked(q3, k, keep=keep, v=v_, normalize=normalize, scale=1.0)
        check_masked(q3[:2], k, causal=True, v=v_, normalize=normalize, scale=1.0)
        check_masked(q3[:2], k, keep=late[:2], causal=True, v=v_, normalize=normalize, scale=1.0)
        if normalize != "none":  # exp(big**2) itself overflows: "none" has nothing to shift it by
            check_masked(q3, k, causal=True, v=v_, normalize=normalize, scale=1.0)  # row 2: key 2 wins
            check_masked(q3, k, keep=late, causal=True, v=v_, normalize=normalize, scale=1.0)


def ref_relu2(q, k, keep, scale):
    """Exact ``relu(s)**2 / m`` of the kept scores, 0 where removed (mpmath loops)."""
    n, m = q.shape[0], k.shape[0]
    out = np.zeros((n, m))
    for i in range(n):
        for j in range(m):
            s = mp.fsum(X(q[i, t]) * X(k[j, t]) for t in range(q.shape[1])) * X(scale)
            out[i, j] = float(max(s, 0) ** 2 / m) if keep[i, j] else 0.0
    return out


@pytest.mark.parametrize("dtype", ROUTES)
def test_relu2_of_scores_whose_bound_overflows_is_exact(dtype):
    """relu2 is not shifted (a shift changes relu(s)**2).  The counterexample gives
    relu(0.75)**2 / 2 = 0.28125 and 0 (0 and 0 if q lost its small entry), with a mask,
    causal and through attention too."""
    q, k = counterexample(dtype)
    q2 = np.array([q[0], q[0] * [1, -1]], dtype)  # scores (0.75, -0.75) and (-0.75, 0.75)
    v = np.array([[3.0], [-2.0]], dtype)
    rtol = 4 * work_eps(dtype)
    for keep, causal in ((np.ones((2, 2), bool), False), (np.array([[True, False], [True, True]]), False),
                         (np.ones((2, 2), bool), True)):
        full = keep & (np.arange(2)[None, :] <= np.arange(2)[:, None]) if causal else keep
        want = ref_relu2(q2, k, full, 1.0)
        mask = None if keep.all() else keep
        got = attention_weights(q2, k, mask=mask, causal=causal, scale=1.0, normalize="relu2")
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
        got = attention(q2, k, v, mask=mask, causal=causal, scale=1.0, normalize="relu2")
        np.testing.assert_allclose(got, want @ v.astype(np.float64), rtol=rtol, atol=0)
    assert want[1, 1] == 0.28125  # the reference itself: (3/4)**2 / 2, exactly


@st.composite
def overflowing_bounds(draw, dtype):
    """``(q, k)`` whose Cauchy-Schwarz bound overflows ``dtype`` while every score is moderate:
    column 0 holds huge entries of q (about 2**eq) against zeros of k, column 1 small entries
    of q (about 2**-ek) against huge ones of k (about 2**ek), and further columns moderate
    numbers.  Each product is moderate or 0, but |q_i| |k_j| is about 2**(eq + ek) > max."""
    top = int(np.finfo(dtype).maxexp)  # max < 2**top
    n, m, extra = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(0, 2))
    eq = draw(st.integers(top // 2, top - 3))
    ek = draw(st.integers(top + 1 - eq, top - 3))
    unit = st.floats(-4, 4, width=32)
    big = st.floats(1, 4, width=32)  # at least 1: the bound really overflows
    qa = draw(hnp.arrays(np.float64, (n, 1), elements=big))
    qb = draw(hnp.arrays(np.float64, (n, 1), elements=unit))
    kb = draw(hnp.arrays(np.float64, (m, 1), elements=big)) * draw(st.sampled_from([1.0, -1.0]))
    qc, kc = draw(hnp.arrays(np.float64, (n, extra), elements=unit)), draw(hnp.arrays(np.float64, (m, extra), elements=unit))
    q = np.concatenate([np.ldexp(qa, eq), np.ldexp(qb, -ek), qc], axis=1).astype(dtype)
    k = np.concatenate([np.zeros((m, 1)), np.ldexp(kb, ek), kc], axis=1).astype(dtype)
    return q, k


@given(st.data(), st.sampled_from([np.float32, np.float64]),
       st.sampled_from(["softmax", "l2", "none"]), st.booleans(), st.booleans(), st.booleans())
def test_overflowing_bounds_with_moderate_scores_are_exact(data, dtype, normalize, with_bias, with_mask, causal):
    q, k = data.draw(overflowing_bounds(dtype))
    n, m = q.shape[0], k.shape[0]
    assert X(q[0, 0]) * abs(X(k[0, 1])) > X(big(dtype))  # the bound overflows, by construction
    bias = data.draw(hnp.arrays(dtype, (n, m), elements=st.floats(-4, 4, width=32))) if with_bias else None
    keep = data.draw(hnp.arrays(bool, (n, m))) if with_mask else None
    v = data.draw(hnp.arrays(dtype, (m, 2), elements=st.floats(-4, 4, width=32)))
    scale = data.draw(st.sampled_from([None, 1.0]))
    check_masked(q, k, keep=keep, causal=causal, bias=bias, normalize=normalize, scale=scale)
    check_masked(q, k, keep=keep, causal=causal, v=v, bias=bias, normalize=normalize, scale=scale)


@pytest.mark.parametrize("dtype", ROUTES)
@pytest.mark.parametrize("normalize", ["softmax", "l2", "none"])
def test_a_query_whose_bias_removes_every_key_of_an_overflowing_bound_gets_zeros(dtype, normalize):
    """Row 1's bias is -inf for both keys: no score is left to shift by, and the row is the
    documented 0 (not NaN from -inf - -inf); row 0 is the counterexample's exact answer."""
    q, k = counterexample(dtype)
    q2 = np.repeat(q, 2, axis=0)
    bias = np.array([[0.0, 0.0], [-np.inf, -np.inf]], dtype)
    v = np.array([[3.0], [-2.0]], dtype)
    with np.errstate(invalid="raise"):  # -inf - -inf would be NaN
        a = attention_weights(q2, k, bias=bias, scale=1.0, normalize=normalize)
        out = attention(q2, k, v, bias=bias, scale=1.0, normalize=normalize)
    assert a[1].tolist() == [0.0, 0.0] and out[1].tolist() == [0.0]
    check_masked(q, k, normalize=normalize, scale=1.0)


@pytest.mark.parametrize("dtype", ROUTES)
@pytest.mark.parametrize("normalize, reweight, fraction", [
    ("softmax", None, 0.91), ("softmax", [[1.0, 0.5]], 0.91), ("l2", None, 0.83), ("l2", [[1.0, 0.5]], 0.91)])
def test_an_overflowing_bound_with_values_near_the_largest_float_is_exact_or_an_error(dtype, normalize, reweight, fraction):
    """The numerators (1, e**-1.5) (times the reweight) times values `fraction` max sum to 1.11
    max or more before the division by D = 1.22 (softmax) or ||e|| = 1.025 (l2): the answer
    fits, the product may not.  The exact answer or a ValueError, and no warning."""
    q, k = counterexample(dtype)
    v = np.full((2, 1), big(dtype) * fraction, dtype)
    reweight = None if reweight is None else np.array(reweight, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_attention(q, k, v, example=False, scale=1.0, normalize=normalize, reweight=reweight)
