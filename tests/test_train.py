"""The trainers on problems with a known answer: linear least squares reaches its closed-form solution."""

from __future__ import annotations

import numpy as np

import attncore as ac


def least_squares(seed=0, n=40, d=3, e=2):
    """A random least-squares problem and the gradient of 0.5 * mean squared error, through linear_vjp."""
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(n, d)), rng.normal(size=(n, e))

    def loss_and_grad(params):
        w, b = params
        residual = ac.linear(x, w, b) - y  # (n, e)
        _, dw, db = ac.linear_vjp(x, w, residual / n)
        return 0.5 * float(np.mean(np.sum(residual**2, axis=-1))), [dw, db]

    design = np.hstack([x, np.ones((n, 1))])  # the closed form, with the bias as a column of ones
    solution = np.linalg.lstsq(design, y, rcond=None)[0]
    return loss_and_grad, design, solution[:d], solution[d]


def test_gradient_descent_reaches_the_least_squares_solution():
    loss_and_grad, design, w_star, b_star = least_squares()
    lipschitz = np.linalg.eigvalsh(design.T @ design / len(design)).max()
    (w, b), losses = ac.gradient_descent(loss_and_grad, [np.zeros((3, 2)), np.zeros(2)], steps=1500, lr=1 / lipschitz)
    np.testing.assert_allclose(w, w_star, rtol=0, atol=1e-10)
    np.testing.assert_allclose(b, b_star, rtol=0, atol=1e-10)
    assert np.all(np.diff(losses) <= 1e-15)  # monotone for lr <= 1/L on a quadratic


def test_adam_reaches_the_least_squares_solution():
    loss_and_grad, _, w_star, b_star = least_squares(seed=1)
    (w, b), losses = ac.adam(loss_and_grad, [np.zeros((3, 2)), np.zeros(2)], steps=3000, lr=0.01)
    np.testing.assert_allclose(w, w_star, rtol=0, atol=1e-6)
    np.testing.assert_allclose(b, b_star, rtol=0, atol=1e-6)
    assert losses[-1] < losses[0]


def test_a_wrong_gradient_does_not_reach_the_solution():
    """The check's teeth: gradient descent on a gradient missing the bias term stops elsewhere."""
    loss_and_grad, _, w_star, _ = least_squares()

    def wrong(params):
        loss, (dw, db) = loss_and_grad(params)
        return loss, [dw, np.zeros_like(db)]

    (w, _), _ = ac.gradient_descent(wrong, [np.zeros((3, 2)), np.zeros(2)], steps=1500, lr=0.5)
    assert np.abs(w - w_star).max() > 1e-4


def test_a_step_beyond_two_over_the_curvature_diverges_and_is_reported():
    loss_and_grad, design, _, _ = least_squares()
    lipschitz = np.linalg.eigvalsh(design.T @ design / len(design)).max()
    with np.errstate(over="ignore", invalid="ignore"):
        result = ac.gradient_descent(loss_and_grad, [np.zeros((3, 2)), np.zeros(2)], steps=5000, lr=2.5 / lipschitz)
    t = result.diverged_at
    assert t is not None and 0 < t < 5000 and not np.isfinite(result.losses[t:]).any()
    assert np.isfinite(result.losses[:t]).all() and result.losses[t - 1] > 1e100  # it grew, then stopped
    assert loss_and_grad(result.params)[0] == result.losses[t - 1]  # the parameters of the last finite loss


def test_trainers_do_not_modify_their_inputs_and_are_deterministic():
    loss_and_grad, _, _, _ = least_squares()
    start = [np.zeros((3, 2)), np.zeros(2)]
    first = ac.adam(loss_and_grad, start, steps=20, lr=0.1)
    second = ac.adam(loss_and_grad, start, steps=20, lr=0.1)
    assert all(np.all(p == 0) for p in start)
    assert all(np.array_equal(a, b) for a, b in zip(first[0], second[0]))
    assert np.array_equal(first[1], second[1])
