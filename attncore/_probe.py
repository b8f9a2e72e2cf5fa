"""The position probe: can a model turn ``n`` identical tokens into the positions ``1..n``?

:func:`probe_hidden_states` builds a small random-weight transformer over ``n``
copies of one token, with a chosen position scheme, normaliser and mask, and
returns its final hidden states.  Three scores read them:
:func:`position_signal` (how far apart the closest two states are) against
:func:`rounding_floor` (what rounding alone can produce);
:func:`heldout_readout` (an affine readout fitted on some positions and scored
on the others, beside the trivial baseline); and :func:`linear_readout`, the
in-sample least-squares fit, whose error :func:`probe_floor` bounds for
position-blind states.  With more parameters than positions the in-sample fit
reads *any* distinct states exactly, noise included, so only the first two are
evidence of position information.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from attncore._checks import (
    as_float_array,
    check_bool,
    check_choice,
    check_count,
    check_float_dtype,
    check_generator,
    describe,
)
from attncore._attention import attention, merge_heads, split_heads
from attncore._block import ffn
from attncore._linear import linear
from attncore._masks import causal_mask
from attncore._norms import layer_norm
from attncore._positional import alibi_slopes, rope, sinusoidal_encoding, t5_relative_bucket
from attncore._shaw import shaw_attention, shaw_relative_embeddings
from attncore._softmax import NORMALIZERS
from attncore._toeplitz import toeplitz

#: The position schemes of the probe, "none" plus two absolute ones (added to
#: the input) and four relative ones (inside attention).
PROBE_SCHEMES = ("none", "sinusoidal", "learned", "t5", "alibi", "rope", "shaw")
#: The schemes that add a code to each token before the first layer.
ABSOLUTE_SCHEMES = ("sinusoidal", "learned")
#: The schemes whose only effect is on the scores before the normaliser.
SCORE_ONLY_SCHEMES = ("none", "t5", "alibi", "rope")


def probe_hidden_states(
    n: int,
    rng: np.random.Generator,
    *,
    scheme: str = "none",
    normalize: str = "softmax",
    layers: int = 2,
    d: int = 32,
    num_heads: int = 4,
    d_ff: int = 64,
    causal: bool = False,
    special_tokens: bool = False,
    urpe: bool | str = False,
    shaw_clip: int = 8,
) -> np.ndarray:
    r"""Final hidden states of a random post-LN transformer fed ``n`` identical tokens.

    Parameters
    ----------
    n : int
        Number of probe tokens (all the same token).
    rng : numpy.random.Generator
        Every weight, embedding and table is drawn from it, in a fixed order.
    scheme : {"none", "sinusoidal", "learned", "t5", "alibi", "rope", "shaw"}
        The position scheme (see Notes).
    normalize : {"softmax", "l2", "relu2", "none"}
        How scores become weights (:func:`attncore.attention_weights`).
    layers : int
        Number of blocks ``L >= 0``.
    d, num_heads, d_ff : int
        Width, heads (dividing ``d``; the head width ``d / h`` must be even for
        RoPE) and FFN width.
    causal : bool
        Causal mask (query ``i`` sees keys ``j <= i``) or bidirectional.
    special_tokens : bool
        Put a ``[CLS]`` token before and a ``[SEP]`` token after the probe
        tokens (two more embeddings drawn from ``rng``); their states are
        dropped from the output.
    urpe : bool or "symmetric"
        Multiply the weights of every head elementwise by a random Toeplitz
        matrix ``C`` (URPE, Luo et al. 2022) before they average the values;
        ``"symmetric"`` draws ``C`` with ``c_r = c_{-r}``.
    shaw_clip : int
        Clipping distance ``K`` of the Shaw relative embeddings.

    Returns
    -------
    ndarray, shape (n, d)
        Row ``i`` is the final state of probe token ``i`` (position ``i + 1``).

    Raises
    ------
    TypeError
        If a count (``n``, ``layers``, ``d``, ``num_heads``, ``d_ff``,
        ``shaw_clip``) is not an integer, ``rng`` not a
        ``numpy.random.Generator``, or ``causal`` / ``special_tokens`` not a
        bool.
    ValueError
        If a count is below its minimum (``layers`` and ``shaw_clip`` may be
        0, the others must be >= 1); if ``scheme``, ``normalize`` or ``urpe``
        is not one of its choices; if ``num_heads`` does not divide ``d``; if
        ``scheme="rope"`` with an odd head width; if ``urpe`` is combined with
        ``scheme="shaw"``.

    See Also
    --------
    linear_readout : the in-sample readout of the states.
    probe_floor : the error of the best readout of position-blind states.
    transformer_block : the post-LN block, with learned parameters.

    Notes
    -----
    The input is ``n`` copies of one embedding ``e`` (the token "0"), with
    ``[CLS]`` / ``[SEP]`` around them if asked.  Each block is post-LN,
    :math:`H = \mathrm{LN}(X + \mathrm{MHA}(X))`,
    :math:`Y = \mathrm{LN}(H + \mathrm{FFN}(H))`, and the schemes act as
    follows (offsets :math:`r = j - i`):

    * ``"sinusoidal"``, ``"learned"``: add the sinusoidal code or a random
      table row of the position to the input;
    * ``"t5"``: add a random table entry of
      :func:`attncore._positional.t5_relative_bucket` (``r``) to the scores,
      one table per head *and per layer* (T5 itself shares one table across
      layers);
    * ``"alibi"``: add :math:`-m_h |r|` to the scores of head :math:`h`, a
      bidirectional variant (Press et al. define ALiBi for a causal mask,
      where :math:`-m_h |r| = m_h r`);
    * ``"rope"``: rotate the queries and keys of every head;
    * ``"shaw"``: :func:`attncore.shaw_attention` with random key and
      value tables drawn per head and per layer (Shaw et al. share the
      tables across heads).

    With ``normalize="relu2"`` the weights are ``relu(s)^2 / m`` with ``m``
    the number of key positions, also under a causal mask (the package's
    convention, see :func:`attncore.attention_weights`).

    References
    ----------
    :cite:t:`su2022relative`: the probe (identical tokens, positions as
    targets), the argument that score-only relative schemes fail it, and remedies.

    :cite:t:`vaswani2017attention`: post-LN blocks and the sinusoidal code.

    :cite:t:`raffel2020t5`, :cite:t:`press2022train`, :cite:t:`su2024roformer`,
    :cite:t:`shaw2018self`: the T5 bias, ALiBi, RoPE and Shaw's relative embeddings.

    :cite:t:`luo2022your`: URPE (``urpe``).

    :cite:t:`devlin2019bert`: the ``[CLS]`` and ``[SEP]`` tokens.

    Examples
    --------
    With a relative bias and the softmax, every probe token ends in the same
    state; with an absolute code they differ:

    >>> import numpy as np
    >>> from attncore._probe import probe_hidden_states
    >>> h = probe_hidden_states(6, np.random.default_rng(0), scheme="alibi")
    >>> bool(np.allclose(h, h[0]))
    True
    >>> h = probe_hidden_states(6, np.random.default_rng(0), scheme="sinusoidal")
    >>> bool(np.allclose(h, h[0]))
    False
    """
    n = check_count(n, "n", minimum=1)
    layers = check_count(layers, "layers", minimum=0)
    d = check_count(d, "d", minimum=1)
    d_ff = check_count(d_ff, "d_ff", minimum=1)
    h = check_count(num_heads, "num_heads", minimum=1)
    check_generator(rng)
    check_choice(scheme, "scheme", PROBE_SCHEMES)
    check_choice(normalize, "normalize", NORMALIZERS)
    causal = check_bool(causal, "causal")
    special_tokens = check_bool(special_tokens, "special_tokens")
    if d % h:
        raise ValueError(f"num_heads must divide the width d = {d}, got {h}")
    dk = d // h
    if scheme == "rope" and dk % 2:
        raise ValueError(f"rope needs an even head width d / num_heads, got {d} / {h} = {dk}")
    shaw_clip = check_count(shaw_clip, "shaw_clip", minimum=0)
    if not (isinstance(urpe, (bool, np.bool_)) or urpe == "symmetric" and isinstance(urpe, str)):
        raise ValueError(f'urpe must be False, True or "symmetric", got {describe(urpe)}')
    urpe = urpe if isinstance(urpe, str) else bool(urpe)
    if urpe and scheme == "shaw":
        raise ValueError('urpe=True is not combined with scheme="shaw"')

    x = _probe_tokens(n, d, scheme, special_tokens, rng)  # (t, d), t = n or n + 2
    for _ in range(layers):
        x = _probe_layer(x, rng, h, d_ff, scheme, normalize, causal, urpe, shaw_clip)
    return x[1:-1] if special_tokens else x  # (n, d)


def _probe_tokens(n, d, scheme, special_tokens, rng):
    """``n`` copies of one random token ("0"), between [CLS] and [SEP] with ``special_tokens``,
    plus the absolute position code of ``scheme``: ``(t, d)``."""
    x = np.tile(rng.standard_normal(d), (n, 1))  # (n, d): n copies of the token "0"
    if special_tokens:
        cls, sep = rng.standard_normal((2, d))
        x = np.concatenate([cls[None], x, sep[None]])  # (n + 2, d)
    if scheme == "sinusoidal":
        x = x + sinusoidal_encoding(len(x), d)
    elif scheme == "learned":
        x = x + rng.standard_normal(x.shape)
    return x


def _probe_layer(x, rng, h, d_ff, scheme, normalize, causal, urpe, shaw_clip):
    """One post-LN layer with fresh random weights: multi-head attention with the position
    terms of ``scheme``, then the FFN, each with a residual and a LayerNorm.  ``(n, d) -> (n, d)``,
    ``n`` the tokens the layer sees (with [CLS] and [SEP] if any)."""
    n, d = x.shape
    w_q, w_k, w_v, w_o = rng.standard_normal((4, d, d)) / np.sqrt(d)
    b_q, b_k, b_v, b_o = 0.1 * rng.standard_normal((4, d))
    w1 = rng.standard_normal((d, d_ff)) / np.sqrt(d)
    w2 = rng.standard_normal((d_ff, d)) / np.sqrt(d_ff)
    b1, b2 = 0.1 * rng.standard_normal(d_ff), 0.1 * rng.standard_normal(d)
    q, k, v = (split_heads(linear(x, w, b), h) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))  # (h, n, dk)
    mask = causal_mask(n) if causal else None
    if scheme == "shaw":
        heads = _shaw_heads(q, k, v, rng, shaw_clip, mask, normalize)  # (h, n, dk)
    else:
        q, k, bias, reweight = _position_terms(q, k, rng, scheme, causal, urpe)
        heads = attention(q, k, v, mask=mask, bias=bias, normalize=normalize, reweight=reweight)  # (h, n, dk)
    x = layer_norm(x + linear(merge_heads(heads), w_o, b_o))  # (n, d)
    return layer_norm(x + ffn(x, w1, b1, w2, b2))  # (n, d)


def _position_terms(q, k, rng, scheme, causal, urpe):
    """``(q, k, bias, reweight)`` of one layer: rotated queries and keys (rope), a score bias
    (t5, alibi) and URPE's Toeplitz reweighting, for heads ``q``, ``k`` of shape ``(h, t, dk)``."""
    h, t = q.shape[0], q.shape[-2]
    offsets = np.arange(t)[None, :] - np.arange(t)[:, None]  # (t, t), j - i
    bias = reweight = None
    if scheme == "t5":
        table = rng.standard_normal((h, 32))
        bias = table[:, t5_relative_bucket(offsets, bidirectional=not causal)]  # (h, t, t)
    elif scheme == "alibi":
        bias = -alibi_slopes(h)[:, None, None] * np.abs(offsets)  # (h, t, t)
    elif scheme == "rope":
        q, k = rope(q), rope(k)
    if urpe == "symmetric":
        half = 1.0 + 0.5 * rng.standard_normal((h, t))  # (h, t): c_0, ..., c_{t-1}
        reweight = toeplitz(np.concatenate([half[:, :0:-1], half], axis=-1))  # (h, t, t), c_r = c_{-r}
    elif urpe:
        reweight = toeplitz(1.0 + 0.5 * rng.standard_normal((h, 2 * t - 1)))  # (h, t, t)
    return q, k, bias, reweight


