"""attncore.permutations: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

from attncore._permutations import inverse_permutation
from messages import raises_message


def test_a_repeated_index_is_named_with_the_range_it_must_cover():
    # the facts: the range 0..n-1 each entry must cover once (n - 1 = 2), the length, how many are missing
    # and the first of them
    with raises_message(ValueError, "perm", values=[2, 3, 1], says="missing"):
        inverse_permutation([0, 0, 2])
