"""attncore.positional: loops, closed forms and the invariants of each scheme."""

import cmath
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from attncore import attention_weights
from attncore._positional import (
    alibi_slopes,
    relative_bias,
    rope,
    rope_frequencies,
    rope_permutation,
    sinusoidal_encoding,
    t5_relative_bucket,
)
from strategies import batch_shapes, dtypes, normal, seeds, tol
from messages import raises_message

conventions = st.sampled_from(["interleaved", "half"])
even_widths = st.integers(min_value=1, max_value=6).map(lambda k: 2 * k)
positions_st = st.floats(min_value=-300.0, max_value=300.0, allow_nan=False)


# ---- sinusoidal encoding -------------------------------------------------------------

@pytest.mark.parametrize("d", [1, 2, 5, 8])
def test_sinusoidal_matches_loop(d):
    n, base = 7, 10000.0
    ref = [[math.sin(p / base ** ((c - c % 2) / d)) if c % 2 == 0 else math.cos(p / base ** ((c - c % 2) / d))
            for c in range(d)] for p in range(n)]
    np.testing.assert_allclose(sinusoidal_encoding(n, d), ref, rtol=1e-13, atol=1e-13)


@given(d=even_widths, i=st.integers(0, 200), j=st.integers(0, 200), shift=st.integers(0, 200))
def test_sinusoidal_dot_product_depends_on_offset_only(d, i, j, shift):
    pe = sinusoidal_encoding(401, d)
    closed_form = sum(math.cos((j - i) * 10000.0 ** (-2 * t / d)) for t in range(d // 2))
    assert math.isclose(pe[i] @ pe[j], closed_form, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(pe[i + shift] @ pe[j + shift], closed_form, rel_tol=1e-9, abs_tol=1e-9)


def test_sinusoidal_shift_is_linear():
    # PE[p + k] = PE[p] M_k with M_k block-diagonal rotations, independent of p.
    d, k = 8, 5
    pe = sinusoidal_encoding(40, d)
    omega = 10000.0 ** (-2 * np.arange(d // 2) / d)
    m = np.zeros((d, d))
    for t, w in enumerate(omega):
        c, s = math.cos(k * w), math.sin(k * w)
        # (sin a, cos a) -> (sin(a + kw), cos(a + kw))
        m[2 * t: 2 * t + 2, 2 * t: 2 * t + 2] = [[c, -s], [s, c]]
    np.testing.assert_allclose(pe[:-k] @ m, pe[k:], atol=1e-12)


def test_sinusoidal_rejects_bad_input():
    with raises_message(ValueError, "d", values=[1, 0], says="out of range"):
        sinusoidal_encoding(4, 0)
    with raises_message(TypeError, "n", values=[4.5], says="integer"):
        sinusoidal_encoding(4.5, 2)
    with raises_message(ValueError, "base", values=[-1.0]):
        sinusoidal_encoding(4, 2, base=-1.0)


# ---- RoPE -------------------------------------------------------------------------------

def rotation_matrix_route(x, positions, convention, base=10000.0):
    """x @ R_p row by row, with R_p the block-diagonal matrix of the lecture notes."""
    n, d = x.shape
    out = np.empty_like(x)
    for row in range(n):
        big = np.zeros((d, d))
        for t in range(d // 2):
            angle = positions[row] * base ** (-2 * t / d)
            a, b = (2 * t, 2 * t + 1) if convention == "interleaved" else (t, t + d // 2)
            # the 2x2 block [[cos, sin], [-sin, cos]] acting on the right of a row
            big[a, a], big[a, b] = math.cos(angle), math.sin(angle)
            big[b, a], big[b, b] = -math.sin(angle), math.cos(angle)
        out[row] = x[row] @ big
    return out


def complex_route(x, positions, convention, base=10000.0):
    """Pairs as complex numbers, multiplied elementwise by exp(i p theta)."""
    n, d = x.shape
    out = np.empty_like(x)
    for row in range(n):
        for t in range(d // 2):
            a, b = (2 * t, 2 * t + 1) if convention == "interleaved" else (t, t + d // 2)
            z = complex(x[row, a], x[row, b]) * cmath.exp(1j * positions[row] * base ** (-2 * t / d))
            out[row, a], out[row, b] = z.real, z.imag
    return out


@given(seed=seeds, n=st.integers(1, 5), d=even_widths, convention=conventions)
def test_rope_matches_matrix_and_complex_forms(seed, n, d, convention):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    pos = rng.uniform(-50, 50, size=n)
    got = rope(x, pos, convention=convention)
    np.testing.assert_allclose(got, rotation_matrix_route(x, pos, convention), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(got, complex_route(x, pos, convention), rtol=1e-11, atol=1e-11)


def test_rope_default_positions_and_direction():
    x = np.tile([1.0, 0.0], (3, 1))
    # d = 2: theta_0 = 1, so position p rotates (1, 0) counterclockwise to (cos p, sin p)
    expected = np.stack([np.cos(np.arange(3.0)), np.sin(np.arange(3.0))], axis=-1)
    np.testing.assert_allclose(rope(x), expected, atol=1e-15)
    np.testing.assert_allclose(rope(x), rope(x, np.arange(3)), atol=0)


@given(seed=seeds, batch=batch_shapes, n=st.integers(1, 5), d=even_widths, convention=conventions, dtype=dtypes)
def test_rope_preserves_norms(seed, batch, n, d, convention, dtype):
    rng = np.random.default_rng(seed)
    x = normal(rng, batch + (n, d), dtype)
    pos = rng.uniform(-1000, 1000, size=batch + (n,))
    y = rope(x, pos, convention=convention)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), **tol(dtype))


@given(seed=seeds, n=st.integers(1, 5), d=even_widths, convention=conventions)
def test_rope_composes(seed, n, d, convention):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    p, r = rng.uniform(-100, 100, size=n), rng.uniform(-100, 100, size=n)
    once = rope(x, p + r, convention=convention)
    twice = rope(rope(x, p, convention=convention), r, convention=convention)
    np.testing.assert_allclose(twice, once, rtol=1e-9, atol=1e-9)
    # and rotating back by -p undoes it
    np.testing.assert_allclose(rope(rope(x, p, convention=convention), -p, convention=convention), x, atol=1e-12)


@given(seed=seeds, d=even_widths, convention=conventions, i=positions_st, j=positions_st, shift=positions_st)
def test_rope_scores_depend_on_offset_only(seed, d, convention, i, j, shift):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(1, d)), rng.normal(size=(1, d))
    s = rope(q, [i], convention=convention)[0] @ rope(k, [j], convention=convention)[0]
    s_shifted = rope(q, [i + shift], convention=convention)[0] @ rope(k, [j + shift], convention=convention)[0]
    # the closed form: q . R_{j-i} k, rotating k alone by the offset
    s_offset = q[0] @ rope(k, [j - i], convention=convention)[0]
    scale = np.linalg.norm(q) * np.linalg.norm(k)
    assert abs(s - s_shifted) <= 1e-9 * scale
    assert abs(s - s_offset) <= 1e-9 * scale


@given(seed=seeds, batch=batch_shapes, n=st.integers(1, 5), d=even_widths)
def test_rope_conventions_differ_by_a_fixed_permutation(seed, batch, n, d):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=batch + (n, d))
    pos = rng.uniform(-100, 100, size=(n,))
    perm = rope_permutation(d)
    np.testing.assert_allclose(
        rope(x[..., perm], pos, convention="half"), rope(x, pos)[..., perm], rtol=1e-12, atol=1e-12
    )
    # the permutation is independent of the positions and the data
    assert sorted(perm.tolist()) == list(range(d))


def test_rope_attention_is_translation_invariant(rng):
    q, k = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 6, 8))
    a = attention_weights(rope(q, np.arange(5)), rope(k, np.arange(6)))
    b = attention_weights(rope(q, np.arange(5) + 37), rope(k, np.arange(6) + 37))
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_rope_frequencies():
    np.testing.assert_allclose(rope_frequencies(8), [10000.0 ** (-t / 4) for t in range(4)], rtol=1e-15)


def test_rope_rejects_bad_input():
    x = np.ones((3, 4))
    with raises_message(ValueError, "x", shapes=[(3, 5)], says="even"):
        rope(np.ones((3, 5)))
    with raises_message(ValueError, "convention", values=["neox"], options=["interleaved", "half"]):
        rope(x, convention="neox")
    with raises_message(ValueError, "positions", names=["x"], shapes=[(4,), (3,)], says="broadcast"):
        rope(x, np.arange(4))
    with raises_message(ValueError, "x", shapes=["(..., n, d)", (4,)]):
        rope(np.ones(4))
    with raises_message(TypeError, "x", dtypes=["complex128"], says="real"):
        rope(np.ones((3, 4), dtype=complex))


# ---- T5 buckets -----------------------------------------------------------------------------

def t5_bucket_loop(rel, bidirectional, num_buckets, max_distance):
    """One relative position at a time, in float64 with math.log."""
    ret, nu, big = 0, -rel, num_buckets
    if bidirectional:
        big //= 2
        ret += big if nu < 0 else 0
        nu = abs(nu)
    else:
        nu = max(nu, 0)
    exact = big // 2
    if nu < exact:
        return ret + nu
    return ret + min(big - 1, exact + int(math.log(nu / exact) / math.log(max_distance / exact) * (big - exact)))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (64, 256), (8, 20), (16, 1000)])
def test_t5_bucket_matches_loop(bidirectional, num_buckets, max_distance):
    rel = np.arange(-3000, 3001)
    got = t5_relative_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    ref = [t5_bucket_loop(int(r), bidirectional, num_buckets, max_distance) for r in rel]
    np.testing.assert_array_equal(got, ref)


def test_t5_bucket_structure():
    rel = np.arange(-500, 501)
    b = t5_relative_bucket(rel)
    assert b.min() == 0 and b.max() == 31
    past, future = b[rel <= 0][::-1], b[rel > 0]  # ordered by distance
    assert np.all(np.diff(past) >= 0) and np.all(np.diff(future) >= 0)
    np.testing.assert_array_equal(past[:8], np.arange(8))  # one bucket per small offset
    assert set(past[128:]) == {15} and set(future[127:]) == {31}  # saturate at max_distance
    # the last bucket starts where 8 + 8 log(nu / 8) / log(128 / 8) reaches 15: nu >= 8 * 16^(7/8)
    first = math.ceil(8 * 16 ** (7 / 8))
    assert past[first - 1] == 14 and past[first] == 15 and future[first - 2] == 30 and future[first - 1] == 31
    assert set(future.tolist()) <= set(range(16, 32))
    causal = t5_relative_bucket(rel, bidirectional=False)
    assert set(causal[rel >= 0]) == {0} and causal.max() == 31


def test_t5_bucket_rejects_floats():
    with raises_message(TypeError, "relative_position", dtypes=["float64"], says="integer"):
        t5_relative_bucket(np.array([1.0]))


# ---- ALiBi --------------------------------------------------------------------------------

@pytest.mark.parametrize("h", [1, 2, 4, 8, 16, 32])
def test_alibi_power_of_two_is_geometric(h):
    s = alibi_slopes(h)
    np.testing.assert_allclose(s, [2.0 ** (-8.0 * (t + 1) / h) for t in range(h)], rtol=1e-15)
    assert math.isclose(s[-1], 2.0 ** -8)


@pytest.mark.parametrize("h", [3, 5, 6, 7, 12, 20, 24])
def test_alibi_any_head_count(h):
    s = alibi_slopes(h)
    c = 2 ** int(math.floor(math.log2(h)))
    assert s.shape == (h,) and len(set(s.tolist())) == h
    np.testing.assert_allclose(s[:c], alibi_slopes(c), rtol=1e-15)
    # the reference get_slopes concatenates the c slopes with get_slopes(2c)[0::2][:h - c]:
    # the odd powers of 2^(-8 / (2c)), appended after the first c slopes (not interleaved)
    np.testing.assert_allclose(s[c:], [2.0 ** (-8.0 * (2 * t + 1) / (2 * c)) for t in range(h - c)], rtol=1e-15)
    assert np.all((s > 0) & (s < 1))


# ---- relative bias --------------------------------------------------------------------------

@given(n=st.integers(1, 6), m=st.integers(1, 6), seed=seeds)
def test_relative_bias_table_matches_loop(n, m, seed):
    table = np.random.default_rng(seed).normal(size=(2, n + m - 1))
    b = relative_bias(n, m, table)
    assert b.shape == (2, n, m)
    for i in range(n):
        for j in range(m):
            assert b[:, i, j].tolist() == table[:, (j - i) + n - 1].tolist()


def test_relative_bias_function_with_heads():
    slopes = alibi_slopes(4)
    b = relative_bias(5, 7, lambda r: -slopes[:, None, None] * np.abs(r))
    assert b.shape == (4, 5, 7)
    for t in range(4):
        for i in range(5):
            for j in range(7):
                assert b[t, i, j] == -slopes[t] * abs(j - i)


def test_relative_bias_rejects_bad_shapes():
    with raises_message(ValueError, "table_or_fn", shapes=["(..., 5)", (4,)]):
        relative_bias(3, 3, np.zeros(4))
    with raises_message(ValueError, "table_or_fn(offsets)", shapes=["(..., 3, 3)", (3, 4)]):
        relative_bias(3, 3, lambda r: np.zeros((3, 4)))