def _shaw_heads(q, k, v, rng, clip, mask, normalize):
    """Shaw attention of each head with fresh random tables of ``2 clip + 1`` relative
    embeddings for the keys and the values: ``(h, t, dk)``."""
    h, t, dk = q.shape
    tables_k = rng.standard_normal((h, 2 * clip + 1, dk)) / np.sqrt(dk)
    tables_v = rng.standard_normal((h, 2 * clip + 1, dk))
    return np.stack([
        shaw_attention(q[i], k[i], v[i], shaw_relative_embeddings(t, t, tables_k[i]),
                       shaw_relative_embeddings(t, t, tables_v[i]), mask=mask, normalize=normalize)
        for i in range(h)
    ])  # (h, t, dk)


def linear_readout(
    features: ArrayLike, targets: ArrayLike, *, rcond: float | None = None
) -> tuple[np.ndarray, float]:
    r"""The best affine readout ``features @ w + b`` of ``targets``, by least squares.

    Parameters
    ----------
    features : array_like, shape (n, d)
        One row per position.
    targets : array_like, shape (n,)
    rcond : float, optional
        Directions of the centred features whose singular value is at most
        ``rcond * ||F||_2`` count as zero.  Default ``max(n, d) * eps``, with
        ``eps`` the float64 machine epsilon (see Notes).

    Returns
    -------
    predictions : ndarray, shape (n,)
    mse : float
        ``mean((predictions - targets) ** 2)``, the residual error.

    Raises
    ------
    TypeError
        If ``features`` or ``targets`` is not an array of real numbers, or
        ``rcond`` is not a real number or None.
    ValueError
        If ``features`` is not ``(n, d)``, ``targets`` not ``(n,)``, either
        holds NaN or ``+-inf``, ``features`` has no rows, or ``rcond`` is not
        in ``(0, 1)``.

    See Also
    --------
    probe_floor : the error of the best readout of position-blind states.
    probe_hidden_states : the states this readout is fitted to.
    numpy.linalg.matrix_rank : the rank rule of the cut-off.

    Notes
    -----
    An affine readout is a centred least-squares fit plus the mean: with
    :math:`\bar F` and :math:`\bar y` the column means,
    :math:`w = (F - \bar F)^{+}(y - \bar y)` and :math:`b = \bar y - \bar F w`,
    so the intercept never enters the pseudo-inverse :math:`^{+}`.

    The cut-off is the rank rule of :func:`numpy.linalg.matrix_rank`,
    ``max(n, d) * eps`` times a spectral norm, with the norm of the
    *uncentred* features :math:`\lVert F \rVert_2`: the states of a model
    carry rounding errors of order ``eps`` times their own size, and so does
    the subtraction of the mean, so directions of :math:`F - \bar F` below
    that level cannot be told from rounding and must not be read as position
    information.  A cut-off relative to the centred matrix itself would keep
    them whenever the centred matrix is pure rounding noise.  Adding a
    constant :math:`c` to every feature does not change the centred features,
    so an un-truncated affine fit is unchanged; the cut-off moves with
    :math:`\lVert F + c \rVert_2`, so with it the readout is unchanged as
    long as no singular value of the centred features lies between
    ``rcond * ||F||_2`` and ``rcond * ||F + c||_2``.  If every row of
    ``features`` is the same, the prediction is the mean of the targets and
    the error is their variance.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._probe import linear_readout, probe_floor
    >>> y = np.arange(1.0, 9.0)
    >>> _, mse = linear_readout(np.ones((8, 3)), y)
    >>> bool(np.isclose(mse, probe_floor(8)))
    True
    >>> _, mse = linear_readout(np.eye(8), y)
    >>> bool(mse < 1e-20)
    True
    """
    # The fit runs in float64 (numpy's SVD has no float16, and the cut-off is float64's).
    f = as_float_array(features, "features", ("n", "d")).astype(np.float64, copy=False)
    y = as_float_array(targets, "targets", (f.shape[0],), match=("features", f)).astype(np.float64, copy=False)
    if f.shape[0] == 0:
        raise ValueError(f"features has no rows (shape {f.shape}): a readout needs at least one position")
    if rcond is None:
        rcond = max(f.shape) * np.finfo(np.float64).eps
    elif isinstance(rcond, bool) or not isinstance(rcond, (int, float, np.integer, np.floating)):
        raise TypeError(f"rcond must be a real number or None, got {type(rcond).__name__}")
    if not (np.isfinite(rcond) and 0 < rcond < 1):
        raise ValueError(f"rcond must be a number in (0, 1), got {rcond}")
    centre, w, mean = _affine_fit(f, y, rcond)
    pred = (f - centre) @ w + mean  # (n,)
    return pred, float(np.mean((pred - y) ** 2))


