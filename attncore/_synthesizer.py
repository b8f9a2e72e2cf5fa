"""Synthesizer attention: score matrices that are not token-to-token dot products.

Self-attention computes ``softmax(B) x w_v`` with ``B = q k^T / sqrt(d_k)``, so
every score comes from a pair of tokens.  The Synthesizer of Tay et al. keeps
``softmax(B) x w_v`` and replaces ``B``:

* Dense: ``B = relu(x w1 + b1) w2 + b2``, row ``i`` computed from token ``i`` alone;
* Random: ``B = R``, a parameter that ignores the input;
* Factorized Dense: two narrow Dense outputs, tiled to ``(n, n)`` and multiplied;
* Factorized Random: ``B = R1 R2^T`` with ``R1, R2`` of shape ``(n, r)``;
* Mixture: ``B = sum_i alpha_i B_i`` with ``alpha = softmax(logits)``.

Dense and Random have a parameter per key *position*, so the length ``n`` is a
property of the parameters: a sequence of another length raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import (
    as_float_array,
    batch_shape,
    check_choice,
    check_count,
    check_mask,
    check_shape,
)
from attncore._linear import linear
from attncore._softmax import softmax

#: The tiling conventions of ``factorized_dense_scores``.
TILINGS = ("tile", "repeat")
#: The two forms of ``factorized_dense_scores``: the paper's, and the document's transpose.
FORMS = ("as_written", "transposed")


def _check_length(n: int, length: int, variant: str, what: str) -> None:
    if n != length:
        raise ValueError(
            f"{variant} synthesizer: {what} has one entry per key position for "
            f"sequences of length {length}, so it cannot score a sequence of length "
            f"{n}; its parameters fix the length (pad or truncate to {length})"
        )


def dense_features(
    x: ArrayLike, w1: ArrayLike, w2: ArrayLike, *, b1: ArrayLike | None = None, b2: ArrayLike | None = None
) -> np.ndarray:
    r"""The token-wise two-layer map ``relu(x w1 + b1) w2 + b2``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    w1 : array_like, shape (d, f)
    w2 : array_like, shape (f, e)
    b1 : array_like, shape (f,), optional
    b2 : array_like, shape (e,), optional

    Returns
    -------
    ndarray, shape (..., n, e)
        Row ``i`` depends on token ``i`` alone.

    Raises
    ------
    TypeError
        If an argument is not an array of real numbers.
    ValueError
        If the shapes do not chain (``x`` ``(..., n, d)``, ``w1`` ``(d, f)``,
        ``b1`` ``(f,)``, ``w2`` ``(f, e)``, ``b2`` ``(e,)``) or an argument
        holds NaN or ``+-inf``.

    See Also
    --------
    dense_scores : this map with one output column per key position.
    factorized_dense_scores : two narrow outputs of this map, tiled and multiplied.

    Notes
    -----
    .. math:: F(X) = \mathrm{relu}(X W_1 + \mathbf{1} b_1^{\top}) W_2 + \mathbf{1} b_2^{\top}.

    This is the body of :func:`attncore.dense_scores` (with ``e = n``) and the map that
    makes the two factors of :func:`attncore.factorized_dense_scores` (with ``e = a`` and
    ``e = b``).

    References
    ----------
    :cite:t:`tay2021synthesizer`: the two-layer map of the Dense Synthesizer.

    Examples
    --------
    Token-wise: permuting the tokens permutes the rows.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(5, 3))
    >>> w1, w2 = rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    >>> perm = [4, 0, 3, 1, 2]
    >>> bool(np.allclose(dense_features(x[perm], w1, w2), dense_features(x, w1, w2)[perm]))
    True
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    w1 = as_float_array(w1, "w1", (x.shape[-1], "f"), match=("x", x))
    # Checked here, not inside the second linear(), whose "x" is the hidden layer the caller never saw.
    as_float_array(w2, "w2", (w1.shape[-1], "e"), match=("w1", w1))
    hidden = np.maximum(linear(x, w1, b1, name="w1"), 0.0)  # (..., n, f)
    return linear(hidden, w2, b2, name="w2")  # (..., n, e)


