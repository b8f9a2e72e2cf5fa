"""attncore._permutations: message checks added to kill surviving mutants (appendix "How strong is the evidence")."""

from attncore import inverse_permutation
from strength import raises_naming


def test_an_out_of_range_entry_is_named_with_its_index_and_value():
    with raises_naming(ValueError, "perm", "perm[1] = 5 is out of range"):
        inverse_permutation([0, 5, 1])


def test_missing_entries_are_counted_in_the_message():
    with raises_naming(ValueError, "perm", "2 of them are missing (the first, 1)"):
        inverse_permutation([0, 0, 0])
    with raises_naming(ValueError, "perm", "1 of them is missing (the first, 2)"):
        inverse_permutation([0, 1, 1])