def _affine_fit(features, targets, rcond=None):
    """The least-squares affine readout of ``targets`` (n,) from ``features`` (n, d), both float64,
    as ``(centre, w, mean)``: a row ``f`` reads ``(f - centre) @ w + mean``.  Directions of the
    centred features with a singular value at most ``rcond * ||features||_2`` are cut
    (:func:`linear_readout`, Notes); ``rcond`` is ``max(n, d) * eps`` by default."""
    rcond = max(features.shape) * np.finfo(np.float64).eps if rcond is None else rcond
    centre, mean = features.mean(axis=0), targets.mean()  # (d,), (): the means the intercept absorbs
    u, sv, vt = np.linalg.svd(features - centre, full_matrices=False)  # (n, r), (r,), (r, d)
    keep = sv > rcond * (np.linalg.norm(features, 2) if features.size else 0.0)  # above rounding
    w = vt[keep].T @ ((u[:, keep].T @ (targets - mean)) / sv[keep])  # (d,): pseudo-inverse V S^-1 U^T
    return centre, w, mean


def probe_floor(n: int) -> float:
    """The probe error of a model whose states do not depend on position: ``(n^2 - 1) / 12``.

    The best constant guess of ``1, ..., n`` is their mean ``(n + 1) / 2``,
    and its mean squared error is their variance.

    Raises
    ------
    TypeError
        If ``n`` is not an integer.
    ValueError
        If ``n < 1``.

    See Also
    --------
    linear_readout : the readout whose error this bounds.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._probe import probe_floor
    >>> bool(np.isclose(probe_floor(10), np.var(np.arange(1, 11))))
    True
    """
    n = check_count(n, "n", minimum=1)
    return (n * n - 1) / 12.0


