"""Feature maps for the exponential kernel, and linear attention built on them.

Softmax attention weighs key ``j`` for query ``i`` by ``exp(q_i . k_j)``
(normalised over ``j``).  A feature map ``phi`` with
``phi(q) . phi(k) ~= exp(q . k)`` turns it into *linear* attention, whose cost
is linear in the sequence length.  This module holds three such maps (random
features, the truncated Taylor series and the limit ``(1 + x/n)^n``) and the
linear attention that uses any of them.

The scale ``1/sqrt(d_k)`` of standard attention is not applied here: to mimic
``attention(q, k, v)`` pass ``q`` and ``k`` multiplied by ``d_k ** -0.25``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import (
    as_float_array,
    batch_shape,
    check_bool,
    check_choice,
    check_count,
    check_generator,
)

#: The largest number of entries a deterministic feature map may return
#: (``2**24`` float64 numbers are 128 MiB); larger requests raise ``ValueError``.
MAX_FEATURE_ENTRIES = 2**24


def gaussian_features(m: int, d: int, rng: np.random.Generator, *, orthogonal: bool = False) -> np.ndarray:
    r"""The random projection matrix ``omega`` of shape ``(m, d)``.

    Parameters
    ----------
    m : int
        Number of random features (rows).
    d : int
        Width of the vectors the features act on (columns).
    rng : numpy.random.Generator
        The source of randomness.
    orthogonal : bool, optional
        If False (default), the rows are i.i.d. standard normal vectors.  If
        True, the rows come in blocks of ``d`` (the last block truncated):
        within a block the rows are mutually orthogonal, with directions from a
        Haar-random orthogonal matrix and norms drawn independently from the
        chi distribution with ``d`` degrees of freedom, as in Performer.

    Returns
    -------
    ndarray, shape (m, d)

    Raises
    ------
    TypeError
        If ``m`` or ``d`` is not an integer, ``rng`` not a
        ``numpy.random.Generator``, or ``orthogonal`` not a bool.
    ValueError
        If ``m`` or ``d`` is below 1.

    Notes
    -----
    A standard normal vector :math:`\omega \in \mathbb{R}^d` is a uniformly
    random direction times an independent length with
    :math:`\|\omega\| \sim \chi_d`.  The orthogonal construction keeps
    both marginals, so every row is still :math:`\mathcal{N}(0, I_d)`, and any
    estimator that is an average over rows stays unbiased; only the rows of one
    block are coupled (made orthogonal).

    See Also
    --------
    positive_random_features : the positive feature map that uses ``omega``.
    trig_random_features : the trigonometric feature map that uses ``omega``.

    References
    ----------
    :cite:t:`choromanski2021rethinking`: orthogonal rows, as FAVOR+ draws them.

    Examples
    --------
    Rows of one block are orthogonal:

    >>> import numpy as np
    >>> from attncore._kernels import gaussian_features
    >>> w = gaussian_features(6, 3, np.random.default_rng(0), orthogonal=True)
    >>> gram = w[:3] @ w[:3].T
    >>> w.shape, bool(np.allclose(gram, np.diag(np.diag(gram))))
    ((6, 3), True)
    """
    m = check_count(m, "m")
    d = check_count(d, "d")
    check_generator(rng)
    if not check_bool(orthogonal, "orthogonal"):
        return rng.standard_normal((m, d))  # (m, d)
    blocks = []
    for _ in range(-(-m // d)):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        # Fixing the signs by diag(r) makes q Haar-distributed; copysign, not sign, so that a
        # singular draw (a zero on the diagonal of r) keeps its row of q instead of zeroing it.
        blocks.append((q * np.copysign(1.0, np.diag(r))).T)  # (d, d), orthonormal rows
    directions = np.concatenate(blocks, axis=0)[:m]  # (m, d)
    norms = np.sqrt(rng.chisquare(d, size=m))  # (m,)
    return directions * norms[:, None]


def _check_omega(x, omega):
    x = as_float_array(x, "x", ("...", "n", "d"))
    omega = as_float_array(omega, "omega", ("m", x.shape[-1]), match=("x", x))
    if omega.shape[0] == 0:
        raise ValueError(f"omega must have at least one row (m >= 1 features), got shape {omega.shape}")
    return x, omega


def positive_random_features(x: ArrayLike, omega: ArrayLike, *, stabilizer: str | None = None) -> np.ndarray:
    r"""Performer's positive random features ``exp(x . w - |x|^2 / 2) / sqrt(m)``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
        Queries or keys, one per row.
    omega : array_like, shape (m, d)
        Projection rows ``w_1 .. w_m``, e.g. from :func:`gaussian_features`.
    stabilizer : {None, "row", "global"}, optional
        ``None`` (default) returns the features exactly.  ``"row"`` rescales
        each row by a positive factor so that its largest entry equals
        ``1 / sqrt(m)``; ``"global"`` rescales all rows (over every leading
        axis) by one common factor so that the largest entry of the whole
        array equals ``1 / sqrt(m)``.  In linear attention a positive factor per
        *query* cancels in the normaliser (use ``"row"`` for queries), while
        the keys tolerate only one common factor (``"global"``); pass the
        two maps as ``feature_map`` and ``key_feature_map`` of
        :func:`linear_attention`.

    Returns
    -------
    ndarray, shape (..., n, m)
        Positive features.

    Raises
    ------
    TypeError
        If ``x`` or ``omega`` is not an array of real numbers.
    ValueError
        If ``x`` is not ``(..., n, d)``, ``omega`` not ``(m, d)`` with
        ``m >= 1``, either holds NaN or ``+-inf``, or ``stabilizer`` is not
        None, ``"row"`` or ``"global"``.

    Notes
    -----
    For :math:`\omega \sim \mathcal{N}(0, I_d)`,

    .. math::

        \mathbb{E}_\omega\big[e^{\omega\cdot q - \|q\|^2/2}\,
        e^{\omega\cdot k - \|k\|^2/2}\big] = e^{q \cdot k},

    so :math:`\phi(q)\cdot\phi(k)` is an unbiased estimate of
    :math:`e^{q\cdot k}`.  The exponent is formed before exponentiating, never
    as a product of :math:`e^{\omega\cdot x}` and :math:`e^{-\|x\|^2/2}`
    (each of which over- or underflows for large :math:`\|x\|`).  Since
    :math:`\omega\cdot x - \|x\|^2/2 = (\|\omega\|^2 - \|x - \omega\|^2)/2
    \le \|\omega\|^2/2`, the result is finite for every ``x`` whenever
    :math:`\|\omega\|^2/2` is below the log of the largest float.

    See Also
    --------
    gaussian_features : draws ``omega`` (i.i.d. or orthogonal rows).
    trig_random_features : the trigonometric estimate of the same kernel.
    linear_attention : attention computed with these features.

    References
    ----------
    :cite:t:`choromanski2021rethinking`: positive random features (FAVOR+, Performer).

    Examples
    --------
    The features are positive, and the estimate of ``exp(q . k)`` is close for
    many features:

    >>> import numpy as np
    >>> from attncore._kernels import gaussian_features, positive_random_features
    >>> rng = np.random.default_rng(0)
    >>> q, k = np.array([[0.3, -0.2]]), np.array([[0.1, 0.4]])
    >>> w = gaussian_features(200_000, 2, rng)
    >>> fq, fk = positive_random_features(q, w), positive_random_features(k, w)
    >>> bool(np.all(fq > 0)), bool(abs((fq @ fk.T)[0, 0] / np.exp(q @ k.T)[0, 0] - 1) < 0.01)
    (True, True)
    """
    x, omega = _check_omega(x, omega)
    check_choice(stabilizer, "stabilizer", (None, "row", "global"))
    dtype = np.result_type(x, omega)
    x = x.astype(dtype, copy=False)  # |x|^2 too in the result's dtype (float64 for a float32 x and float64 omega)
    D = omega.shape[0]  # the number of features, >= 1 (_check_omega)
    exponent = x @ omega.T.astype(dtype, copy=False)  # (..., n, D): omega_r . x
    # The factor 1/sqrt(D) enters the exponent as -log(D)/2: one pass less over (n, D).
    offset = 0.5 * np.sum(x * x, axis=-1, keepdims=True) + 0.5 * math.log(D)  # (..., n, 1)
    if stabilizer == "row":  # the largest exponent of the row becomes -log(D)/2
        offset = offset + np.max(exponent - offset, axis=-1, keepdims=True) + 0.5 * math.log(D)
    elif stabilizer == "global":  # the largest exponent of the array becomes -log(D)/2
        offset = offset + np.max(exponent - offset) + 0.5 * math.log(D)
    exponent -= offset.astype(dtype, copy=False)
    np.exp(exponent, out=exponent)
    return exponent


def trig_random_features(x: ArrayLike, omega: ArrayLike) -> np.ndarray:
    r"""Trigonometric random features ``exp(|x|^2/2) [cos(x . w), sin(x . w)] / sqrt(m)``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    omega : array_like, shape (m, d)

    Returns
    -------
    ndarray, shape (..., n, 2m)
        The ``m`` cosines, then the ``m`` sines, all times
        ``exp(|x|^2 / 2) / sqrt(m)``.

    Raises
    ------
    TypeError
        If ``x`` or ``omega`` is not an array of real numbers.
    ValueError
        If ``x`` is not ``(..., n, d)``, ``omega`` not ``(m, d)`` with
        ``m >= 1``, or either holds NaN or ``+-inf``.

    Notes
    -----
    With :math:`\cos a \cos b + \sin a \sin b = \cos(a - b)` and
    :math:`\mathbb{E}\cos(\omega\cdot u) = e^{-\|u\|^2/2}`,

    .. math::

        \mathbb{E}\big[\phi(q)\cdot\phi(k)\big]
        = e^{(\|q\|^2 + \|k\|^2)/2}\, e^{-\|q - k\|^2/2} = e^{q\cdot k}.

    The features (and so the estimate) can be negative.

    See Also
    --------
    positive_random_features : the positive estimate of the same kernel.

    References
    ----------
    :cite:t:`rahimi2007random`: random Fourier features of shift-invariant kernels.

    Examples
    --------
    With a single feature the estimate is exact when ``q == k``:

    >>> import numpy as np
    >>> from attncore._kernels import trig_random_features
    >>> q = np.array([[0.5, -1.0]])
    >>> f = trig_random_features(q, np.array([[0.7, 0.2]]))
    >>> bool(np.isclose((f @ f.T)[0, 0], np.exp(q @ q.T)[0, 0]))
    True
    """
    x, omega = _check_omega(x, omega)
    dtype = np.result_type(x, omega)
    x = x.astype(dtype, copy=False)  # |x|^2 too in the result's dtype (float64 for a float32 x and float64 omega)
    angles = x @ omega.T.astype(dtype, copy=False)  # (..., n, m), m >= 1 (_check_omega)
    radius = np.exp(0.5 * np.sum(x * x, axis=-1, keepdims=True)) / math.sqrt(omega.shape[0])
    return (np.concatenate([np.cos(angles), np.sin(angles)], axis=-1) * radius).astype(dtype)  # (..., n, 2m)


def _check_size(x, width, what, max_entries):
    entries = math.prod(x.shape[:-1]) * width
    if entries > max_entries:
        raise ValueError(
            f"{what} would have {width} features per row, {entries} entries for x of "
            f"shape {x.shape}, more than max_entries = {max_entries}"
        )


def taylor_features(x: ArrayLike, order: int, *, max_entries: int = MAX_FEATURE_ENTRIES) -> np.ndarray:
    r"""The exact feature map of the truncated series ``sum_{p=0}^{order} (q . k)^p / p!``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    order : int
        The highest power ``P >= 0`` kept.
    max_entries : int, optional
        ``ValueError`` if the result would hold more entries than this
        (default :data:`MAX_FEATURE_ENTRIES`).

    Returns
    -------
    ndarray, shape (..., n, D) with D = 1 + d + d**2 + ... + d**order
        The blocks ``x^{(x) p} / sqrt(p!)`` for ``p = 0 .. order``, each the
        flattened ``p``-fold tensor (outer) power of ``x`` in C order.

    Raises
    ------
    TypeError
        If ``x`` is not an array of real numbers or ``order`` /
        ``max_entries`` not integers.
    ValueError
        If ``x`` is not ``(..., n, d)`` or holds NaN or ``+-inf``; if ``order``
        is negative; if the result would exceed ``max_entries``.

    Notes
    -----
    :math:`(q\cdot k)^p = \sum_{i_1..i_p} (q_{i_1}\cdots q_{i_p})(k_{i_1}\cdots k_{i_p})
    = (\otimes^p q)\cdot(\otimes^p k)`, hence

    .. math::

        \phi(q)\cdot\phi(k) = \sum_{p=0}^{P} \frac{(q\cdot k)^p}{p!}.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._kernels import taylor_features
    >>> q, k = np.array([[0.5, -1.0, 2.0]]), np.array([[1.0, 0.25, -0.5]])
    >>> f, g = taylor_features(q, 2), taylor_features(k, 2)
    >>> s = (q @ k.T)[0, 0]
    >>> f.shape, bool(np.isclose((f @ g.T)[0, 0], 1 + s + s**2 / 2))
    ((1, 13), True)
    """
    x = as_float_array(x, "x", ("...", "n", "d"))
    order = check_count(order, "order", minimum=0)
    max_entries = check_count(max_entries, "max_entries", minimum=0)
    d = x.shape[-1]
    _check_size(x, sum(d**p for p in range(order + 1)), f"taylor_features(order={order})", max_entries)
    block = np.ones(x.shape[:-1] + (1,), dtype=x.dtype)  # (..., n, 1)
    blocks = [block]
    for p in range(1, order + 1):
        # x^{(x)p}/sqrt(p!) = (x^{(x)(p-1)}/sqrt((p-1)!)) (x) x / sqrt(p)
        block = (block[..., :, None] * x[..., None, :]).reshape(x.shape[:-1] + (d**p,))  # (..., n, d^p)
        block = block / x.dtype.type(math.sqrt(p))
        blocks.append(block)
    return np.concatenate(blocks, axis=-1)  # (..., n, D)


def exp_limit_features(x: ArrayLike, n: int, *, max_entries: int = MAX_FEATURE_ENTRIES) -> np.ndarray:
    r"""The exact feature map of ``(1 + q . k / n)^n``: the ``n``-fold tensor power of ``(1, x/sqrt(n))``.

    Parameters
    ----------
    x : array_like, shape (..., l, d)
        Rows to map (``l`` tokens; the letter ``n`` is the power here).
    n : int
        The power ``n >= 1`` of the limit ``(1 + s/n)^n -> e^s``.
    max_entries : int, optional
        ``ValueError`` if the result would hold more entries than this
        (default :data:`MAX_FEATURE_ENTRIES`).

    Returns
    -------
    ndarray, shape (..., l, (d + 1)**n)

    Raises
    ------
    TypeError
        If ``x`` is not an array of real numbers or ``n`` / ``max_entries``
        not integers.
    ValueError
        If ``x`` is not ``(..., l, d)`` or holds NaN or ``+-inf``; if
        ``n < 1``; if the result would exceed ``max_entries``.

    Notes
    -----
    With :math:`y = (1, x/\sqrt{n})`, :math:`y_q\cdot y_k = 1 + q\cdot k/n`
    and :math:`(\otimes^n y_q)\cdot(\otimes^n y_k) = (y_q\cdot y_k)^n`, so

    .. math::

        \phi(q)\cdot\phi(k) = \Big(1 + \frac{q\cdot k}{n}\Big)^n
        \xrightarrow[n\to\infty]{} e^{q\cdot k}.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore._kernels import exp_limit_features
    >>> q, k = np.array([[0.5, -1.0]]), np.array([[1.0, 0.25]])
    >>> f, g = exp_limit_features(q, 3), exp_limit_features(k, 3)
    >>> s = (q @ k.T)[0, 0]
    >>> f.shape, bool(np.isclose((f @ g.T)[0, 0], (1 + s / 3) ** 3))
    ((1, 27), True)
    """
    x = as_float_array(x, "x", ("...", "l", "d"))
    N = check_count(n, "n")  # the N of (1 + q . k / N)^N; the keyword is n
    max_entries = check_count(max_entries, "max_entries", minimum=0)
    d = x.shape[-1]
    _check_size(x, (d + 1) ** N, f"exp_limit_features(n={N})", max_entries)
    ones = np.ones(x.shape[:-1] + (1,), dtype=x.dtype)
    y = np.concatenate([ones, x / x.dtype.type(math.sqrt(N))], axis=-1)  # (..., l, d+1): y(x) = (1, x / sqrt(N))
    out = ones  # (..., l, 1)
    for p in range(1, N + 1):  # out = y(x) (x) ... (x) y(x), p factors
        out = (out[..., :, None] * y[..., None, :]).reshape(x.shape[:-1] + ((d + 1) ** p,))  # (..., l, (d+1)^p)
    return out


def _features(q, k, feature_map, key_feature_map):
    if not callable(feature_map):
        raise TypeError(f"feature_map must be callable, got {type(feature_map).__name__}")
    if key_feature_map is None:
        key_feature_map, key_name = feature_map, "feature_map(k)"
    else:
        if not callable(key_feature_map):
            raise TypeError(f"key_feature_map must be callable or None, got {type(key_feature_map).__name__}")
        key_name = "key_feature_map(k)"
    fq = as_float_array(feature_map(q), "feature_map(q)", ("...", q.shape[-2], "D"))
    fk = as_float_array(key_feature_map(k), key_name, ("...", k.shape[-2], fq.shape[-1]))
    if fq.shape[-1] == 0:
        raise ValueError(
            f"feature_map(q) and {key_name} have feature width D = 0 (shapes {fq.shape} and {fk.shape}): "
            "the feature map must return at least one feature"
        )
    return fq, fk, key_name


def _check_sums(numerator, normaliser, fq, fk, v, key_name):
    """Raise ``ValueError`` if the numerator or the normaliser of linear attention is not finite.

    The inputs and their features are finite (checked), so a sum that is not
    finite is one whose products or partial sums overflowed its dtype.  With
    ``numerator=None`` (the weights alone) only the normaliser is checked: it
    is the sum of the scores, so a score that overflowed makes it overflow too.
    """
    if not np.all(np.isfinite(normaliser)):
        raise ValueError(
            f"feature_map(q) . {key_name} (the normaliser of linear attention) overflows {normaliser.dtype} "
            f"(feature_map(q) of shape {fq.shape}, {key_name} of shape {fk.shape}); scale the features down "
            "(a positive factor per query row, or one factor common to all keys, leaves the output unchanged)"
        )
    if numerator is not None and not np.all(np.isfinite(numerator)):
        raise ValueError(
            f"feature_map(q) . {key_name} times v (the numerator of linear attention) overflows "
            f"{numerator.dtype} (feature_map(q) of shape {fq.shape}, {key_name} of shape {fk.shape}, "
            f"v of shape {v.shape}); scale v or the features down"
        )


def _validate_qkv(q, k, v, causal):
    q = as_float_array(q, "q", ("...", "n", "k"))
    k = as_float_array(k, "k", ("...", "m", q.shape[-1]), match=("q", q))
    causal = check_bool(causal, "causal")
    if v is not None:
        v = as_float_array(v, "v", ("...", k.shape[-2], "v"), match=("k", k))
        batch_shape(("q", q, 2), ("k", k, 2), ("v", v, 2))
    else:
        batch_shape(("q", q, 2), ("k", k, 2))
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"causal linear attention needs as many queries as keys, got q of shape "
            f"{q.shape} and k of shape {k.shape}"
        )
    return q, k, v


def linear_attention_weights(
    q: ArrayLike,
    k: ArrayLike,
    feature_map: Callable[[np.ndarray], np.ndarray],
    *,
    causal: bool = False,
    key_feature_map: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    r"""The explicit ``(n, m)`` matrix of linear attention (for checks and rank studies).

    Parameters
    ----------
    q : array_like, shape (..., n, k)
    k : array_like, shape (..., m, k)
    feature_map : callable
        Maps an array ``(..., l, k)`` to features ``(..., l, D)``.
    causal : bool, optional
        Keep only keys ``j <= i`` (needs ``n == m``).
    key_feature_map : callable or None, optional
        Features for the keys; ``None`` (default) applies ``feature_map``
        to the keys too.

    Returns
    -------
    ndarray, shape (..., n, m)

    Raises
    ------
    TypeError
        If ``q``, ``k`` is not an array of real numbers, ``feature_map``
        (or ``key_feature_map``) is not callable, ``causal`` is not a bool, or
        a feature map returns something other than an array of real numbers.
    ValueError
        If the shapes do not match (``q`` ``(..., n, k)``, ``k``
        ``(..., m, k)``); if an input holds NaN or ``+-inf``; if the
        features of ``q`` and ``k`` differ in width, have width 0, have the wrong number of
        rows or hold NaN or ``+-inf``; if ``causal`` and ``n != m``; if a
        score :math:`\phi(q_i)\cdot\phi(k_j)` or the normaliser, their sum over
        the kept keys, overflows the dtype, although inputs and features are
        finite (the error names the features and their shapes).

    Notes
    -----
    .. math::

        A_{ij} = \frac{\phi(q_i)\cdot\phi(k_j)}{\sum_{l} \phi(q_i)\cdot\phi(k_l)},

    the sums over the kept keys.  Unlike the softmax, the entries are negative
    wherever the feature inner products are.

    Examples
    --------
    Rows sum to one:

    >>> import numpy as np
    >>> from attncore._kernels import linear_attention_weights, taylor_features
    >>> rng = np.random.default_rng(0)
    >>> q, k = 0.3 * rng.normal(size=(4, 3)), 0.3 * rng.normal(size=(4, 3))
    >>> a = linear_attention_weights(q, k, lambda x: taylor_features(x, 2), causal=True)
    >>> bool(np.allclose(a.sum(-1), 1)), bool(np.all(np.triu(a, 1) == 0))
    (True, True)
    """
    q, k, _ = _validate_qkv(q, k, None, causal)
    fq, fk, key_name = _features(q, k, feature_map, key_feature_map)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is an error below, naming the operands
        scores = fq @ np.swapaxes(fk, -1, -2)  # (..., n, m)
        if causal:
            scores = np.tril(scores)
        total = scores.sum(axis=-1, keepdims=True)  # (..., n, 1)
    _check_sums(None, total, fq, fk, None, key_name)
    return scores / total


def linear_attention(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    feature_map: Callable[[np.ndarray], np.ndarray],
    *,
    causal: bool = False,
    chunk: int = 64,
    key_feature_map: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    r"""Linear attention ``phi(Q) (phi(K)^T V)`` with its normaliser, in O(n) time.

    Parameters
    ----------
    q : array_like, shape (..., n, k)
        Queries.
    k : array_like, shape (..., m, k)
        Keys.
    v : array_like, shape (..., m, v)
        Values.
    feature_map : callable
        Maps an array ``(..., l, k)`` to features ``(..., l, D)``; applied to
        ``q``, and to ``k`` unless ``key_feature_map`` is given.
    causal : bool, optional
        Query ``i`` attends keys ``j <= i`` only (needs ``n == m``).
    chunk : int, optional
        Block length of the causal computation (it changes the speed, not
        the result).
    key_feature_map : callable or None, optional
        Features for the keys, ``(..., m, k) -> (..., m, D)``; ``None``
        (default) uses ``feature_map``.  This is what makes the stabilised
        positive features usable: ``stabilizer="row"`` for the queries and
        ``stabilizer="global"`` for the keys leave the output unchanged in
        exact arithmetic (see Notes).

    Returns
    -------
    ndarray, shape (..., n, v)
        Equal to ``linear_attention_weights(q, k, feature_map, causal=causal) @ v``
        without forming the ``(n, m)`` matrix.

    Raises
    ------
    TypeError
        If ``q``, ``k`` or ``v`` is not an array of real numbers, ``feature_map``
        (or ``key_feature_map``) is not callable, ``causal`` is not a bool, ``chunk`` not an integer, or
        a feature map returns something other than an array of real numbers.
    ValueError
        If the shapes do not match (``q`` ``(..., n, k)``, ``k``
        ``(..., m, k)``, ``v`` ``(..., m, v)``); if an input holds NaN or ``+-inf``; if the
        features of ``q`` and ``k`` differ in width, have width 0, have the wrong number of
        rows or hold NaN or ``+-inf``; if ``causal`` and ``n != m``; if ``chunk < 1``;
        if the numerator :math:`\sum_j (\phi(q_i)\cdot\phi(k_j))\, v_j` or the
        normaliser :math:`\sum_j \phi(q_i)\cdot\phi(k_j)` (with the mask, of any
        block) overflows the dtype it is computed in, although inputs and
        features are finite (the error names the features, ``v`` and their shapes).

    Notes
    -----
    .. math::

        \mathrm{out}_i = \frac{\phi(q_i)^{\top} S_i}{\phi(q_i)\cdot z_i},
        \qquad S_i = \sum_{j} \phi(k_j)\, v_j^{\top},\quad z_i = \sum_j \phi(k_j),

    the sums over every key, or over :math:`j \le i` when causal.  With no
    keys (``m = 0``) the output is 0, as in :func:`attncore.attention`.  Without
    the mask :math:`S` and :math:`z` are computed once, in
    :math:`O(m D v)`, and applied in :math:`O(n D v)`.  With the mask they are
    running sums: the sequence is cut into blocks of ``chunk`` tokens; within a
    block the masked ``(chunk, chunk)`` products are formed explicitly, and the
    sums over all earlier blocks are carried in ``(D, v)`` and ``(D,)`` states,
    for :math:`O(n\,\mathrm{chunk}\,(D + v) + n D v)` work in all.  If the
    features can be negative (truncated series, trigonometric features) the
    normaliser can vanish or change sign; nothing guards against that.

    Finite features do not make a finite output.  For inputs of large norm
    the exact positive features are tiny (about ``1e-170`` to ``1e-230`` at
    ``|x| = 30``, ``d = 16``), their products underflow to 0 and the output
    is ``0/0 = nan`` (in float32 already at moderate norms).  A positive factor
    :math:`c_i` on :math:`\phi(q_i)` cancels between numerator and
    denominator, and so does one common factor on all :math:`\phi(k_j)`;
    so ``feature_map`` with ``stabilizer="row"`` and ``key_feature_map`` with
    ``stabilizer="global"`` (see :func:`positive_random_features`) compute the
    same output from features whose largest entries are :math:`1/\sqrt{D}`,
    which keeps it finite in float64 for norms up to 30 (tested).  At the
    other end, features and values so large that the numerator or the
    normaliser overflows (features near ``1e17`` and values near ``1e30`` in
    float32) are a ``ValueError``, not an output of ``inf`` or ``nan``; the
    same two rescalings of the features, or smaller values (the output scales
    with them), avoid it.

    See Also
    --------
    linear_attention_weights : the same attention as an explicit ``(..., n, m)`` matrix.
    attention : the softmax attention that positive features approximate.

    References
    ----------
    :cite:t:`katharopoulos2020transformers`: linear attention and its causal, RNN form.

    Examples
    --------
    The O(n) result equals the explicit weights times the values:

    >>> import numpy as np
    >>> from attncore._kernels import (gaussian_features, linear_attention,
    ...     linear_attention_weights, positive_random_features)
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 5, 4)) * 0.5
    >>> w = gaussian_features(16, 4, rng)
    >>> phi = lambda x: positive_random_features(x, w)
    >>> out = linear_attention(q, k, v, phi, causal=True, chunk=2)
    >>> bool(np.allclose(out, linear_attention_weights(q, k, phi, causal=True) @ v))
    True

    Stabilised features (row factor for queries, one global factor for keys)
    give the same output:

    >>> stable = linear_attention(
    ...     q, k, v, lambda x: positive_random_features(x, w, stabilizer="row"), causal=True,
    ...     chunk=2, key_feature_map=lambda x: positive_random_features(x, w, stabilizer="global"))
    >>> bool(np.allclose(stable, out, rtol=1e-12))
    True
    """
    q, k, v = _validate_qkv(q, k, v, causal)
    chunk = check_count(chunk, "chunk")
    fq, fk, key_name = _features(q, k, feature_map, key_feature_map)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is an error below, naming the operands
        numerator, denominator = _causal_sums(fq, fk, v, chunk) if causal else _sums(fq, fk, v)
    if k.shape[-2] == 0:  # no keys: an empty sum, 0 as in attention (not 0/0)
        return np.zeros_like(numerator)
    _check_sums(numerator, denominator, fq, fk, v, key_name)
    return numerator / denominator  # (..., n, v)


def _sums(fq, fk, v):
    """The numerators ``phi(q_i) S`` and normalisers ``phi(q_i) . z`` of linear attention,
    ``S = sum_j phi(k_j)^T v_j`` and ``z = sum_j phi(k_j)`` computed once for every query."""
    state = np.swapaxes(fk, -1, -2) @ v  # (..., D, v)
    total = np.sum(fk, axis=-2)[..., :, None]  # (..., D, 1)
    return fq @ state, fq @ total  # (..., n, v), (..., n, 1)


def _causal_sums(fq, fk, v, chunk):
    """:func:`_sums` over the keys ``j <= i``, ``chunk`` tokens at a time: running sums carried
    from chunk to chunk, plus the lower triangle of each chunk's own ``phi(Q) phi(K)^T``."""
    batch = batch_shape(("features of q", fq, 2), ("features of k", fk, 2), ("v", v, 2))  # the axes "..."
    n, D, dtype = fq.shape[-2], fq.shape[-1], np.result_type(fq, fk, v)
    numerator = np.empty(batch + (n, v.shape[-1]), dtype=dtype)  # (..., n, v)
    denominator = np.empty(batch + (n, 1), dtype=dtype)  # (..., n, 1)
    state = np.zeros(batch + (D, v.shape[-1]), dtype=dtype)  # (..., D, v): sum of phi(k_j)^T v_j so far
    total = np.zeros(batch + (D, 1), dtype=dtype)  # (..., D, 1): sum of phi(k_j) so far
    for start in range(0, n, chunk):
        rows = slice(start, min(start + chunk, n))  # c <= chunk tokens
        fq_c, fk_c, v_c = fq[..., rows, :], fk[..., rows, :], v[..., rows, :]
        local = np.tril(fq_c @ np.swapaxes(fk_c, -1, -2))  # (..., c, c): the chunk's own keys j <= i
        numerator[..., rows, :] = fq_c @ state + local @ v_c
        denominator[..., rows, :] = fq_c @ total + local.sum(axis=-1, keepdims=True)
        state = state + np.swapaxes(fk_c, -1, -2) @ v_c
        total = total + np.sum(fk_c, axis=-2)[..., :, None]
    return numerator, denominator
