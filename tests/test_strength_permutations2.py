"""attncore._permutations: message checks added to kill surviving mutants (appendix "How strong is the evidence")."""

from attncore import inverse_permutation
from messages import raises_message


def test_an_out_of_range_entry_is_named_with_its_index_and_value():
    # the facts: the entry's index (1) and value (5), and that it is outside 0..n-1
    with raises_message(ValueError, "perm", values=[1, 5], says="out of range"):
        inverse_permutation([0, 5, 1])


def test_missing_entries_are_counted_in_the_message():
    # the facts: how many are missing and the first of them (the two cases tell count and index apart)
    with raises_message(ValueError, "perm", values=[2, 1], says="missing"):
        inverse_permutation([0, 0, 0])
    with raises_message(ValueError, "perm", values=[1, 2], says="missing"):
        inverse_permutation([0, 1, 1])
