"""attncore.linear: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np

from attncore._linear import linear
from strength import raises_naming


def test_linear_errors_name_the_argument_and_shapes():
    x, w, b = np.ones((2, 3)), np.ones((3, 4)), np.ones(4)
    with raises_naming(TypeError, "x"):
        linear(x > 0, w, b)
    with raises_naming(ValueError, "x", "(..., n, d)"):
        linear(np.ones(3), w, b)
    with raises_naming(TypeError, "w_q"):
        linear(x, w > 0, b, name="w_q")
    with raises_naming(ValueError, "w_q", "(3, e)"):
        linear(x, np.ones((2, 4)), b, name="w_q")
    # the bias takes the weight's suffix: w_q -> b_q, w1 -> b1; other names get "bias of"
    with raises_naming(TypeError, "b_q"):
        linear(x, w, b > 0, name="w_q")
    with raises_naming(ValueError, "b_q", "(4,)"):
        linear(x, w, np.ones(3), name="w_q")
    with raises_naming(ValueError, "b", "(4,)"):
        linear(x, w, np.ones(3))
    with raises_naming(ValueError, "bias of proj", "(4,)"):
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
