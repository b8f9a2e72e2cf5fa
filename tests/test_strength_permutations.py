"""attncore.permutations: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import re

import pytest

from attncore._permutations import inverse_permutation


def test_a_repeated_index_is_named_with_the_range_it_must_cover():
    message = "perm must contain each of 0..2 exactly once (length 3); 1 of them is missing (the first, 1), so others repeat"
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        inverse_permutation([0, 0, 2])