def dense_scores(
    x: ArrayLike, w1: ArrayLike, w2: ArrayLike, *, b1: ArrayLike | None = None, b2: ArrayLike | None = None
) -> np.ndarray:
    r"""Dense Synthesizer scores ``B = relu(x w1 + b1) w2 + b2``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
        Tokens as rows.
    w1 : array_like, shape (d, f)
    w2 : array_like, shape (f, n)
        One output column per key position: the length ``n`` is fixed here.
    b1 : array_like, shape (f,), optional
    b2 : array_like, shape (n,), optional

    Returns
    -------
    ndarray, shape (..., n, n)
        Row ``i`` (the scores query ``i`` gives every position) depends on
        token ``i`` alone; column ``j`` is tied to position ``j``, not to token ``j``.

    Raises
    ------
    TypeError
        If an argument is not an array of real numbers.
    ValueError
        If the sequence length differs from the number of columns of ``w2``,
        the shapes do not chain as in :func:`dense_features`, or an argument
        holds NaN or ``+-inf``.

    See Also
    --------
    dense_features : the map itself, for any output width.
    random_scores : scores that ignore the input altogether.
    synthesizer_attention : attention with these scores.

    Notes
    -----
    .. math::

        B = \mathrm{relu}(X W_1 + \mathbf{1} b_1^{\top}) W_2 + \mathbf{1} b_2^{\top}
          = Q K^{\top} \quad\text{with}\quad
          Q = [\,\mathrm{relu}(X W_1 + \mathbf{1} b_1^{\top}),\ \mathbf{1}\,],\
          K = [\,W_2^{\top},\ b_2\,],

    so ``K`` is a constant matrix that does not depend on the input.

    References
    ----------
    :cite:t:`tay2021synthesizer`: Dense Synthesizer.

    Examples
    --------
    Changing token 2 changes row 2 of the scores and no other row:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(4, 3))
    >>> w1, w2 = rng.normal(size=(3, 5)), rng.normal(size=(5, 4))
    >>> y = x.copy(); y[2] += 1.0
    >>> changed = np.any(dense_scores(y, w1, w2) != dense_scores(x, w1, w2), axis=-1)
    >>> changed.tolist()
    [False, False, True, False]
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    w2 = as_float_array(w2, "w2", ("f", "n"))
    _check_length(x.shape[-2], w2.shape[-1], "Dense", f"w2 {w2.shape}")
    return dense_features(x, w1, w2, b1=b1, b2=b2)  # (..., n, n)


def random_scores(r: ArrayLike, n: int) -> np.ndarray:
    r"""Random Synthesizer scores ``B = R``, checked against the sequence length.

    Parameters
    ----------
    r : array_like, shape (L, L)
        The score matrix itself (fixed or trained); it ignores the input.
    n : int
        The length of the sequence to be scored.

    Returns
    -------
    ndarray, shape (n, n)
        ``r`` as a float array.

    Raises
    ------
    TypeError
        If ``r`` is not an array of real numbers or ``n`` is not an integer.
    ValueError
        If ``n != L``: the parameter holds one score per pair of *positions*;
        if ``r`` is not square or holds NaN or ``+inf`` (``-inf`` is allowed:
        a masked score).

    See Also
    --------
    factorized_random_scores : a low-rank ``R``.
    synthesizer_attention : attention with these scores.

    Notes
    -----
    .. math:: B = R \in \mathbb{R}^{n \times n},

    the same for every input; no product ``Q K^T`` is computed.

    References
    ----------
    :cite:t:`tay2021synthesizer`: Random Synthesizer, with ``R`` trained or fixed.

    Examples
    --------
    >>> import numpy as np
    >>> r = np.arange(9.0).reshape(3, 3)
    >>> bool(np.array_equal(random_scores(r, 3), r))
    True
    """
    r = as_float_array(r, "r", ("L", "L"), finite="-inf")
    if r.shape[0] != r.shape[1]:
        raise ValueError(f"r must be square (one score per pair of positions), got shape {r.shape}")
    _check_length(check_count(n, "n"), r.shape[0], "Random", f"r {r.shape}")
    return r


def factorized_random_scores(r1: ArrayLike, r2: ArrayLike, n: int) -> np.ndarray:
    r"""Factorized Random scores ``B = R1 R2^T`` of rank at most ``r``.

    Parameters
    ----------
    r1, r2 : array_like, shape (L, r)
        ``r`` is the rank bound (the paper's ``k``).
    n : int
        The length of the sequence to be scored; must equal ``L``.

    Returns
    -------
    ndarray, shape (n, n)

    Raises
    ------
    TypeError
        If ``r1`` or ``r2`` is not an array of real numbers or ``n`` is not an integer.
    ValueError
        If ``r1`` and ``r2`` are not both ``(L, r)``, ``n != L``, or either
        holds NaN or ``+-inf``.

    See Also
    --------
    random_scores : the full-rank ``(n, n)`` parameter.

    Notes
    -----
    .. math:: B = R_1 R_2^{\top}, \qquad \operatorname{rank} B \le r,

    with ``2 n r`` parameters instead of ``n^2``.

    References
    ----------
    :cite:t:`tay2021synthesizer`: Factorized Random Synthesizer.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> r1, r2 = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    >>> int(np.linalg.matrix_rank(factorized_random_scores(r1, r2, 6)))
    2
    """
    r1 = as_float_array(r1, "r1", ("L", "r"))
    r2 = as_float_array(r2, "r2", (r1.shape[0], r1.shape[1]), match=("r1", r1))
    _check_length(check_count(n, "n"), r1.shape[0], "Factorized Random", f"r1 {r1.shape}")
    return r1 @ r2.T  # (n, n)


def _expand(f, times, tiling):
    if tiling == "tile":
        return np.tile(f, (1,) * (f.ndim - 1) + (times,))  # (..., n, c * times), column j -> j % c
    return np.repeat(f, times, axis=-1)  # (..., n, c * times), column j -> j // times


def factorized_dense_scores(
    f_a: ArrayLike, f_b: ArrayLike, *, tiling: str = "tile", form: str = "as_written"
) -> np.ndarray:
    r"""Factorized Dense scores: two narrow factors expanded to ``(n, n)`` and multiplied.

    Parameters
    ----------
    f_a : array_like, shape (..., n, a)
        First factor, a token-wise map of the input (e.g. :func:`attncore.dense_features`).
    f_b : array_like, shape (..., n, b)
        Second factor; ``a * b`` must equal ``n``.
    tiling : {"tile", "repeat"}
        How a factor of width ``c`` becomes ``n`` columns. ``"tile"`` repeats the
        whole block (:func:`numpy.tile`: column ``j`` is column ``j % c``);
        ``"repeat"`` repeats each column in place (:func:`numpy.repeat`,
        repeat-interleave: column ``j`` is column ``j // (n / c)``).
    form : {"as_written", "transposed"}
        ``"as_written"`` (the paper): ``B = T(f_a) * T(f_b)``, so row ``i``
        depends on token ``i`` alone. ``"transposed"`` (suggested by
        :cite:t:`su2020synthesizer`): ``B = T(f_a) * T(f_b)^T``, so entry ``(i, j)`` depends on
        tokens ``i`` and ``j``.

    Returns
    -------
    ndarray, shape (..., n, n)

    Raises
    ------
    TypeError
        If ``f_a`` or ``f_b`` is not an array of real numbers.
    ValueError
        If ``tiling`` or ``form`` is not one of its choices; if the factors
        are not ``(..., n, a)`` and ``(..., n, b)`` with ``a * b = n`` and
        broadcastable batch axes; if either holds NaN or ``+-inf``.

    See Also
    --------
    dense_features : the token-wise map that makes each factor.
    numpy.tile : the ``"tile"`` expansion.
    numpy.repeat : the ``"repeat"`` expansion.

    Notes
    -----
    With :math:`\tilde F_a = T(F_a)` and :math:`\tilde F_b = T(F_b)` the expanded
    ``(n, n)`` factors and :math:`\odot` the elementwise product,

    .. math::

        B_{\text{as written}} = \tilde F_a \odot \tilde F_b, \qquad
        B_{\text{transposed}} = \tilde F_a \odot \tilde F_b^{\top}.

    With ``tiling="tile"`` the as-written entry is
    :math:`B_{ij} = (F_a)_{i, j \bmod a} (F_b)_{i, j \bmod b}`.

    References
    ----------
    :cite:t:`tay2021synthesizer`: Factorized Dense Synthesizer (``form="as_written"``).

    :cite:t:`su2020synthesizer`: the suggestion to transpose the second factor
    (``form="transposed"``).

    Examples
    --------
    Changing token 0 (both of its factor rows) changes row 0 as written, and
    row 0 and column 0 transposed:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> fa, fb = rng.normal(size=(6, 2)), rng.normal(size=(6, 3))
    >>> ga, gb = fa.copy(), fb.copy(); ga[0] += 1.0; gb[0] += 1.0
    >>> for form in FORMS:
    ...     d = factorized_dense_scores(ga, gb, form=form) != factorized_dense_scores(fa, fb, form=form)
    ...     print(form, bool(d[0].all()), bool(d[1:, 0].any()), bool(d[1:, 1:].any()))
    as_written True False False
    transposed True True False
    """
    check_choice(tiling, "tiling", TILINGS)
    check_choice(form, "form", FORMS)
    f_a = as_float_array(f_a, "f_a", ("...", "n", "a"))
    f_b = as_float_array(f_b, "f_b", ("...", f_a.shape[-2], "b"), match=("f_a", f_a))
    batch_shape(("f_a", f_a, 2), ("f_b", f_b, 2))
    n, a, b = f_a.shape[-2], f_a.shape[-1], f_b.shape[-1]
    if a * b != n:
        raise ValueError(
            f"Factorized Dense needs a * b = n: f_a has a = {a} and f_b has b = {b} "
            f"columns, a * b = {a * b}, but the sequence length is n = {n}"
        )
    ta = _expand(f_a, b, tiling)  # (..., n, n)
    tb = _expand(f_b, a, tiling)  # (..., n, n)
    if form == "transposed":
        tb = np.swapaxes(tb, -1, -2)  # (..., n, n)
    return ta * tb  # (..., n, n)


def mixture_weights(logits: ArrayLike) -> np.ndarray:
    """Mixture weights ``alpha = softmax(logits)``: positive and summing to 1.

    Parameters
    ----------
    logits : array_like, shape (N,)

    Returns
    -------
    ndarray, shape (N,)

    Raises
    ------
    TypeError
        If ``logits`` is not an array of real numbers.
    ValueError
        If ``logits`` is not 1-d with at least one entry, or holds NaN or ``+-inf``.

    See Also
    --------
    mixture_scores : the scores these weights mix.
    softmax : the map from logits to weights.

    References
    ----------
    :cite:t:`tay2021synthesizer`: Mixture of Synthesizers.

    Examples
    --------
    >>> import numpy as np
    >>> float(mixture_weights(np.array([0.3, -1.0, 2.0])).sum().round(12))
    1.0
    """
    logits = as_float_array(logits, "logits", ("N",))
    if logits.size == 0:
        raise ValueError("logits must hold at least one mixture logit, got shape (0,)")
    return softmax(logits)


def mixture_scores(scores: Sequence[ArrayLike], logits: ArrayLike) -> np.ndarray:
    r"""Mixture of score matrices ``B = sum_i alpha_i B_i`` with ``alpha = softmax(logits)``.

    Parameters
    ----------
    scores : sequence of N array_like, each broadcastable to shape (..., n, n)
        The component scores (vanilla, Dense, Random, ...).
    logits : array_like, shape (N,)
        Trainable mixture logits; the weights are :func:`attncore.mixture_weights`.

    Returns
    -------
    ndarray, shape (..., n, n)

    Raises
    ------
    TypeError
        If ``scores`` is not a sequence (a list, a tuple, or an array whose
        first axis indexes the components) or a component or ``logits`` is
        not an array of real numbers.
    ValueError
        If the number of components differs from the number of logits; if a
        component is not square ``(..., n, n)``, the lengths differ or the
        batch axes do not broadcast; if a component holds NaN or ``+inf``
        (``-inf`` is allowed: a masked score); if ``logits`` holds NaN or ``+-inf``.

    See Also
    --------
    mixture_weights : the weights ``alpha``.
    synthesizer_attention : attention with the mixed scores.

    Notes
    -----
    .. math::

        B = \sum_{i=1}^{N} \alpha_i B_i, \qquad
        \alpha = \mathrm{softmax}(\ell), \quad \alpha_i > 0,\ \sum_i \alpha_i = 1 .

    The scores are mixed before the softmax, as in the paper; this is not a
    mixture of attention maps.

    References
    ----------
    :cite:t:`tay2021synthesizer`: Mixture of Synthesizers, mixed before the softmax.

    Examples
    --------
    Because the weights sum to 1, mixing a matrix with itself returns it:

    >>> import numpy as np
    >>> b = np.arange(4.0).reshape(2, 2)
    >>> bool(np.allclose(mixture_scores([b, b, b], np.array([0.1, 2.0, -1.0])), b))
    True
    """
    if isinstance(scores, (str, bytes)) or not hasattr(scores, "__len__"):
        raise TypeError(f"scores must be a sequence of score matrices, got {type(scores).__name__}")
    scores = [as_float_array(s, f"scores[{i}]", finite="-inf") for i, s in enumerate(scores)]
    alpha = mixture_weights(logits)
    if len(scores) != alpha.shape[0]:
        raise ValueError(f"got {len(scores)} score matrices but {alpha.shape[0]} mixture logits")
    for i, s in enumerate(scores):
        check_shape(s, f"scores[{i}]", ("...", "n", "n"))
        if s.shape[-1] != s.shape[-2]:
            raise ValueError(f"scores[{i}] must be square in its last two axes, got shape {s.shape}")
    shape = batch_shape(*((f"scores[{i}]", s, 2) for i, s in enumerate(scores)))
    sizes = {s.shape[-1] for s in scores}
    if len(sizes) != 1:
        raise ValueError(f"score matrices of different lengths: {[s.shape for s in scores]}")
    n = sizes.pop()
    out = np.zeros(shape + (n, n), dtype=np.result_type(alpha, *scores))  # (..., n, n)
    for weight, s in zip(alpha, scores):
        out += weight * s
    return out


def synthesizer_attention(
    x: ArrayLike, scores: ArrayLike, w_v: ArrayLike, *, mask: ArrayLike | None = None
) -> np.ndarray:
    r"""Attention with given scores: ``softmax(scores) x w_v``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
        Tokens as rows (they provide the values).
    scores : array_like, shape (..., n, n)
        Any score matrix: vanilla, Dense, Random, factorized or mixed.
    w_v : array_like, shape (d, v)
    mask : array_like of bool, optional
        Broadcastable to ``(..., n, n)``; ``True`` = may attend.

    Returns
    -------
    ndarray, shape (..., n, v)

    Raises
    ------
    TypeError
        If ``x``, ``scores`` or ``w_v`` is not an array of real numbers, or
        ``mask`` is not boolean.
    ValueError
        If ``scores`` is not ``(..., n, n)`` for the length ``n`` of ``x``;
        if ``w_v`` is not ``(d, v)``; if ``x`` or ``w_v`` holds NaN or
        ``+-inf`` or ``scores`` holds NaN or ``+inf`` (``-inf`` is allowed:
        a masked score); if ``mask`` does not broadcast to the scores.

    See Also
    --------
    attention : the same with ``B = q k^T / sqrt(d_k)`` computed from the tokens.
    dense_scores : scores computed from each token alone.
    random_scores : scores that ignore the input.
    mixture_scores : a mixture of score matrices.

    Notes
    -----
    .. math:: Y = \mathrm{softmax}(B)\, X W_V,

    the softmax over the last axis. With ``B = X W_Q W_K^T X^T / \sqrt{d_k}``
    this is single-head self-attention.

    References
    ----------
    :cite:t:`tay2021synthesizer`: the Synthesizer: self-attention with synthesized scores.

    Examples
    --------
    Identical tokens give identical outputs, whatever the scores:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.tile(rng.normal(size=3), (5, 1))
    >>> y = synthesizer_attention(x, rng.normal(size=(5, 5)), rng.normal(size=(3, 2)))
    >>> bool(np.allclose(y, y[0]))
    True
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    scores = as_float_array(scores, "scores", ("...", "n", "m"), finite="-inf")
    n = x.shape[-2]
    if scores.shape[-2:] != (n, n):
        raise ValueError(
            f"scores must have shape (..., {n}, {n}) for a sequence of length {n} "
            f"(x has shape {x.shape}), got shape {scores.shape}"
        )
    batch_shape(("x", x, 2), ("scores", scores, 2))
    if mask is not None:
        mask = check_mask(mask, scores.shape, "scores")
    weights = softmax(scores, mask=mask)  # (..., n, n)
    return weights @ linear(x, w_v, name="w_v")  # (..., n, v)


def synthesizer_costs(
    n: int,
    d: int,
    *,
    k: int | None = None,
    v: int | None = None,
    f: int | None = None,
    a: int | None = None,
    rank: int | None = None,
) -> dict[str, dict[str, int]]:
    """Parameters and FLOPs of each way of making the scores, next to vanilla attention.

    Parameters
    ----------
    n : int
        Sequence length.
    d : int
        Model width.
    k : int, optional
        Query/key width of vanilla attention; ``d`` by default.
    v : int, optional
        Value width; ``d`` by default.
    f : int, optional
        Hidden width of the Dense maps; ``d`` by default.
    a : int, optional
        Width of the first Factorized Dense factor (must divide ``n``); the
        second has width ``b = n / a``.  The smallest divisor ``>= sqrt(n)`` by default.
    rank : int, optional
        The rank bound ``r`` of Factorized Random; ``8`` capped at ``n`` by default.

    Returns
    -------
    dict
        ``{variant: {"score_params", "score_flops", "params", "flops"}}`` for the
        variants ``"vanilla"``, ``"dense"``, ``"random"``, ``"fixed random"``,
        ``"factorized dense"``, ``"factorized random"``, ``"dense + vanilla"``
        and ``"random + vanilla"``.  ``params`` and ``flops`` add the part every
        variant shares: the value projection ``d v`` and the products
        ``X W_V`` (``2 n d v``) and ``A V`` (``2 n^2 v``).

    Raises
    ------
    TypeError
        If a size is not an integer (floats such as ``2.7`` or ``2.0``,
        bools and strings are not sizes).
    ValueError
        If a size is below 1 or ``a`` does not divide ``n``.

    See Also
    --------
    matmul_flops : the FLOP count of one matrix product.
    block_flops : the FLOPs of a whole transformer block.

    Notes
    -----
    Only trainable weights are counted (a fixed Random matrix has 0), and a
    FLOP is one multiplication or one addition: a product of an ``(n, p)`` and a
    ``(p, q)`` matrix costs ``2 n p q``.  Biases are left out for every variant
    alike, as in the paper's overview of the variants (its Table 1): they would
    add ``f + n`` to Dense, ``f + a + b`` to Factorized Dense, ``2 k`` to vanilla
    attention with biased query and key maps and ``v`` to the value map.  Relu and
    the softmax (``O(n^2)`` for every variant) are left out of the FLOPs.  With
    ``f = d`` the score parameters of the Synthesizers are the paper's:
    ``d^2 + d n``, ``n^2``, ``d^2 + d (a + b)`` and ``2 n rank`` (and vanilla
    attention's ``2 d^2`` when ``k = d``).

    Modelling choice for Factorized Dense: the paper says that two maps
    ``F_A`` and ``F_B`` project each token to widths ``a`` and ``b``, and that the
    point is to factorise the *output* of the Dense map.  Here the two maps share
    the hidden layer ``relu(x w1 + b1)`` of width ``f`` and differ only in their
    output layers, ``(f, a)`` and ``(f, b)``: one :func:`attncore.dense_features`
    call with ``e = a + b`` whose columns are split.  Factorized Dense then saves
    ``f (n - a - b)`` parameters over Dense.  Two separate hidden layers would add
    another ``d f``, which is more than the factorisation saves whenever ``d`` is
    not small against ``n`` (at ``n = 64``, ``d = 512``, ``f = 64``: 66,560
    against Dense's 36,864).

    ==================  ==================================  ==================================
    variant             score parameters                    score FLOPs
    ==================  ==================================  ==================================
    vanilla             ``2 d k``                           ``4 n d k + 2 n^2 k``
    dense               ``d f + f n``                       ``2 n d f + 2 n f n``
    random              ``n^2``                             ``0``
    fixed random        ``0``                               ``0``
    factorized dense    ``d f + f (a+b)``                   ``2 n d f + 2 n f (a+b) + n^2``
    factorized random   ``2 n rank``                        ``2 n^2 rank``
    X + vanilla         sum of the two + 2 logits           sum of the two + ``3 n^2``
    ==================  ==================================  ==================================

    References
    ----------
    :cite:t:`tay2021synthesizer`: the variants counted here.

    Examples
    --------
    Random scores cost nothing to compute, but the ``n x n`` mixing remains:

    >>> c = synthesizer_costs(64, 32)
    >>> c["random"]["score_flops"], c["random"]["flops"] == 2 * 64 * 32 * 32 + 2 * 64**2 * 32
    (0, True)
    """
    n, d = check_count(n, "n"), check_count(d, "d")
    k = d if k is None else check_count(k, "k")
    v = d if v is None else check_count(v, "v")
    f = d if f is None else check_count(f, "f")
    rank = min(8, n) if rank is None else check_count(rank, "rank")
    if a is None:
        a = next(c for c in range(1, n + 1) if n % c == 0 and c * c >= n)
    a = check_count(a, "a")
    if n % a:
        raise ValueError(f"a must divide n = {n} (the factors have widths a and n / a), got a = {a}")
    b = n // a
    score = {
        "vanilla": (2 * d * k, 4 * n * d * k + 2 * n * n * k),
        "dense": (d * f + f * n, 2 * n * d * f + 2 * n * f * n),  # weights only, no biases
        "random": (n * n, 0),
        "fixed random": (0, 0),
        "factorized dense": (
            d * f + f * (a + b),  # one shared hidden layer, two output layers
            2 * n * d * f + 2 * n * f * (a + b) + n * n,
        ),
        "factorized random": (2 * n * rank, 2 * n * n * rank),
    }
    for other in ("dense", "random"):
        p1, c1 = score[other]
        p2, c2 = score["vanilla"]
        # two scalings and one addition per score entry, two mixture logits
        score[f"{other} + vanilla"] = (p1 + p2 + 2, c1 + c2 + 3 * n * n)
    shared_params, shared_flops = d * v, 2 * n * d * v + 2 * n * n * v
    return {
        name: {
            "score_params": p,
            "score_flops": c,
            "params": p + shared_params,
            "flops": c + shared_flops,
        }
        for name, (p, c) in score.items()
    }
