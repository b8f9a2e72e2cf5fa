"""attncore.cost: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import pytest

from attncore._cost import block_flops, matmul_flops
from messages import raises_message


@pytest.mark.parametrize("bad", ["a", "b", "c"])
def test_matmul_flops_names_the_bad_count(bad):
    sizes = dict(a=2, b=3, c=4)
    sizes[bad] = 0
    with raises_message(ValueError, bad):
        matmul_flops(**sizes)


@pytest.mark.parametrize("bad", ["m", "num_heads", "d_ff"])
def test_block_flops_names_the_bad_count(bad):
    with raises_message(ValueError, bad):
        block_flops(4, 6, **{bad: 0})


def test_block_flops_defaults_are_one_head_and_an_ffn_of_width_4d():
    # closed forms of the Notes table with h = 1 and f = 4 d; an odd d rules out two heads
    n, d = 3, 5
    f = 4 * d
    c = block_flops(n, d)
    assert c["softmax"] == n * (5 * n - 2)
    assert c["ffn"] == n * f * (2 * d - 1) + n * f + n * d * (2 * f - 1)
