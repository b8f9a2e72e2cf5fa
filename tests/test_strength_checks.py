"""attncore._checks: checks added to kill surviving mutants (see the appendix "How strong is the evidence").

The validation helpers promise short messages that still say what was wrong; these tests
state those promises directly (the limits and formats are the helpers' documented ones,
not strings copied from a run).
"""

import numpy as np

from attncore._checks import MAX_DESCRIPTION, _clip, describe
from messages import assert_message, raises_message


def test_clip_keeps_text_that_fits_and_cuts_longer_text_to_exactly_the_limit():
    for length in (0, 1, MAX_DESCRIPTION - 1, MAX_DESCRIPTION):
        text = "".join(chr(ord("a") + i % 26) for i in range(length))
        assert _clip(text) == text
    for length in (MAX_DESCRIPTION + 1, 3 * MAX_DESCRIPTION):
        text = "".join(chr(ord("a") + i % 26) for i in range(length))
        clipped = _clip(text)
        # the longest prefix that fits beside the ellipsis
        assert len(clipped) == MAX_DESCRIPTION
        assert clipped == text[: MAX_DESCRIPTION - 3] + "..."
    assert _clip("abcdefgh", 5) == "ab..."


def test_describe_shows_small_arrays_and_short_sequences_in_full():
    # up to six entries an array is shown with its values; from seven, by dtype and shape only
    six = describe(np.arange(6.0))
    assert all(f"{i}." in six for i in range(6)) and "shape (6,)" in six
    seven = describe(np.arange(7.0))
    assert "6." not in seven and "float64" in seven and "(7,)" in seven
    assert describe([1, 2, 3, 4, 5, 6]) == repr([1, 2, 3, 4, 5, 6])
    assert describe(list(range(7))) == "a list of length 7"
    assert describe(tuple(range(9))) == "a tuple of length 9"
    assert describe(2.5) == "2.5"


def test_describe_prints_small_arrays_on_one_line_with_commas():
    # numpy's own repr style (entries separated by ", "), with a matrix's line breaks removed,
    # then the dtype and the shape
    for a in (np.arange(3.0), np.eye(2)):
        text = describe(a)
        assert "\n" not in text and ", " in text
        assert_message(text, dtypes=["float64"], shapes=[a.shape])
        assert np.array2string(a, separator=", ").replace("\n", "") in text


def test_check_float_dtype_names_dtype_and_the_value_given():
    from attncore._checks import check_float_dtype
    with raises_message(TypeError, "dtype", values=["no such type"]):
        check_float_dtype("no such type")
    with raises_message(TypeError, "dtype", dtypes=["int64"]):
        check_float_dtype(np.int64)


def test_check_positive_checks_in_the_dtype_it_is_given():
    from attncore._checks import check_positive
    assert check_positive(1e-300, "t") == 1e-300  # representable in float64
    with raises_message(ValueError, "t", dtypes=["float32"], says="not representable"):
        check_positive(1e-300, "t", np.float32)  # rounds to 0 in float32


# ---- the validators themselves, message by message ----------------------------------------------
# Each message must name the argument, say what was expected and show what was given; the
# facts are checked (tests/messages.py), not the words. They kill a mangled or dropped part
# of a message (a name replaced by None, describe(None), "XX...XX", a lost "(to match ...)").

import warnings  # noqa: E402

import pytest  # noqa: E402

from attncore._checks import (  # noqa: E402
    as_float_array, batch_shape, check_axis, check_bool, check_broadcastable, check_choice, check_count,
    check_finite, check_fits, check_generator, check_real, check_shape,
)


def test_check_count_accepts_true_integers_from_the_minimum_on():
    assert check_count(1, "n") == 1  # the default minimum is 1
    assert check_count(0, "layers", minimum=0) == 0
    value = check_count(np.int64(3), "n")
    assert value == 3 and type(value) is int
    with raises_message(ValueError, "n", values=[1, 0], says="out of range"):
        check_count(0, "n")
    with raises_message(TypeError, "n", values=["True"], says="integer"):
        check_count(True, "n")
    with raises_message(TypeError, "n", values=["float", 2.0], says="integer"):
        check_count(2.0, "n")


