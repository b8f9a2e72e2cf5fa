r"""A small trainer: gradient descent and Adam over a list of float64 arrays.

The model is whatever ``loss_and_grad`` computes: a function of the list of
parameters that returns the loss and the list of its gradients (built from the
vector-Jacobian products of :mod:`attncore._vjp`).  Nothing random happens
here: the seeds live where the parameters are drawn, with
:func:`numpy.random.default_rng`, so a run is fixed by its seeds (up to the
rounding of the BLAS library the products run on).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Real
from typing import NamedTuple, Optional

import numpy as np
from numpy.typing import ArrayLike

from attncore._checks import as_float_array, check_count, check_positive, check_real

class TrainResult(NamedTuple):
    """What a trainer returns: the parameters and the loss before each update.

    A run whose loss (or a gradient) stops being finite stops there and reports it instead of
    raising, so that a sweep of learning rates can include rates that diverge on purpose:
    ``losses[t]`` is ``inf`` or NaN from the step that diverged on, ``params`` are those at
    which the last finite loss, ``losses[diverged_at - 1]``, was computed, and :attr:`diverged_at`
    is that step (None for a run that did not diverge).
    It unpacks as ``params, losses = adam(...)``.
    """

    params: list
    losses: np.ndarray

    @property
    def diverged_at(self) -> Optional[int]:
        """The step whose loss or gradient was not finite (the run stopped there), or None."""
        bad = np.flatnonzero(~np.isfinite(self.losses))
        return int(bad[0]) if bad.size else None


def _start(loss_and_grad, params, steps, lr):
    """Validate the arguments shared by the trainers; return float64 copies of ``params``."""
    if not callable(loss_and_grad):
        raise TypeError(f"loss_and_grad must be a function of the parameters, got {type(loss_and_grad).__name__}")
    if isinstance(params, np.ndarray) or not isinstance(params, Sequence) or not params:
        raise TypeError(f"params must be a non-empty list of arrays, got {type(params).__name__}")
    params = [as_float_array(p, f"params[{i}]").astype(np.float64) for i, p in enumerate(params)]
    return params, check_count(steps, "steps", minimum=0), check_positive(lr, "lr")


def _evaluate(loss_and_grad, params, step):
    """``(loss, grads)`` at ``params``, checked: a real loss and one real gradient per parameter, of its shape.

    ``grads`` is None when the loss or a gradient is not finite (the run diverged); at ``step`` 0,
    before any update, that is an error of ``loss_and_grad`` or of the starting point instead.
    """
    returned = loss_and_grad([p.copy() for p in params])
    if not isinstance(returned, tuple) or len(returned) != 2:
        raise TypeError(f"loss_and_grad must return a pair (loss, list of gradients), got {_describe(returned)}")
    loss, grads = returned
    if isinstance(loss, (bool, np.bool_)) or not isinstance(loss, (Real, np.ndarray)) or np.ndim(loss) != 0 \
            or np.asarray(loss).dtype.kind not in "fiu":
        raise TypeError(f"loss_and_grad must return a real number as the loss, got {_describe(loss)}; "
                        "return float(loss) for a scalar array")
    if isinstance(grads, (str, np.ndarray)) or not isinstance(grads, Sequence):
        raise TypeError(f"loss_and_grad must return a list of gradients, one per parameter, got {_describe(grads)}")
    if len(grads) != len(params):
        raise ValueError(f"loss_and_grad returned {len(grads)} gradients for {len(params)} parameters")
    grads = [as_float_array(g, f"gradient {i} of loss_and_grad", finite=False) for i, g in enumerate(grads)]
    for i, (g, p) in enumerate(zip(grads, params)):
        if g.shape != p.shape:
            raise ValueError(f"gradient {i} of loss_and_grad has shape {g.shape}, its parameter {p.shape}")
    loss = float(loss)
    if np.isfinite(loss) and all(np.all(np.isfinite(g)) for g in grads):
        return loss, grads
    if step == 0:
        raise ValueError(f"loss_and_grad returned the loss {loss} or a gradient that is not finite at the starting "
                         "point, before any update: not a run that diverged; check the loss and the parameters")
    return (loss if not np.isfinite(loss) else np.nan), None


def _describe(value):
    """The type of ``value``, and its shape for an array, for a message."""
    shape = f" of shape {value.shape}" if isinstance(value, np.ndarray) else ""
    return f"{type(value).__name__}{shape} {str(value)[:40]!r}"


def gradient_descent(
    loss_and_grad: Callable[[list[np.ndarray]], tuple[float, list[np.ndarray]]], params: Sequence[ArrayLike], *, steps: int, lr: float
) -> TrainResult:
    r"""Plain gradient descent: ``p <- p - lr * dL/dp``, ``steps`` times.

    Parameters
    ----------
    loss_and_grad : callable
        ``loss_and_grad(params) -> (loss, grads)``: the loss (a number) and
        one gradient per parameter, of its shape.
    params : list of array_like
        The starting point; copied to float64, never modified.
    steps : int
        Number of updates (0 allowed).
    lr : float
        The step size, ``> 0``.

    Returns
    -------
    TrainResult
        A NamedTuple ``(params, losses)``: the parameters after ``steps``
        updates and the loss before each update.  A run whose loss or a
        gradient stops being finite stops there, without raising: ``losses``
        is ``inf`` or NaN from that step on, ``params`` are those at which the
        last finite loss, ``losses[diverged_at - 1]``, was computed, and
        ``.diverged_at`` is that step (None otherwise).

    Raises
    ------
    TypeError
        If ``loss_and_grad`` is not callable, ``params`` not a non-empty list
        of real arrays, ``steps`` not an integer or ``lr`` not a real number;
        if ``loss_and_grad`` does not return a pair of a real number (not a
        string, a complex number, a bool or an array with axes) and a list of
        real arrays, checked at every step, the first included.
    ValueError
        If a parameter holds NaN or ``+-inf``, ``steps < 0`` or ``lr`` is not
        finite and ``> 0``; if ``loss_and_grad`` returns gradients that do not
        match the parameters, or a loss or gradient that is not finite at the
        starting point (before any update, nothing has diverged).

    See Also
    --------
    adam

    Notes
    -----
    On a quadratic loss with Hessian :math:`H`, the iteration converges for
    :math:`0 < \mathrm{lr} < 2 / \lambda_{\max}(H)`, linearly with rate
    :math:`\max_i |1 - \mathrm{lr}\,\lambda_i|`.

    Examples
    --------
    The minimum of ``(p - 3)**2`` is 3:

    >>> import numpy as np
    >>> from attncore import gradient_descent
    >>> params, losses = gradient_descent(lambda p: (float((p[0] - 3) ** 2), [2 * (p[0] - 3)]),
    ...                                   [np.array(0.0)], steps=100, lr=0.1)
    >>> float(params[0].round(6)), bool(losses[-1] < losses[0])
    (3.0, True)

    A step beyond ``2 / curvature`` (here 2 / 2) diverges: the run stops and says where.

    >>> with np.errstate(over="ignore"):  # the loss overflows to inf
    ...     result = gradient_descent(lambda p: (float((p[0] - 3) ** 2), [2 * (p[0] - 3)]),
    ...                               [np.array(0.0)], steps=2000, lr=1.5)
    >>> result.diverged_at is not None and bool(np.isinf(result.losses[result.diverged_at]))
    True
    """
    params, steps, lr = _start(loss_and_grad, params, steps, lr)
    losses = np.full(steps, np.nan)
    previous = params
    for t in range(steps):
        losses[t], grads = _evaluate(loss_and_grad, params, t)
        if grads is None:  # diverged: stop, report it in the losses, return the last finite loss's parameters
            params = previous
            break
        previous = params
        with np.errstate(over="ignore", invalid="ignore"):  # a step that overflows shows in the next loss
            params = [p - lr * g for p, g in zip(params, grads)]
    return TrainResult(params, losses)


def adam(
    loss_and_grad: Callable[[list[np.ndarray]], tuple[float, list[np.ndarray]]],
    params: Sequence[ArrayLike],
    *,
    steps: int,
    lr: float = 1e-3,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
) -> TrainResult:
    r"""Adam (Kingma and Ba, 2015): gradient steps scaled by running moments.

    Parameters
    ----------
    loss_and_grad, params, steps
        As in :func:`gradient_descent`.
    lr : float, optional
        The step size, ``> 0``.
    beta1, beta2 : float, optional
        Decay rates of the first and second moments, in ``[0, 1)``.
    eps : float, optional
        Added to the root of the second moment, ``> 0``.

    Returns
    -------
    TrainResult
        ``(params, losses)``, as in :func:`gradient_descent`.

    Raises
    ------
    TypeError, ValueError
        As :func:`gradient_descent`, and for ``beta1`` or ``beta2`` outside
        ``[0, 1)`` or ``eps`` not finite and ``> 0``.

    See Also
    --------
    gradient_descent

    Notes
    -----
    With :math:`g_t` the gradient at step :math:`t = 1, 2, \dots`:

    .. math::

        m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t, \quad
        v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2, \quad
        p_t = p_{t-1} - \mathrm{lr}\, \frac{m_t / (1 - \beta_1^t)}{\sqrt{v_t / (1 - \beta_2^t)} + \epsilon}.

    The first step moves every entry by about ``lr`` whatever the scale of
    its gradient.

    Examples
    --------
    >>> import numpy as np
    >>> from attncore import adam
    >>> params, losses = adam(lambda p: (float((p[0] - 3) ** 2), [2 * (p[0] - 3)]),
    ...                       [np.array(0.0)], steps=2000, lr=0.05)
    >>> float(params[0].round(4))
    3.0
    """
    params, steps, lr = _start(loss_and_grad, params, steps, lr)
    beta1, beta2 = (float(check_real(b, name, minimum=0)) for b, name in ((beta1, "beta1"), (beta2, "beta2")))
    if beta1 >= 1 or beta2 >= 1:
        raise ValueError(f"beta1 and beta2 must be < 1, got {beta1} and {beta2}")
    eps = check_positive(eps, "eps")
    m, v = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    losses = np.full(steps, np.nan)
    previous = list(params)
    for t in range(1, steps + 1):
        losses[t - 1], grads = _evaluate(loss_and_grad, params, t - 1)
        if grads is None:  # diverged: stop, report it in the losses, return the last finite loss's parameters
            params = previous
            break
        previous = list(params)  # the update below replaces the list's arrays, it does not modify them
        for i, g in enumerate(grads):  # Adam's step is at most about lr: no overflow
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            params[i] = params[i] - lr * (m[i] / (1 - beta1**t)) / (np.sqrt(v[i] / (1 - beta2**t)) + eps)
    return TrainResult(params, losses)
