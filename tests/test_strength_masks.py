"""attncore.masks: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

from attncore._masks import causal_mask
from messages import raises_message


def test_causal_mask_errors_name_the_argument():
    with raises_message(ValueError, "n"):
        causal_mask(0)
    with raises_message(ValueError, "m"):
        causal_mask(3, 0)
    with raises_message(TypeError, "m"):
        causal_mask(3, 2.0)