def position_signal(states: ArrayLike) -> float:
    r"""How far apart the closest two states are, relative to the largest state.

    Parameters
    ----------
    states : array_like, shape (n, d)
        One row per position, ``n >= 2``.

    Returns
    -------
    float
        :math:`\min_{i \ne j} \lVert h_i - h_j \rVert / \max_i \lVert h_i \rVert`
        (0 when every state is the zero vector).

    Raises
    ------
    TypeError
        If ``states`` is not an array of real numbers.
    ValueError
        If ``states`` is not ``(n, d)`` with ``n >= 2``, or holds NaN or ``+-inf``.

    Notes
    -----
    A token-wise readout can tell positions ``i`` and ``j`` apart only if
    ``h_i != h_j``, so the score is the position information a readout of
    *any* form could use, in units of the states' size.  It is compared
    with :func:`rounding_floor`: a score at or below that floor is what
    rounding alone leaves between states that exact arithmetic makes equal,
    and counts as no signal.  Unlike a least-squares fit, the score does not
    grow with the number of fitted parameters.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._probe import position_signal
    >>> position_signal(np.array([[3.0, 4.0], [3.0, 4.0], [0.0, 5.0]]))
    0.0
    >>> position_signal(np.array([[1.0, 0.0], [2.0, 0.0]]))
    0.5
    """
    h = as_float_array(states, "states", ("n", "d")).astype(np.float64, copy=False)
    if h.shape[0] < 2:
        raise ValueError(f"states must have at least two rows, got shape {h.shape}")
    gaps = np.linalg.norm(h[:, None, :] - h[None, :, :], axis=-1)  # (n, n)
    np.fill_diagonal(gaps, np.inf)
    size = float(np.linalg.norm(h, axis=-1).max())
    return float(gaps.min() / size) if size > 0 else 0.0


