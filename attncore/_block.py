"""The feed-forward network and the transformer block (post-LN, pre-LN and branch-LN)."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from attncore._attention import multi_head_attention
from attncore._checks import (
    as_float_array,
    check_bool,
    check_choice,
    check_count,
    check_float_dtype,
    check_generator,
)
from attncore._linear import linear
from attncore._norms import layer_norm


def ffn(x: ArrayLike, w1: ArrayLike, b1: ArrayLike | None, w2: ArrayLike, b2: ArrayLike | None) -> np.ndarray:
    r"""The position-wise feed-forward network with a ReLU.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    w1 : array_like, shape (d, f)
    b1 : array_like, shape (f,), or None
    w2 : array_like, shape (f, d)
    b2 : array_like, shape (d,), or None

    Returns
    -------
    ndarray, shape (..., n, d)

    Raises
    ------
    TypeError
        If an argument is not an array of real numbers.
    ValueError
        If the shapes do not chain (``x`` ``(..., n, d)``, ``w1`` ``(d, f)``,
        ``b1`` ``(f,)``, ``w2`` ``(f, d)``, ``b2`` ``(d,)``) or an argument
        holds NaN or ``+-inf``.

    See Also
    --------
    transformer_block : Where the FFN is applied.
    linear

    Notes
    -----
    .. math::

        \mathrm{FFN}(x) = \max(0,\, x W_1 + b_1)\, W_2 + b_2,

    applied to every token separately (rows of ``x``).

    References
    ----------
    :cite:t:`vaswani2017attention`: the transformer.

    Examples
    --------
    Token ``i`` of the output depends on token ``i`` of the input only:

    >>> import numpy as np
    >>> from attncore import ffn
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(3, 4))
    >>> w1, b1, w2, b2 = rng.normal(size=(4, 8)), rng.normal(size=8), rng.normal(size=(8, 4)), None
    >>> bool(np.allclose(ffn(x, w1, b1, w2, b2)[1], ffn(x[1:2], w1, b1, w2, b2)[0]))
    True
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    w1 = as_float_array(w1, "w1", (x.shape[-1], "f"), match=("x", x))
    # Checked here, not inside the second linear(), whose "x" is the hidden layer the caller never saw.
    w2 = as_float_array(w2, "w2", (w1.shape[-1], x.shape[-1]), match=("w1", w1))
    hidden = np.maximum(linear(x, w1, b1, name="w1"), 0)  # (..., n, f)
    return linear(hidden, w2, b2, name="w2")  # (..., n, d)


class BlockParams(NamedTuple):
    """The parameters of one transformer block; biases and LN affines may be None.

    Shapes: ``w_q, w_k, w_v, w_o (d, d)``; ``w1 (d, f)``; ``w2 (f, d)``;
    ``b_q, b_k, b_v, b_o, b2, gamma1, beta1, gamma2, beta2 (d,)``; ``b1 (f,)``.
    LN 1 follows (post-LN), precedes (pre-LN) or closes the branch of (branch-LN)
    attention; LN 2 does the same for the FFN.

    Raises
    ------
    TypeError
        If one of the six weights is missing or an unknown field is given.
        The contents are not checked here but by :func:`transformer_block`,
        whose errors name the field (``params.gamma1``).
    """

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray
    w1: np.ndarray
    w2: np.ndarray
    b_q: Optional[np.ndarray] = None
    b_k: Optional[np.ndarray] = None
    b_v: Optional[np.ndarray] = None
    b_o: Optional[np.ndarray] = None
    b1: Optional[np.ndarray] = None
    b2: Optional[np.ndarray] = None
    gamma1: Optional[np.ndarray] = None
    beta1: Optional[np.ndarray] = None
    gamma2: Optional[np.ndarray] = None
    beta2: Optional[np.ndarray] = None


def init_block_params(
    d: int, d_ff: int, rng: np.random.Generator, *, bias: bool = True, dtype: DTypeLike = np.float64
) -> BlockParams:
    """Random parameters for :func:`transformer_block`, drawn from ``rng``.

    Weights are normal with standard deviation ``1/sqrt(fan_in)``; biases and
    LN shifts normal with standard deviation 0.1; LN scales ``1 + 0.1 * normal``.
    With ``bias=False`` every bias and LN shift is None.

    Parameters
    ----------
    d, d_ff : int
        Model width and FFN hidden width.
    rng : numpy.random.Generator
    bias : bool, optional
    dtype : numpy dtype, optional

    Returns
    -------
    BlockParams

    Raises
    ------
    TypeError
        If ``d`` or ``d_ff`` is not an integer, ``rng`` not a
        ``numpy.random.Generator``, ``bias`` not a bool, or ``dtype`` not a
        floating dtype (an integer dtype would truncate every weight to 0).
    ValueError
        If ``d`` or ``d_ff`` is below 1.

    See Also
    --------
    transformer_block
    BlockParams
    """
    d = check_count(d, "d")
    d_ff = check_count(d_ff, "d_ff")
    check_generator(rng)
    bias = check_bool(bias, "bias")
    dtype = check_float_dtype(dtype)

    def normal(shape, std):
        return (std * rng.standard_normal(shape)).astype(dtype)

    def shift(size):
        return normal(size, 0.1) if bias else None

    return BlockParams(
        w_q=normal((d, d), d**-0.5),
        w_k=normal((d, d), d**-0.5),
        w_v=normal((d, d), d**-0.5),
        w_o=normal((d, d), d**-0.5),
        w1=normal((d, d_ff), d**-0.5),
        w2=normal((d_ff, d), d_ff**-0.5),
        b_q=shift(d),
        b_k=shift(d),
        b_v=shift(d),
        b_o=shift(d),
        b1=shift(d_ff),
        b2=shift(d),
        gamma1=(1 + normal(d, 0.1)).astype(dtype),
        beta1=shift(d),
        gamma2=(1 + normal(d, 0.1)).astype(dtype),
        beta2=shift(d),
    )