def test_check_bool_accepts_python_and_numpy_booleans_only():
    assert check_bool(True, "causal") is True
    assert check_bool(np.False_, "causal") is False
    assert check_bool(np.True_, "causal") is True
    with raises_message(TypeError, "causal", values=["int", 1], says="boolean"):
        check_bool(1, "causal")


def test_check_generator():
    check_generator(np.random.default_rng(0))
    with raises_message(TypeError, "rng", values=["int"], options=["numpy.random.Generator"]):
        check_generator(0)
    with raises_message(TypeError, "seed", values=["RandomState"], options=["numpy.random.Generator"]):
        check_generator(np.random.RandomState(0), "seed")


def test_check_choice_takes_strings_or_none_from_the_choices():
    check_choice("b", "kind", ("a", "b"))
    check_choice(None, "kind", (None, "a"))
    with raises_message(ValueError, "kind", values=["c"], options=["a", "b"]):
        check_choice("c", "kind", ("a", "b"))
    with raises_message(ValueError, "kind", values=[1], options=["2"]):
        check_choice(1, "kind", (1, 2))  # strings only, even if == would match
    with raises_message(ValueError, "kind", values=["None"], options=["a", "b"]):
        check_choice(None, "kind", ("a", "b"))


def test_as_float_array_kinds():
    a = as_float_array(np.array([1, 2], np.uint8), "x")
    assert a.dtype == np.float64 and a.tolist() == [1.0, 2.0]
    a = as_float_array([1, 2], "x")
    assert a.dtype == np.float64 and a.tolist() == [1.0, 2.0]
    f32 = np.ones(2, np.float32)
    assert as_float_array(f32, "x").dtype == np.float32
    with raises_message(TypeError, "x", dtypes=["bool"], shapes=[(2,)], says="real"):
        as_float_array(np.array([True, False]), "x")
    with raises_message(TypeError, "x", dtypes=["complex128"], shapes=[()], says="real"):
        as_float_array(1j, "x")
    # a ragged list: the message shows the value and numpy's own reason, clipped
    with raises_message(TypeError, "x", values=["[[1], [1, 2]]", "sequence"], says="real"):
        as_float_array([[1], [1, 2]], "x")


def test_as_float_array_finiteness_and_shape():
    with raises_message(ValueError, "x", values=[1, "nan", "(0,)"], shapes=[(1,)], says="finite"):
        as_float_array([np.nan], "x")  # finite=True is the default
    assert np.isnan(as_float_array([np.nan], "x", finite=False)[0])
    assert as_float_array([-np.inf], "s", finite="-inf")[0] == -np.inf
    # and what -inf means instead (masked)
    with raises_message(ValueError, "s", values=[1, "inf", "(1,)", "-inf"], shapes=[(2,)], says=["finite", "masked"]):
        as_float_array([-np.inf, np.inf], "s", finite="-inf")
    with raises_message(ValueError, "b", names=["w"], shapes=["(4,)", (3,), (2, 4)]):
        as_float_array(np.ones(3), "b", (4,), match=("w", np.ones((2, 4))))
    assert as_float_array(np.ones((2, 3)), "x", ("...", "n", "d")).shape == (2, 3)


@pytest.mark.parametrize("shape, spec, ok", [
    ((2, 3), ("...", "n", "d"), True),
    ((4, 2, 3), ("...", "n", "d"), True),
    ((3,), ("...", "n", "d"), False),
    ((3, 5), ("...", 2, "d"), False),
    ((2, 5), ("...", 2, "d"), True),
    ((2, 3), ("n", 3), True),
    ((2, 4), ("n", 3), False),
    ((2, 3, 3), ("n", 3), False),
    ((4,), (4,), True),
    ((), (), True),
    ((1,), (), False),
    ((2, 3), ("...",), True),
    ((), ("...",), True),
])
def test_check_shape_table(shape, spec, ok):
    x = np.ones(shape)
    if ok:
        check_shape(x, "x", spec)
    else:
        inner = ", ".join(str(s) for s in spec)
        want = f"({inner},)" if len(spec) == 1 else f"({inner})"
        with raises_message(ValueError, "x", shapes=[want, shape]):
            check_shape(x, "x", spec)


