"""attncore._train: checks added to kill surviving mutants (see the appendix "How strong is the evidence").

The trainers' messages about what ``loss_and_grad`` returned must state what it returned (its
type, and its shape for an array), not only what was expected.
"""

import numpy as np
import pytest

import attncore as ac
from messages import raises_message


def quad(params):
    """loss (p - 3)^2 summed, and its gradient."""
    return float(np.sum((params[0] - 3.0) ** 2)), [2 * (params[0] - 3.0)]


@pytest.mark.parametrize("train", [ac.gradient_descent, ac.adam])
def test_a_trainer_names_the_type_of_what_it_was_given(train):
    with raises_message(TypeError, "loss_and_grad", values=["int"]):
        train(3, [np.zeros(2)], steps=1, lr=0.1)
    with raises_message(TypeError, "params", values=["ndarray"]):
        train(quad, np.zeros(2), steps=1, lr=0.1)


@pytest.mark.parametrize("returned, facts", [
    (1.5, dict(values=["float", 1.5])),  # not a pair
    (np.zeros((2, 3)), dict(values=["ndarray"], shapes=[(2, 3)])),
])
def test_a_return_that_is_not_a_pair_is_described(returned, facts):
    with raises_message(TypeError, "loss_and_grad", **facts):
        ac.gradient_descent(lambda p: returned, [np.zeros(2)], steps=1, lr=0.1)


def test_a_loss_that_is_not_a_real_number_is_described_with_the_remedy():
    with raises_message(TypeError, "loss_and_grad", values=["str", "'abc'"]):
        ac.gradient_descent(lambda p: ("abc", [np.zeros(2)]), [np.zeros(2)], steps=1, lr=0.1)
    with raises_message(TypeError, "loss_and_grad", values=["ndarray", "float(loss)"], shapes=[(1,)]):
        ac.gradient_descent(lambda p: (np.zeros(1), [np.zeros(2)]), [np.zeros(2)], steps=1, lr=0.1)


def test_gradients_that_are_not_a_list_or_too_many_are_described():
    with raises_message(TypeError, "loss_and_grad", values=["ndarray"], shapes=[(2,)]):
        ac.gradient_descent(lambda p: (0.0, np.zeros(2)), [np.zeros(2)], steps=1, lr=0.1)
    with raises_message(ValueError, "loss_and_grad", values=[2, 1]):
        ac.gradient_descent(lambda p: (0.0, [np.zeros(2), np.zeros(2)]), [np.zeros(2)], steps=1, lr=0.1)