def rounding_floor(dtype: DTypeLike, *, sublayers: int, terms: int) -> float:
    r"""A first-order estimate of the relative gap rounding opens between two states exact arithmetic makes equal.

    Parameters
    ----------
    dtype : numpy floating dtype
        The dtype the model computes in.
    sublayers : int
        Number of sublayers the states went through (``2 L`` for ``L`` blocks).
    terms : int
        Length of the longest sum in one sublayer (the largest of the width,
        the FFN width and the number of keys).

    Returns
    -------
    float
        ``2 (sublayers + 1) * terms * eps``.

    Raises
    ------
    TypeError
        If ``dtype`` is not a floating dtype or a count is not an integer.
    ValueError
        If ``sublayers < 0`` or ``terms < 1``.

    Notes
    -----
    A sum of ``k`` floating-point terms carries a relative error of at most
    about ``k * eps`` (Higham's :math:`\gamma_k`), so every entry a sublayer
    computes is off by about ``terms * eps`` of its size; a layer norm
    rescales to unit size, so the relative errors of the ``sublayers``
    sublayers and the input add up.  Two states that are equal in exact
    arithmetic each carry that error, hence the factor 2.  It is a
    first-order estimate, not a proof: a badly conditioned step (a layer
    norm of a nearly constant vector) can amplify rounding beyond it, which
    is why :func:`position_signal` is read against it with a margin.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._probe import rounding_floor
    >>> bool(rounding_floor(np.float64, sublayers=4, terms=64) < 1e-12)
    True
    >>> bool(rounding_floor(np.float32, sublayers=4, terms=64) > 1e-5)
    True
    """
    eps = float(np.finfo(check_float_dtype(dtype)).eps)
    sublayers = check_count(sublayers, "sublayers", minimum=0)
    terms = check_count(terms, "terms", minimum=1)
    return 2.0 * (sublayers + 1) * terms * eps


