"""attncore.linear: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np

from attncore._linear import linear
from messages import raises_message


def test_linear_errors_name_the_argument_and_shapes():
    x, w, b = np.ones((2, 3)), np.ones((3, 4)), np.ones(4)
    with raises_message(TypeError, "x"):
        linear(x > 0, w, b)
    with raises_message(ValueError, "x", shapes=["(..., n, d)"]):
        linear(np.ones(3), w, b)
    with raises_message(TypeError, "w_q"):
        linear(x, w > 0, b, name="w_q")
    with raises_message(ValueError, "w_q", names=["x"], shapes=["(3, e)", "(2, 3)"]):
        linear(x, np.ones((2, 4)), b, name="w_q")
    # the bias takes the weight's suffix: w_q -> b_q, w1 -> b1; other names get "bias of"
    with raises_message(TypeError, "b_q"):
        linear(x, w, b > 0, name="w_q")
    with raises_message(ValueError, "b_q", names=["w_q"], shapes=["(4,)", "(3, 4)"]):
        linear(x, w, np.ones(3), name="w_q")
    with raises_message(ValueError, "b", shapes=["(4,)"]):
        linear(x, w, np.ones(3))
    with raises_message(ValueError, "bias of proj", shapes=["(4,)"]):
        linear(x, w, np.ones(3), name="proj")


def test_linear_keeps_float32_with_a_float64_bias():
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=4)
    y = linear(x, w, b)
    assert y.dtype == np.float32
    for i in range(2):
        for j in range(4):
            ref = sum(float(x[i, t]) * float(w[t, j]) for t in range(3)) + float(np.float32(b[j]))
            assert abs(float(y[i, j]) - ref) < 1e-5


def test_linear_names_a_float64_bias_that_overflows_float32():
    # float32 tokens and weights give a float32 result; a float64 bias beyond float32's
    # largest number would become inf there, so it is refused, naming the bias and the dtype
    x, w = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    b = np.array([0.0, 1e39, 0.0, 0.0])
    with raises_message(ValueError, "b_q", dtypes=["float64", "float32"], shapes=[(4,)], says="overflow"):
        linear(x, w, b, name="w_q")
    with raises_message(ValueError, "bias of proj", dtypes=["float32"], says="overflow"):
        linear(x, w, b, name="proj")
    # the largest float32 number itself fits, and is added as it is
    top = float(np.finfo(np.float32).max)
    y = linear(np.zeros((2, 3), np.float32), w, np.array([top, 0.0, 0.0, 0.0]))
    assert y.dtype == np.float32 and y[0, 0] == np.float32(top)


def test_linear_rounds_a_float64_bias_to_the_result_dtype_first():
    # A float64 bias on float32 tokens acts as its float32 rounding: passing b or
    # b.astype(float32) gives the same bits.  Adding it unrounded (in float64, then rounding
    # the sum) differs at a tie: 1 + 2**-24 is halfway between float32 neighbours, and the
    # extra 2**-50 of the unrounded bias decides the tie upwards.
    x, w = np.ones((1, 1), np.float32), np.ones((1, 1), np.float32)
    b = np.array([2.0**-24 + 2.0**-50])
    assert np.float32(b[0]) == np.float32(2.0**-24)
    y = linear(x, w, b)
    assert y.dtype == np.float32 and y[0, 0] == np.float32(1.0)  # ties to even
    rng = np.random.default_rng(11)
    x, w = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=4) * 1e-7
    np.testing.assert_array_equal(linear(x, w, b), linear(x, w, b.astype(np.float32)))