def test_check_broadcastable_never_enlarges():
    check_broadcastable(np.ones((1, 3)), "bias", (2, 3), "scores")
    with raises_message(ValueError, "bias", names=["scores"], shapes=[(2, 3), (1, 3)], says="broadcast"):
        check_broadcastable(np.ones((2, 3)), "bias", (1, 3), "scores")
    with raises_message(ValueError, "bias", names=["scores"], shapes=[(4,), (2, 3)], says="broadcast"):
        check_broadcastable(np.ones(4), "bias", (2, 3), "scores")


def test_batch_shape_broadcasts_the_leading_axes_only():
    assert batch_shape(("q", np.ones((2, 5, 4)), 2), ("k", np.ones((2, 7, 4)), 2)) == (2,)
    assert batch_shape(("a", np.ones((2, 1, 3)), 1), ("b", np.ones((5, 3, 3)), 2)) == (2, 5)
    with raises_message(ValueError, "q", names=["k"], shapes=[(2, 5, 4), (3, 7, 4)], says="broadcast"):
        batch_shape(("q", np.ones((2, 5, 4)), 2), ("k", np.ones((3, 7, 4)), 2))


def test_check_finite_counts_and_points_at_the_first_bad_entry():
    check_finite(np.array([1.0, -2.0]), "x")
    check_finite(np.array([-np.inf, 1.0]), "s", neg_inf=True)
    # the facts: how many bad entries, the first one's value and index, the array's shape
    with raises_message(ValueError, "x", values=[2, "nan", "(0, 1)"], shapes=[(2, 2)], says="finite"):
        check_finite(np.array([[1.0, np.nan], [np.inf, 2.0]]), "x")
    with raises_message(ValueError, "x", values=[1, "-inf", "(1,)"], shapes=[(2,)], says="finite"):
        check_finite(np.array([1.0, -np.inf]), "x")  # -inf is rejected unless neg_inf
    with raises_message(ValueError, "t", values=[1, "nan"], shapes=[()], says="finite"):
        check_finite(np.array(np.nan), "t")
    with raises_message(ValueError, "s", values=[2, "nan", "(1,)"], shapes=[(3,)], says="finite"):
        check_finite(np.array([-np.inf, np.nan, np.inf]), "s", neg_inf=True)


def test_check_finite_says_which_values_it_rejects():
    """Without neg_inf, -inf is listed among the rejected values and not called allowed (masked);
    with neg_inf, the message says -inf is allowed and means masked."""
    with raises_message(ValueError, "x", values=["-inf"], says="finite") as info:
        check_finite(np.array([1.0, np.inf]), "x")
    assert "allowed" not in str(info.value) and "mask" not in str(info.value)
    with raises_message(ValueError, "s", values=["-inf"], says=["finite", "masked"]):
        check_finite(np.array([1.0, np.inf]), "s", neg_inf=True)


def test_check_fits_skips_infinities_and_accepts_the_largest_number():
    big32 = float(np.finfo(np.float32).max)
    check_fits(np.array([np.inf, -np.inf, 1.0]), "w", np.float32)  # not finite: not its business
    check_fits(np.array([big32, -big32]), "w", np.float32)  # the largest float32 fits exactly
    check_fits(np.array([1e300]), "w", np.float64)
    with raises_message(ValueError, "w", dtypes=["float64", "float32"], shapes=[(1,)], says="overflow"):
        check_fits(np.array([1e39]), "w", np.float32)
    with raises_message(ValueError, "w", dtypes=["float64", "float16"], shapes=[(2,)], says="overflow"):
        check_fits(np.array([1.0, -7e4]), "w", np.float16)


def test_check_real_kinds_and_limits():
    assert check_real(-5.0, "x") == -5.0  # neither positive nor a minimum by default
    assert check_real(0, "eps", minimum=0) == 0.0
    assert check_real(0.5, "t", positive=True) == 0.5
    out = check_real(0.1, "t", np.float32)
    assert type(out) is np.float32 and out == np.float32(0.1)
    assert check_real(0.0, "eps", np.float16) == 0.0
    assert check_real(1e-40, "s", np.float32) > 0  # subnormal, allowed without reciprocal
    with raises_message(TypeError, "eps", values=["bool", "True"], says="real"):
        check_real(True, "eps")
    with raises_message(TypeError, "eps", values=["str", "0.1"], says="real"):
        check_real("0.1", "eps")
    with raises_message(ValueError, "eps", values=["inf"], says="finite"):
        check_real(np.inf, "eps")
    with raises_message(ValueError, "t", values=[0.0, "> 0"]):
        check_real(0.0, "t", positive=True)
    with raises_message(ValueError, "eps", values=[-1, ">= 0"]):
        check_real(-1, "eps", minimum=0)