def heldout_readout(features: ArrayLike, targets: ArrayLike, train: ArrayLike) -> tuple[float, float]:
    """Fit the affine readout on some positions, score it on the others.

    Parameters
    ----------
    features : array_like, shape (n, d)
    targets : array_like, shape (n,)
    train : array_like of bool, shape (n,)
        The positions the readout is fitted on; the others are held out.
        At least one of each.

    Returns
    -------
    mse : float
        Mean squared error of the fitted readout on the held-out positions.
    baseline : float
        Mean squared error, on the same held-out positions, of the trivial
        readout that predicts the mean of the training targets everywhere.

    Raises
    ------
    TypeError
        If an argument has the wrong kind (``train`` must be boolean).
    ValueError
        If shapes disagree, values are not finite, or ``train`` selects no
        position or every position.

    Notes
    -----
    The readout is that of :func:`linear_readout` (least squares with its
    rounding cut-off, the same private fit) on the training rows.  Scored on the rows it was fitted on, an
    affine readout of ``d + 1 >= n`` parameters fits *any* ``n`` distinct
    states exactly, noise included; scored on held-out rows it succeeds only
    if the states carry a position code that the training positions
    determine.  States that are equal up to random noise give a held-out
    error at or above the baseline, whatever the size of the noise.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._probe import heldout_readout
    >>> y = np.arange(1.0, 9.0)
    >>> train = np.arange(8) % 2 == 0
    >>> mse, base = heldout_readout(np.column_stack([y, y ** 2]), y, train)
    >>> bool(mse < 1e-20 and base == 6.0)
    True
    """
    features = as_float_array(features, "features", ("n", "d")).astype(np.float64, copy=False)
    targets = as_float_array(targets, "targets", (features.shape[0],), match=("features", features))
    targets = targets.astype(np.float64, copy=False)
    if np.asarray(train).dtype != np.bool_:
        raise TypeError(f"train must be a boolean array, got {describe(train)}")
    train = np.asarray(train)
    if train.shape != targets.shape:
        raise ValueError(f"train must have shape {targets.shape} like targets, got {train.shape}")
    if train.all() or not train.any():
        raise ValueError("train must select at least one position and hold out at least one")
    centre, w, mean = _affine_fit(features[train], targets[train])  # fitted on the training rows
    pred = (features[~train] - centre) @ w + mean  # (n_test,): read on the held-out rows
    return float(np.mean((pred - targets[~train]) ** 2)), float(np.mean((mean - targets[~train]) ** 2))
