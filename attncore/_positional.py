"""Positional information: sinusoidal encodings, RoPE, T5 buckets, ALiBi, relative biases.

Attention without positional input is permutation equivariant, so every
notion of order enters through one of these functions:

* :func:`sinusoidal_encoding` adds an absolute code to each token;
* :func:`rope` rotates queries and keys by an angle proportional to their
  position, so that their dot product depends on the offset only;
* :func:`relative_bias` builds a bias ``b[i, j] = f(j - i)`` to add to the
  scores, with :func:`t5_relative_bucket` (T5) or :func:`alibi_slopes` (ALiBi)
  as common choices of ``f``.

Relative positions are always ``key position - query position`` (``j - i``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import (
    as_float_array,
    check_bool,
    check_broadcastable,
    check_choice,
    check_count,
    check_positive,
)

ROPE_CONVENTIONS = ("interleaved", "half")


def sinusoidal_encoding(n: int, d: int, *, base: float = 10000.0) -> np.ndarray:
    r"""The sinusoidal absolute position encoding of the original Transformer.

    Parameters
    ----------
    n : int
        Number of positions ``0, 1, ..., n - 1``.
    d : int
        Width of the encoding (odd ``d`` keeps the sine of the last frequency).
    base : float, optional
        The base of the geometric sequence of wavelengths.

    Returns
    -------
    ndarray, shape (n, d)
        Row ``p`` is the code of position ``p``.

    Raises
    ------
    TypeError
        If ``n`` or ``d`` is not an integer (floats, bools and strings are
        not counts), or ``base`` is not a real number.
    ValueError
        If ``n < 0``, ``d < 1``, or ``base`` is not finite and ``> 0``.

    See Also
    --------
    rope : Rotary position encoding.
    relative_bias

    Notes
    -----
    With frequencies :math:`\omega_i = \mathrm{base}^{-2i/d}`,

    .. math::

        \mathrm{PE}[p, 2i] = \sin(p\,\omega_i), \qquad
        \mathrm{PE}[p, 2i + 1] = \cos(p\,\omega_i).

    For even ``d``, ``PE[p] . PE[r] = sum_i cos((r - p) omega_i)`` depends on
    ``r - p`` only, and each row has squared norm ``d / 2``.

    References
    ----------
    :cite:t:`vaswani2017attention`: the transformer.

    Examples
    --------
    The dot product of two codes depends on their offset only:

    >>> import numpy as np
    >>> from attncore._positional import sinusoidal_encoding
    >>> pe = sinusoidal_encoding(50, 16)
    >>> bool(np.isclose(pe[3] @ pe[10], pe[30] @ pe[37]))
    True
    >>> bool(np.allclose(np.sum(pe ** 2, axis=-1), 8.0))
    True
    """
    n = check_count(n, "n", minimum=0)
    d = check_count(d, "d", minimum=1)
    base = check_positive(base, "base")
    half = (d + 1) // 2
    omega = base ** (-2.0 * np.arange(half) / d)  # (ceil(d/2),)
    angles = np.arange(n, dtype=np.float64)[:, None] * omega  # (n, ceil(d/2))
    pe = np.empty((n, 2 * half))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe[:, :d]  # (n, d)


def rope_frequencies(d: int, *, base: float = 10000.0) -> np.ndarray:
    """The rotation frequencies ``theta_i = base ** (-2 i / d)`` of RoPE.

    Parameters
    ----------
    d : int
        Even width of the rotated vectors.
    base : float, optional

    Returns
    -------
    ndarray, shape (d // 2,)

    Raises
    ------
    TypeError
        If ``d`` is not an integer or ``base`` not a real number.
    ValueError
        If ``d`` is not even and ``>= 2``, or ``base`` is not finite and ``> 0``.

    References
    ----------
    :cite:t:`su2024roformer`: RoFormer: rotary position embedding.

    See Also
    --------
    rope
    sinusoidal_encoding

    Examples
    --------
    >>> from attncore._positional import rope_frequencies
    >>> rope_frequencies(4, base=100.0)
    array([1. , 0.1])
    """
    d = check_count(d, "d", minimum=2)
    if d % 2:
        raise ValueError(f"d must be even (features are rotated in pairs), got d = {d}")
    base = check_positive(base, "base")
    return base ** (-2.0 * np.arange(d // 2) / d)


def rope(
    x: ArrayLike, positions: ArrayLike | None = None, *, base: float = 10000.0, convention: str = "interleaved"
) -> np.ndarray:
    r"""Rotary position embedding: rotate feature pairs by position-dependent angles.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
        Queries or keys, one per row; ``d`` must be even.
    positions : array_like, shape broadcastable to (..., n), optional
        The position of each row (integers or reals); ``0, 1, ..., n - 1`` by
        default.
    base : float, optional
        ``theta_i = base ** (-2 i / d)`` for ``i = 0, ..., d/2 - 1``.
    convention : {"interleaved", "half"}, optional
        Which features form the ``i``-th rotated pair: ``(2i, 2i + 1)``
        (the RoFormer paper, and Meta's reference Llama code) or
        ``(i, i + d/2)`` (the split-halves layout of GPT-NeoX and of the
        Hugging Face port of Llama).

    Returns
    -------
    ndarray, shape (..., n, d)

    Raises
    ------
    TypeError
        If ``x`` or ``positions`` is not an array of real numbers, or ``base``
        is not a real number.
    ValueError
        If ``x`` is not ``(..., n, d)`` with ``d`` even; if ``positions`` does
        not broadcast to ``(..., n)``; if ``x`` or ``positions`` holds NaN or
        ``+-inf``; if ``base`` is not finite and ``> 0``; if ``convention`` is
        not one of the two.

    See Also
    --------
    rope_frequencies
    rope_permutation : Between the two conventions.

    Notes
    -----
    Each pair :math:`(a, b)` of a row at position :math:`p` is rotated by the
    angle :math:`p\,\theta_i`:

    .. math::

        (a, b) \mapsto (a\cos p\theta_i - b\sin p\theta_i,\;
                          a\sin p\theta_i + b\cos p\theta_i).

    With rows acting on the right, ``rope(x)[p] = x[p] R_p`` for the block
    diagonal :math:`R_p` of :math:`2\times2` blocks
    :math:`\begin{pmatrix}\cos p\theta_i & \sin p\theta_i\\
    -\sin p\theta_i & \cos p\theta_i\end{pmatrix}`. Rotations are
    orthogonal and :math:`R_p R_r^{\top} = R_{r-p}^{\top}`, so
    :math:`(q R_p)(k R_r)^{\top} = q R_{r-p}^{\top} k^{\top}` depends on the
    positions only through :math:`r - p`.  The two conventions
    are the same map up to a fixed permutation of the features.

    References
    ----------
    :cite:t:`su2024roformer`: RoFormer: rotary position embedding.

    Examples
    --------
    Norms are preserved, and the score depends on the offset only:

    >>> import numpy as np
    >>> from attncore._positional import rope
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(1, 8)), rng.normal(size=(1, 8))
    >>> bool(np.allclose(np.linalg.norm(rope(q, [5.0])), np.linalg.norm(q)))
    True
    >>> s1 = rope(q, [2])[0] @ rope(k, [9])[0]
    >>> s2 = rope(q, [40])[0] @ rope(k, [47])[0]
    >>> bool(np.isclose(s1, s2))
    True
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    check_choice(convention, "convention", ROPE_CONVENTIONS)
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"x must have an even last axis (features are rotated in pairs), got shape {x.shape}")
    if positions is None:
        positions = np.arange(n, dtype=np.float64)
    positions = as_float_array(positions, "positions")
    check_broadcastable(positions, "positions", x.shape[:-1], "x without its last axis")
    check_positive(base, "base")
    theta = rope_frequencies(d, base=base) if d else np.zeros(0)
    angles = positions.astype(np.float64)[..., None] * theta  # (..., n, d/2)
    cos = np.cos(angles).astype(x.dtype)
    sin = np.sin(angles).astype(x.dtype)
    if convention == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]  # (..., n, d/2) each
    else:
        a, b = x[..., : d // 2], x[..., d // 2 :]  # (..., n, d/2) each
    out = np.empty(np.broadcast_shapes(x.shape, angles.shape[:-1] + (d,)), dtype=x.dtype)
    if convention == "interleaved":
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
    else:
        out[..., : d // 2] = a * cos - b * sin
        out[..., d // 2 :] = a * sin + b * cos
    return out  # (..., n, d)


def rope_permutation(d: int) -> np.ndarray:
    """The feature permutation that turns the interleaved layout into the half layout.

    Parameters
    ----------
    d : int
        Even width.

    Returns
    -------
    ndarray of int, shape (d,)
        ``perm`` with ``perm = [0, 2, 4, ..., 1, 3, 5, ...]``: feature ``j`` of
        the half layout is feature ``perm[j]`` of the interleaved one, so
        ``rope(x[..., perm], convention="half") == rope(x)[..., perm]``.

    Raises
    ------
    TypeError
        If ``d`` is not an integer.
    ValueError
        If ``d`` is negative or odd.

    References
    ----------
    :cite:t:`su2024roformer`: RoFormer: rotary position embedding.

    See Also
    --------
    rope

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._positional import rope, rope_permutation
    >>> perm = rope_permutation(6)
    >>> perm
    array([0, 2, 4, 1, 3, 5])
    >>> x = np.random.default_rng(0).normal(size=(4, 6))
    >>> bool(np.allclose(rope(x[:, perm], convention="half"), rope(x)[:, perm]))
    True
    """
    d = check_count(d, "d", minimum=0)
    if d % 2:
        raise ValueError(f"d must be even, got d = {d}")
    return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)]).astype(np.intp)


