"""attncore.masks: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

from attncore._masks import causal_mask
from strength import raises_naming


def test_causal_mask_errors_name_the_argument():
    with raises_naming(ValueError, "n"):
        causal_mask(0)
    with raises_naming(ValueError, "m"):
        causal_mask(3, 0)
    with raises_naming(TypeError, "m"):
        causal_mask(3, 2.0)
