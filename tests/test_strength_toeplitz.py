"""attncore.toeplitz: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np

from attncore._toeplitz import toeplitz
from strength import raises_naming


def test_errors_name_diagonals_and_the_expected_length():
    with raises_naming(TypeError, "diagonals"):
        toeplitz(np.array([True, False, True]))
    with raises_naming(ValueError, "diagonals", "(..., 2n-1)"):
        toeplitz(np.float64(1.0))