def t5_relative_bucket(
    relative_position: ArrayLike, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> np.ndarray:
    r"""The bucket of each relative position, as in T5's released implementation.

    Parameters
    ----------
    relative_position : array_like of int, any shape
        ``key position - query position`` (``j - i``).
    bidirectional : bool, optional
        If True (encoder), half of the buckets hold keys after the query; if
        False (causal decoder), keys after the query all share bucket 0.
    num_buckets : int, optional
    max_distance : int, optional
        Distances from ``max_distance`` on are clamped into the last bucket
        of their direction; with the defaults that bucket (15, or 31 for keys
        after the query) begins at distance 91.

    Returns
    -------
    ndarray of int, same shape as ``relative_position``
        Values in ``0, ..., num_buckets - 1``.

    Raises
    ------
    TypeError
        If ``relative_position`` is not an integer array, ``bidirectional``
        not a bool, or ``num_buckets`` / ``max_distance`` not integers.
    ValueError
        If ``num_buckets`` leaves no exact bucket (fewer than 4 bidirectional,
        2 causal) or ``max_distance`` is not larger than the number of exact
        buckets; if ``relative_position`` lies outside the int64 range.

    See Also
    --------
    relative_bias : Turns a bucket table into a bias.

    Notes
    -----
    Let :math:`\nu = -(j - i) = i - j` (how far back the key is).  With
    ``bidirectional``, ``num_buckets`` is halved to :math:`N`, keys after the
    query (:math:`\nu < 0`) are offset by :math:`N` and :math:`\nu` becomes
    :math:`|\nu|`; otherwise :math:`\nu \leftarrow \max(\nu, 0)`.  With
    :math:`E = \lfloor N/2 \rfloor` exact buckets,

    .. math::

        \mathrm{bucket}(\nu) = \begin{cases}
          \nu & \nu < E, \\
          \min\!\Big(N - 1,\; E + \Big\lfloor
          \frac{\log(\nu / E)}{\log(\mathrm{max\_distance}/E)}\,(N - E)
          \Big\rfloor\Big) & \nu \ge E,
        \end{cases}

    the logarithm evaluated in float32 as in the reference code (Raffel et
    al., 2020, ``_relative_position_bucket`` of Mesh TensorFlow).

    References
    ----------
    :cite:t:`raffel2020t5`: T5's relative position buckets.

    Examples
    --------
    Small offsets get a bucket each, far ones share logarithmic buckets:

    >>> import numpy as np
    >>> from attncore._positional import t5_relative_bucket
    >>> t5_relative_bucket(np.array([0, -1, -7, -8, -20, -50, -100, -1000, 1, 1000]))
    array([ 0,  1,  7,  8, 10, 13, 15, 15, 17, 31])
    """
    rel = np.asarray(relative_position)
    if rel.dtype.kind not in "iu":
        raise TypeError(
            f"relative_position must be an integer array, got dtype {rel.dtype} (shape {rel.shape})"
        )
    if rel.dtype.kind == "u" and rel.size and rel.max() > np.iinfo(np.int64).max:
        raise ValueError(
            f"relative_position holds {int(rel.max())}, beyond the int64 range the buckets are computed in"
        )
    if rel.dtype == np.int64 and rel.size and rel.min() == np.iinfo(np.int64).min:
        raise ValueError("relative_position holds the smallest int64, whose negation overflows")
    bidirectional = check_bool(bidirectional, "bidirectional")
    given = check_count(num_buckets, "num_buckets", minimum=1)
    max_distance = check_count(max_distance, "max_distance", minimum=1)
    exact = given // 2 // 2 if bidirectional else given // 2
    if exact == 0 or max_distance <= exact:
        raise ValueError(
            f"num_buckets must be >= {4 if bidirectional else 2} and max_distance > the "
            f"number of exact buckets ({exact}), got num_buckets = {given}, "
            f"max_distance = {max_distance}"
        )
    num_buckets = given
    nu = -rel.astype(np.int64)
    ret = np.zeros(nu.shape, dtype=np.int64)
    if bidirectional:
        num_buckets //= 2
        ret += (nu < 0) * num_buckets
        nu = np.abs(nu)
    else:
        nu = np.maximum(nu, 0)
    max_exact = num_buckets // 2
    is_small = nu < max_exact
    ratio = np.maximum(nu, max_exact).astype(np.float32) / np.float32(max_exact)
    scaled = (
        np.log(ratio)
        / np.float32(math.log(max_distance / max_exact))
        * np.float32(num_buckets - max_exact)
    )
    large = np.minimum(max_exact + scaled.astype(np.int64), num_buckets - 1)
    return ret + np.where(is_small, nu, large)


def alibi_slopes(num_heads: int) -> np.ndarray:
    r"""The per-head slopes of ALiBi, for any number of heads.

    Parameters
    ----------
    num_heads : int

    Returns
    -------
    ndarray, shape (h,)
        Head ``t`` adds ``-slope[t] * |j - i|`` (or ``-slope[t] * (i - j)``
        under a causal mask) to its scores.

    Raises
    ------
    TypeError
        If ``num_heads`` is not an integer.
    ValueError
        If ``num_heads < 1``.

    See Also
    --------
    relative_bias

    Notes
    -----
    For :math:`h = 2^a` heads the slopes are the geometric sequence
    :math:`s_t = 2^{-8(t+1)/h}`, :math:`t = 0, \dots, h-1`.  Otherwise, with
    :math:`c = 2^{\lfloor \log_2 h \rfloor}`, the slopes are those of
    :math:`c` heads followed by the first :math:`h - c` slopes of
    :math:`2c` heads at even indices (``[0::2]``), i.e. the odd powers
    :math:`2^{-8(2t+1)/(2c)}` that fall between the first ones (Press et al.,
    2022, and their released code).

    References
    ----------
    :cite:t:`press2022train`: ALiBi: linear biases and their slopes.

    Examples
    --------
    >>> from attncore._positional import alibi_slopes
    >>> alibi_slopes(8) * 256
    array([128.,  64.,  32.,  16.,   8.,   4.,   2.,   1.])
    >>> bool(len(set(alibi_slopes(12))) == 12)
    True
    """
    h = check_count(num_heads, "num_heads", minimum=1)

    def power_of_two(count):
        return 2.0 ** (-8.0 * np.arange(1, count + 1) / count)

    c = 1 << (h.bit_length() - 1)  # largest power of two <= h
    if c == h:
        return power_of_two(h)
    return np.concatenate([power_of_two(c), power_of_two(2 * c)[0::2][: h - c]])


def relative_bias(n: int, m: int, table_or_fn: ArrayLike | Callable[[np.ndarray], ArrayLike]) -> np.ndarray:
    """The bias matrix ``B[..., i, j] = f(j - i)`` of a relative position scheme.

    Parameters
    ----------
    n, m : int
        Query and key lengths (positions ``0..n-1`` and ``0..m-1``).
    table_or_fn : array_like or callable
        Either a table of shape ``(..., n + m - 1)`` whose entry
        ``[..., r + n - 1]`` is the bias of offset ``r = j - i`` (from
        ``-(n - 1)`` to ``m - 1``), or a function called once with the integer
        offsets ``j - i`` of shape ``(n, m)`` that returns the biases, shape
        ``(..., n, m)`` (leading axes such as heads are kept).

    Returns
    -------
    ndarray, shape (..., n, m)
        Add it to the scores (``bias=`` of :func:`attncore.attention`).
        Entries ``-inf`` of the table (or of the function's result) are
        kept: as a bias they mean "masked".

    Raises
    ------
    TypeError
        If ``n`` or ``m`` is not an integer, or the table (or the function's
        result) is not an array of real numbers.
    ValueError
        If ``n`` or ``m`` is below 1; if the table is not ``(..., n + m - 1)``
        or the function's result not ``(..., n, m)``; if either holds NaN or
        ``+inf``.

    See Also
    --------
    t5_relative_bucket
    alibi_slopes
    toeplitz
    attention : Takes the bias as ``bias=``.

    Notes
    -----
    :math:`B_{ij} = f(j - i)`: ``B`` is constant along each diagonal (a
    Toeplitz matrix), which is what makes the scheme relative.

    References
    ----------
    :cite:t:`shaw2018self`: relative position representations.

    :cite:t:`raffel2020t5`: T5's relative position buckets.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._positional import relative_bias, t5_relative_bucket
    >>> relative_bias(3, 3, lambda r: -np.abs(r).astype(float))
    array([[-0., -1., -2.],
           [-1., -0., -1.],
           [-2., -1., -0.]])
    >>> table = np.random.default_rng(0).normal(size=32)  # one bias per T5 bucket
    >>> b = relative_bias(5, 5, lambda r: table[t5_relative_bucket(r)])
    >>> bool(np.allclose(b[1:, 1:], b[:-1, :-1]))
    True
    """
    n = check_count(n, "n", minimum=1)
    m = check_count(m, "m", minimum=1)
    offsets = np.arange(m)[None, :] - np.arange(n)[:, None]  # (n, m)
    # -inf is a documented "masked" in a bias, so it may come out of the table or the function.
    if callable(table_or_fn):
        return as_float_array(table_or_fn(offsets), "table_or_fn(offsets)", ("...", n, m), finite="-inf")
    table = as_float_array(table_or_fn, "table_or_fn", ("...", n + m - 1), finite="-inf")
    return table[..., offsets + (n - 1)]  # (..., n, m)