def test_check_real_in_the_dtype_it_is_used_in():
    # the facts: the value, the dtype it is used in, what it must be there, and that dtype's range
    with raises_message(ValueError, "eps", values=[1e-46, "1.18e-38", "3.4e+38"], dtypes=["float32"],
                        says="not representable") as info:
        check_real(1e-46, "eps", np.float32)
    assert "reciprocal" not in str(info.value)  # no reciprocal was asked for, so none is demanded
    with raises_message(ValueError, "s", values=[100000.0, "6.1e-05", "6.55e+04"], dtypes=["float16"],
                        says="not representable"):
        check_real(1e5, "s", np.float16)
    with raises_message(ValueError, "s", values=[1e-40], dtypes=["float32"], says=["not representable", "reciprocal"]):
        check_real(1e-40, "s", np.float32, reciprocal=True)
    with raises_message(ValueError, "s", values=[0.0, "2.23e-308", "1.8e+308"], dtypes=["float64"],
                        says="not representable") as info:
        check_real(0.0, "s", reciprocal=True)
    assert "nonzero" not in str(info.value)  # 0 itself is not asked to be nonzero
    assert check_real(0.5, "s", np.float16, reciprocal=True) == 0.5
    # 4e-39 is subnormal in float32 but its reciprocal 2.5e38 is finite there: accepted (kills
    # the reciprocal tested as 2 / cast, which overflows)
    assert check_real(4e-39, "s", np.float32, reciprocal=True) == np.float32(4e-39)


def test_check_real_is_silent_under_any_floating_point_error_settings():
    # the casts and the reciprocal overflow, underflow or divide by zero on purpose; neither a
    # warning nor a caller's np.errstate(all="raise") may replace the documented outcome.
    # Kills any of over=, under=, divide="ignore" dropped or set to None.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            with raises_message(ValueError, "s", values=[100000.0], dtypes=["float16"], says="not representable"):
                check_real(1e5, "s", np.float16)
            with raises_message(ValueError, "s", values=[0.0], says="not representable"):
                check_real(0.0, "s", reciprocal=True)
            assert check_real(3e38, "s", np.float32, reciprocal=True) == np.float32(3e38)
        with raises_message(ValueError, "s", values=[100000.0], dtypes=["float16"], says="not representable"):
            check_real(1e5, "s", np.float16)
        with raises_message(ValueError, "s", values=[0.0], says="not representable"):
            check_real(0.0, "s", reciprocal=True)


def test_check_fits_never_reads_the_infinite_entries():
    # Only the finite entries are compared with the largest number: np.abs(x, where=finite) must
    # write into zeros. Without out= (or with out=None) the skipped entries are whatever memory
    # numpy hands back; freeing an array of 1e300 just before makes that memory hold huge numbers
    # (numpy's allocator reuses blocks of the same size), and without out= numpy also warns.
    # Kills out=np.zeros(...) replaced by out=None or dropped.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (1, 2, 3, 4, 8, 16, 100):
            for _ in range(3):
                junk = np.full(n, 1e300)
                del junk
                check_fits(np.full(n, np.inf), "w", np.float32)


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps,
                    reason="long double is float64 on this platform")
def test_check_fits_is_strict_for_long_double_just_above_the_largest_float64():
    # max * (1 + 2**-60) rounds to max in float64, yet it is beyond it: "be strict". Kills the
    # absolute values taken into a float64 buffer (np.zeros(x.shape, None) or the dtype dropped),
    # which rounds the entry down to max.
    big = np.longdouble(np.finfo(np.float64).max)
    x = np.array([big * (1 + np.longdouble(2) ** -60)])
    with raises_message(ValueError, "w", dtypes=[np.longdouble, "float64"], shapes=[(1,)], says="overflow"):
        check_fits(x, "w", np.float64)
    check_fits(np.array([big]), "w", np.float64)


def test_check_axis_states_the_axis_and_the_range_it_must_lie_in():
    for ndim, axis in ((2, 5), (2, -3), (1, 1)):
        with raises_message(ValueError, "x", names=["axis"], values=[axis, -ndim, ndim], says="out of range"):
            check_axis(axis, ndim, "x")
