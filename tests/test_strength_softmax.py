"""attncore._softmax: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np

from attncore import softmax
from strength import raises_naming


def test_bad_temperature_is_an_error_naming_temperature():
    x = np.arange(3.0)
    with raises_naming(ValueError, "temperature"):
        softmax(x, temperature=0.0)
    with raises_naming(TypeError, "temperature"):
        softmax(x, temperature="1")


def test_a_mask_that_does_not_broadcast_names_mask_and_x():
    x = np.zeros((2, 3))
    with raises_naming(ValueError, "mask", "shape of x", "(2, 3)"):
        softmax(x, mask=np.ones((2, 2), bool))