def transformer_block(
    x: ArrayLike, params: BlockParams, num_heads: int, *, placement: str = "post", mask: ArrayLike | None = None
) -> np.ndarray:
    r"""One transformer block: multi-head self-attention and FFN, with residuals.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    params : BlockParams
    num_heads : int
    placement : {"post", "pre", "branch"}, optional
        Where the layer norms sit (see Notes).
    mask : array_like of bool, optional
        Broadcastable to ``(..., n, n)``; passed to the attention.

    Returns
    -------
    ndarray, shape (..., n, d)

    Raises
    ------
    TypeError
        If ``params`` is not a :class:`BlockParams`, a field of it or ``x``
        is not an array of real numbers, ``num_heads`` is not an integer, or
        ``mask`` is not boolean.
    ValueError
        If ``placement`` is not one of the three; if a field of ``params``
        (named ``params.<field>`` in the message) has the wrong shape for the
        width ``d`` of ``x`` or holds NaN or ``+-inf``; if ``x`` does; if
        ``num_heads`` does not divide ``d``; if ``mask`` does not broadcast to
        ``(..., n, n)``.

    See Also
    --------
    multi_head_attention
    ffn
    layer_norm
    init_block_params

    Notes
    -----
    Post-LN (the original Transformer):
    :math:`H = \mathrm{LN}_1(X + \mathrm{MHA}(X))`,
    :math:`Y = \mathrm{LN}_2(H + \mathrm{FFN}(H))`.

    Pre-LN: :math:`H = X + \mathrm{MHA}(\mathrm{LN}_1(X))`,
    :math:`Y = H + \mathrm{FFN}(\mathrm{LN}_2(H))`.

    Branch-LN (the layer norm closes each residual branch, the form written in
    the source document of chapter 2):
    :math:`H = X + \mathrm{LN}_1(\mathrm{MHA}(X))`,
    :math:`Y = H + \mathrm{LN}_2(\mathrm{FFN}(H))`.

    References
    ----------
    :cite:t:`vaswani2017attention`: the transformer.

    :cite:t:`xiong2020layer`: post- and pre-LN placement.

    Examples
    --------
    Without a mask or positional input, the block is permutation equivariant:

    >>> import numpy as np
    >>> from attncore import init_block_params, transformer_block
    >>> rng = np.random.default_rng(0)
    >>> p = init_block_params(8, 16, rng)
    >>> x = rng.normal(size=(5, 8))
    >>> perm = [1, 4, 0, 3, 2]
    >>> bool(np.allclose(transformer_block(x[perm], p, 2, placement="pre"),
    ...                  transformer_block(x, p, 2, placement="pre")[perm]))
    True
    """
    x, p = _block_args(x, params, placement)

    def mha(z):
        return multi_head_attention(
            z, p.w_q, p.w_k, p.w_v, p.w_o, num_heads,
            b_q=p.b_q, b_k=p.b_k, b_v=p.b_v, b_o=p.b_o, mask=mask,
        )

    def ln1(z):
        return layer_norm(z, p.gamma1, p.beta1)

    def ln2(z):
        return layer_norm(z, p.gamma2, p.beta2)

    if placement == "post":
        h = ln1(x + mha(x))
        return ln2(h + ffn(h, p.w1, p.b1, p.w2, p.b2))
    if placement == "branch":
        h = x + ln1(mha(x))
        return h + ln2(ffn(h, p.w1, p.b1, p.w2, p.b2))
    h = x + mha(ln1(x))
    return h + ffn(ln2(h), p.w1, p.b1, p.w2, p.b2)


def _block_args(x, params, placement):
    """Validate the arguments of :func:`transformer_block` but ``num_heads`` and ``mask``: ``(x, params)``."""
    if not isinstance(params, BlockParams):
        raise TypeError(f"params must be a BlockParams, got {type(params).__name__}")
    check_choice(placement, "placement", ("post", "pre", "branch"))
    x = as_float_array(x, "x", ("...", "n", "d"))
    return x, _checked_params(params, x.shape[-1])


def _checked_params(params, d):
    """Validate every field of ``params`` against the width ``d``, under its field name."""
    if params.w1 is None or params.w2 is None:
        raise ValueError("params.w1 and params.w2 must be arrays, got None")
    f = as_float_array(params.w1, "params.w1", (d, "f")).shape[-1]
    shapes = {"w_q": (d, d), "w_k": (d, d), "w_v": (d, d), "w_o": (d, d), "w1": (d, f), "w2": (f, d), "b1": (f,)}
    checked = {}
    for field, value in zip(params._fields, params):
        if value is None and field.startswith("w"):
            raise ValueError(f"params.{field} must be an array of shape {shapes[field]}, got None")
        checked[field] = None if value is None else as_float_array(value, f"params.{field}", shapes.get(field, (d,)))
    return BlockParams(**checked)
