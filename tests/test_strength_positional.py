"""attncore.positional: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""


import numpy as np
import pytest

from attncore._positional import (
    alibi_slopes,
    relative_bias,
    rope,
    rope_frequencies,
    rope_permutation,
    sinusoidal_encoding,
    t5_relative_bucket,
)
from messages import raises_message


# ---- RoPE -----------------------------------------------------------------------------------

def test_rope_errors_name_the_argument_and_the_shapes():
    with raises_message(ValueError, "x", shapes=["(..., n, d)"]):
        rope(np.ones(4))
    with raises_message(TypeError, "positions"):
        rope(np.ones((3, 4)), np.array([True, False, True]))
    with raises_message(ValueError, "positions", names=["x"], shapes=[(4,), (3,)], says="broadcast"):
        rope(np.ones((3, 4)), np.arange(4))


@pytest.mark.parametrize("convention", ["interleaved", "half"])
def test_rope_with_another_base_matches_the_complex_form(convention):
    # pair t of a token at position p turns by the angle p * base^(-2t/d): one complex
    # multiplication per pair, written out in a loop
    rng = np.random.default_rng(7)
    n, d, base = 5, 6, 50.0
    x = rng.normal(size=(n, d))
    got = rope(x, base=base, convention=convention)
    for p in range(n):
        for t in range(d // 2):
            i, j = (2 * t, 2 * t + 1) if convention == "interleaved" else (t, t + d // 2)
            z = complex(x[p, i], x[p, j]) * complex(np.cos(p * base ** (-2 * t / d)), np.sin(p * base ** (-2 * t / d)))
            assert abs(got[p, i] - z.real) < 1e-12 and abs(got[p, j] - z.imag) < 1e-12


def test_rope_of_tokens_without_features_is_empty():
    out = rope(np.zeros((3, 0)))
    assert out.shape == (3, 0)


def test_rope_frequencies_errors_name_d_and_base():
    # the message states the true minimum, 2 (one pair): d = 1 would be rejected as well
    with raises_message(ValueError, "d", values=[2, 0], says="out of range"):
        rope_frequencies(0)
    with raises_message(ValueError, "d", values=[3], says="even"):
        rope_frequencies(3)
    with raises_message(ValueError, "base"):
        rope_frequencies(4, base=0.0)


def test_rope_permutation_of_no_features_and_errors():
    assert rope_permutation(0).shape == (0,)
    with raises_message(ValueError, "d"):
        rope_permutation(-1)
    with raises_message(ValueError, "d", values=[3], says="even"):
        rope_permutation(3)



def test_rope_frequencies_says_d_must_be_at_least_2():
    # one feature has no pair to rotate: the message gives the real minimum, 2, for d = 0 and 1 alike
    for d in (-2, 0, 1):
        with raises_message(ValueError, "d", values=[2, d], says="out of range"):
            rope_frequencies(d)


@pytest.mark.parametrize("convention", ["interleaved", "half"])
def test_rope_in_float32_is_the_float32_rotation_bit_for_bit(convention):
    # float32 queries are rotated in float32, with cos and sin rounded to float32 first, as the
    # Hugging Face Llama code does with its float32 cos/sin cache: q * cos + rotate_half(q) * sin,
    # rotate_half(q) = (-q2, q1).  IEEE sums commute and negation is exact, so the result is the
    # same bits whatever the order of the terms.
    rng = np.random.default_rng(9)
    n, d = 64, 16
    x = rng.normal(size=(n, d)).astype(np.float32)
    angles = np.arange(n, dtype=np.float64)[:, None] * 10000.0 ** (-2.0 * np.arange(d // 2) / d)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    if convention == "half":
        x1, x2 = x[:, : d // 2], x[:, d // 2:]
        ref = x * np.concatenate([cos, cos], -1) + np.concatenate([-x2, x1], -1) * np.concatenate([sin, sin], -1)
    else:
        a, b = x[:, 0::2], x[:, 1::2]
        ref = np.stack([a * cos + (-b) * sin, b * cos + a * sin], -1).reshape(n, d)
    got = rope(x, convention=convention)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ref)


# ---- T5 buckets -------------------------------------------------------------------------------

def test_t5_smallest_bidirectional_configuration():
    # 4 buckets, 2 per direction, one of them exact (offset 0): every other offset falls into
    # the single log bucket of its direction; keys after the query (rel > 0) use buckets 2, 3
    rel = np.arange(-5, 6)
    got = t5_relative_bucket(rel, num_buckets=4, max_distance=2)
    expected = [(2 if r > 0 else 0) + (0 if r == 0 else 1) for r in rel]
    assert got.tolist() == expected


@pytest.mark.parametrize("bidirectional,num_buckets,max_distance,exact", [
    (True, 2, 128, 0),    # one bucket per direction: no exact bucket
    (False, 1, 128, 0),
    (True, 32, 8, 8),     # max_distance equal to the exact range
    (True, 32, 1, 8),
    (False, 16, 8, 8),
])
def test_t5_rejects_configurations_without_log_buckets(bidirectional, num_buckets, max_distance, exact):
    # the facts: both arguments, the least num_buckets (two per direction when bidirectional), the
    # number of exact buckets max_distance must exceed, and the values given
    least = 4 if bidirectional else 2
    with raises_message(ValueError, "num_buckets", names=["max_distance"], values=[least, exact, num_buckets, max_distance]):
        t5_relative_bucket(np.arange(3), bidirectional=bidirectional, num_buckets=num_buckets,
                           max_distance=max_distance)


def test_t5_errors_name_the_argument():
    with raises_message(ValueError, "num_buckets"):
        t5_relative_bucket(np.arange(3), num_buckets=0)
    with raises_message(ValueError, "num_buckets"):
        t5_relative_bucket(np.arange(3), num_buckets=1)  # bidirectional: at least one per direction
    with raises_message(TypeError, "num_buckets"):
        t5_relative_bucket(np.arange(3), num_buckets=2.5)
    with raises_message(ValueError, "max_distance"):
        t5_relative_bucket(np.arange(3), max_distance=0)
    with raises_message(TypeError, "relative_position"):
        t5_relative_bucket(np.array([True]))



def test_t5_accepts_unsigned_offsets_up_to_the_int64_range():
    signed = np.array([0, 1, 3, 5, 8, 100, 200], np.int64)
    for dtype in (np.uint8, np.uint16, np.uint64):
        np.testing.assert_array_equal(t5_relative_bucket(signed.astype(dtype)), t5_relative_bucket(signed))
    top = np.iinfo(np.int64).max
    np.testing.assert_array_equal(t5_relative_bucket(np.array([top], np.uint64)),
                                  t5_relative_bucket(np.array([top], np.int64)))
    with raises_message(ValueError, "relative_position", dtypes=["int64"], values=[top + 1], says="out of range"):
        t5_relative_bucket(np.array([top + 1], np.uint64))


def test_t5_rejects_the_smallest_int64_whose_negation_overflows():
    low = np.iinfo(np.int64).min
    with raises_message(ValueError, "relative_position", dtypes=["int64"], says=["smallest", "overflow"]):
        t5_relative_bucket(np.array([0, low], np.int64))
    # one above it is far in the past: the last bucket of its direction, like any far offset
    np.testing.assert_array_equal(t5_relative_bucket(np.array([low + 1, -10**6])), [15, 15])
    np.testing.assert_array_equal(t5_relative_bucket(np.array([low + 1]), bidirectional=False), [31])


def test_t5_bidirectional_must_be_a_bool():
    with raises_message(TypeError, "bidirectional"):
        t5_relative_bucket(np.arange(3), bidirectional=1)


# ---- relative bias ----------------------------------------------------------------------------

def test_relative_bias_one_table_matches_loop():
    n, m = 3, 4
    table = np.arange(n + m - 1) * 1.5
    b = relative_bias(n, m, table)
    assert b.shape == (n, m)
    for i in range(n):
        for j in range(m):
            assert b[i, j] == 1.5 * (j - i + n - 1)


def test_relative_bias_errors_name_the_argument():
    with raises_message(ValueError, "n"):
        relative_bias(0, 3, np.zeros(2))
    with raises_message(ValueError, "m"):
        relative_bias(3, 0, np.zeros(2))
    with raises_message(TypeError, "table_or_fn"):
        relative_bias(2, 2, np.array([True, False, True]))
    with raises_message(ValueError, "table_or_fn", shapes=["(..., 3)"]):
        relative_bias(2, 2, np.zeros(4))
    with raises_message(TypeError, "table_or_fn(offsets)"):
        relative_bias(2, 2, lambda r: r == 0)
    with raises_message(ValueError, "table_or_fn(offsets)", shapes=["(..., 2, 2)"]):
        relative_bias(2, 2, lambda r: np.zeros((2, 3)))


# ---- sinusoidal code and ALiBi slopes ----------------------------------------------------------

def test_sinusoidal_of_no_positions_and_errors():
    assert sinusoidal_encoding(0, 4).shape == (0, 4)
    with raises_message(ValueError, "base"):
        sinusoidal_encoding(3, 4, base=-1.0)


def test_alibi_slopes_error_names_num_heads():
    with raises_message(ValueError, "num_heads"):
        alibi_slopes(0)


# ---- second round (the run of 2026-11-23) -------------------------------------------------------

def test_rope_errors_name_convention_and_base():
    with raises_message(ValueError, "convention", values=["complex"], options=["interleaved", "half"]):
        rope(np.ones((3, 4)), convention="complex")
    for base in (0.0, -1.0):
        with raises_message(ValueError, "base"):
            rope(np.ones((3, 4)), base=base)


def test_t5_buckets_of_unsigned_offsets_are_those_of_the_same_signed_offsets():
    rel = np.arange(0, 256, 5)
    for unsigned in (np.uint8, np.uint16, np.uint32, np.uint64):
        for bidirectional in (True, False):
            got = t5_relative_bucket(rel.astype(unsigned), bidirectional=bidirectional)
            assert got.tolist() == t5_relative_bucket(rel, bidirectional=bidirectional).tolist()
    # the largest uint64 that int64 still holds is accepted; one more is not
    top = np.iinfo(np.int64).max
    got = t5_relative_bucket(np.array([top], dtype=np.uint64))
    assert got.tolist() == t5_relative_bucket(np.array([top])).tolist() == [31]
    with raises_message(ValueError, "relative_position", values=[top + 1], says="out of range"):
        t5_relative_bucket(np.array([top + 1], dtype=np.uint64))


def test_t5_rejects_the_smallest_int64_by_name():
    # -(-2**63) overflows int64 back to -2**63: a bucket computed from it would be wrong
    with raises_message(ValueError, "relative_position", dtypes=["int64"], says=["smallest", "overflow"]):
        t5_relative_bucket(np.array([0, np.iinfo(np.int64).min]))
    # one above it is fine: a key that far before its query lands in the last bucket of the
    # "earlier" half, 15 of 0..15 (the keys after the query use 16..31)
    assert t5_relative_bucket(np.array([np.iinfo(np.int64).min + 1])).tolist() == [15]


def test_t5_names_bidirectional():
    with raises_message(TypeError, "bidirectional"):
        t5_relative_bucket(np.arange(3), bidirectional=1)


def test_relative_bias_passes_minus_inf_through_as_masked():
    # -inf is a documented "masked" in a bias, from a table or from a function
    causal = relative_bias(3, 3, lambda r: np.where(r > 0, -np.inf, 0.5 * r))
    assert (np.isneginf(causal) == (np.arange(3)[None, :] > np.arange(3)[:, None])).all()
    assert causal[2, 0] == -1.0
    table = np.array([0.0, 1.0, -np.inf])  # offsets -1, 0, +1
    assert relative_bias(2, 2, table).tolist() == [[1.0, -np.inf], [0.0, 1.0]]
    with raises_message(ValueError, "table_or_fn(offsets)"):
        relative_bias(2, 2, lambda r: np.where(r > 0, np.inf, 0.0))


def test_relative_bias_from_a_function_may_mask_with_minus_inf():
    # -inf is the documented "masked" in a bias; NaN and +inf are errors
    b = relative_bias(3, 3, lambda r: np.where(r > 0, -np.inf, -0.5 * r))
    for i in range(3):
        for j in range(3):
            assert b[i, j] == (-np.inf if j > i else -0.5 * (j - i))
    for bad in (np.nan, np.inf):
        with raises_message(ValueError, "table_or_fn(offsets)"):
            relative_bias(2, 2, lambda r, bad=bad: np.where(r > 0, bad, 0.0))
