"""The arithmetic cost of one transformer block, stage by stage.

Counts are exact numbers of scalar operations (a multiplication, an addition,
a comparison, an exponential and a division count one each) for the forward
pass of :func:`attncore.transformer_block` without biases and without the
layer norms, so that each stage's count can be checked against a direct count
of the operations of a plain loop implementation.
"""

from __future__ import annotations

from attncore._checks import check_count

#: The stages of a block, in the order :func:`attncore.block_flops` reports them.
STAGES = ("projections", "scores", "softmax", "weighted_sum", "output_projection", "ffn")


def matmul_flops(a: int, b: int, c: int) -> int:
    """Scalar operations of an ``(a, b) @ (b, c)`` product: ``a c (2 b - 1)``.

    Each of the ``a c`` entries is a dot product of length ``b``: ``b``
    multiplications and ``b - 1`` additions.

    Raises
    ------
    TypeError
        If ``a``, ``b`` or ``c`` is not an integer.
    ValueError
        If any of them is below 1.

    See Also
    --------
    block_flops

    Examples
    --------
    >>> from attncore._cost import matmul_flops
    >>> matmul_flops(2, 3, 4)  # 8 entries, 3 multiplications and 2 additions each
    40
    """
    a, b, c = check_count(a, "a"), check_count(b, "b"), check_count(c, "c")
    return a * c * (2 * b - 1)


def block_flops(
    n: int, d: int, *, m: int | None = None, num_heads: int = 1, d_ff: int | None = None
) -> dict[str, int]:
    """Scalar operations of each stage of a transformer block.

    Parameters
    ----------
    n : int
        Number of query tokens (the sequence length in self-attention).
    d : int
        Model width, divisible by ``num_heads``.
    m : int, optional
        Number of key / value tokens; ``n`` by default.
    num_heads : int, optional
    d_ff : int, optional
        FFN hidden width ``f``; ``4 d`` by default.

    Returns
    -------
    dict of str to int
        One entry per stage of :data:`STAGES`, in order.

    Raises
    ------
    TypeError
        If a size is not an integer (floats, bools and strings are not sizes).
    ValueError
        If a size is below 1 or ``num_heads`` does not divide ``d``.

    See Also
    --------
    matmul_flops
    transformer_block : The block it counts.

    Notes
    -----
    With ``h`` heads of width ``k = d / h`` and the scores scaled by one
    multiplication each:

    ==================  =====================================  ==================
    stage               operations                             order
    ==================  =====================================  ==================
    projections         ``(n + 2m) d (2d - 1)``                ``n d^2``
    scores              ``h n m (2k - 1) + h n m = 2 n m d``   ``n^2 d``
    softmax             ``h n (5m - 2)``                       ``h n^2``
    weighted_sum        ``n d (2m - 1)``                       ``n^2 d``
    output_projection   ``n d (2d - 1)``                       ``n d^2``
    ffn                 ``n f (2d - 1) + n f + n d (2f - 1)``  ``n d f``
    ==================  =====================================  ==================

    A softmax row of length ``m`` takes ``m - 1`` comparisons (the maximum),
    ``m`` subtractions, ``m`` exponentials, ``m - 1`` additions and ``m``
    divisions; the FFN's ReLU is one comparison per hidden unit.

    Examples
    --------
    The quadratic stages overtake the others once ``n`` is a few times ``d``:

    >>> from attncore._cost import block_flops
    >>> c = block_flops(4, 8, num_heads=2)
    >>> c["scores"] == 2 * 4 * 4 * 8
    True
    >>> sum(block_flops(4096, 64).values()) > 2 * sum(block_flops(64, 64).values()) * 64
    True
    """
    n, d = check_count(n, "n"), check_count(d, "d")
    m = n if m is None else check_count(m, "m")
    h = check_count(num_heads, "num_heads")
    if d % h:
        raise ValueError(f"d must be divisible by num_heads, got d = {d}, num_heads = {h}")
    f = 4 * d if d_ff is None else check_count(d_ff, "d_ff")
    k = d // h
    return {
        "projections": matmul_flops(n, d, d) + 2 * matmul_flops(m, d, d),
        "scores": h * (matmul_flops(n, k, m) + n * m),
        "softmax": h * n * (5 * m - 2),
        "weighted_sum": h * matmul_flops(n, m, k),
        "output_projection": matmul_flops(n, d, d),
        "ffn": matmul_flops(n, d, f) + n * f + matmul_flops(n, f, d),
    }
