"""attncore._checks: checks added to kill surviving mutants (see the appendix "How strong is the evidence").

The validation helpers promise short messages that still say what was wrong; these tests
state those promises directly (the limits and formats are the helpers' documented ones,
not strings copied from a run).
"""

import numpy as np

from attncore._checks import MAX_DESCRIPTION, _clip, describe


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
    # numpy's own repr style (entries separated by ", "), with a matrix's line breaks removed
    assert describe(np.arange(3.0)) == "array [0., 1., 2.] (dtype float64, shape (3,))"
    assert describe(np.eye(2)) == "array [[1., 0.], [0., 1.]] (dtype float64, shape (2, 2))"


def test_check_float_dtype_names_dtype_and_the_value_given():
    from attncore._checks import check_float_dtype
    from strength import raises_naming
    with raises_naming(TypeError, "dtype", "'no such type'"):
        check_float_dtype("no such type")
    with raises_naming(TypeError, "dtype", "int64"):
        check_float_dtype(np.int64)


def test_check_positive_checks_in_the_dtype_it_is_given():
    from attncore._checks import check_positive
    from strength import raises_naming
    assert check_positive(1e-300, "t") == 1e-300  # representable in float64
    with raises_naming(ValueError, "t", "float32"):
        check_positive(1e-300, "t", np.float32)  # rounds to 0 in float32
