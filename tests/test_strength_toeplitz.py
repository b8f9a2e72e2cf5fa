"""attncore.toeplitz: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np

from attncore._toeplitz import toeplitz
from messages import raises_message


def test_errors_name_diagonals_and_the_expected_length():
    with raises_message(TypeError, "diagonals"):
        toeplitz(np.array([True, False, True]))
    with raises_message(ValueError, "diagonals", shapes=["(..., 2n-1)"]):
        toeplitz(np.float64(1.0))
