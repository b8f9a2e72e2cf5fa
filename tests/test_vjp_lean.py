"""The backward passes are lean and keep their dtypes.

Structural checks, by counting calls: each public vjp validates once and recomputes each
sublayer's forward once (attention's scores: once forward, once in the blocked backward).
Dtype checks against an independent route: float16 arguments give exactly the float32
computation of the same values rounded once, each gradient has its parameter's dtype, and sums
over many tokens are right to float32 rounding (the exact sum is known in closed form).
"""

from __future__ import annotations

import numpy as np
import pytest

import attncore as ac
import attncore._attention as attention_module
import attncore._vjp as vjp_module


@pytest.fixture
def calls(monkeypatch):
    """Count the calls of a few steps of the forward: ``calls["attention"]`` and so on."""
    counts = {}

    def spy(module, name):
        original = getattr(module, name)

        def counted(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    for module, name in ((vjp_module, "attention"), (vjp_module, "_standardize"), (vjp_module, "_affine_map"),
                         (attention_module, "_scores"), (vjp_module, "_scores"), (attention_module, "linear"),
                         (attention_module, "multi_head_attention")):
        spy(module, name)
    return counts


@pytest.mark.parametrize("placement, products", [("post", 6), ("pre", 5), ("branch", 6)])
def test_block_vjp_recomputes_each_sublayer_once(calls, placement, products):
    rng = np.random.default_rng(0)
    p, x, g = ac.init_block_params(8, 16, rng), rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 8))
    ac.transformer_block_vjp(x, p, 2, g, placement=placement, mask=ac.causal_mask(5))
    assert calls.get("attention") == 1  # the attention forward, once
    assert calls.get("_scores") == 2  # its scores: once forward, once in the backward (one block of rows)
    assert calls.get("_standardize") == 2  # the two layer norms, once each
    # q, k, v, w_o, w1 and w2 once each; pre-LN's output is never needed, so not its FFN's w2
    assert calls.get("_affine_map") == products
    assert "linear" not in calls and "multi_head_attention" not in calls  # no forward run only to validate


def test_shaw_vjp_computes_its_weights_once(monkeypatch):
    import attncore._shaw as shaw_module

    counts = []
    for module in (shaw_module, vjp_module):  # the forward's weights, and any the backward would form itself
        original = module.attention_weights
        monkeypatch.setattr(module, "attention_weights", lambda *a, f=original, **kw: counts.append(1) or f(*a, **kw))
    rng = np.random.default_rng(4)
    q, k, v, g = rng.normal(size=(3, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 5)), rng.normal(size=(3, 5))
    ac.shaw_attention_vjp(q, k, v, rng.normal(size=(3, 4, 2)), rng.normal(size=(3, 4, 5)), g)
    assert len(counts) == 1  # not once to validate and once more to differentiate


def test_multi_head_vjp_recomputes_attention_once(calls):
    rng = np.random.default_rng(1)
    x, g, w = rng.normal(size=(4, 6)), rng.normal(size=(4, 6)), [rng.normal(size=(6, 6)) for _ in range(4)]
    ac.multi_head_attention_vjp(x, *w, 3, g, causal=True)
    assert calls.get("attention") == 1 and calls.get("_scores") == 2 and calls.get("_affine_map") == 3


def _f16_cases(rng):
    """Each vjp with float16 arguments, as ``(function, args, kwargs)``."""
    r = lambda *s: rng.normal(size=s).astype(np.float16)  # noqa: E731
    p = ac.init_block_params(8, 16, rng, dtype=np.float16)
    return {
        "attention_vjp": (ac.attention_vjp, (r(5, 4), r(6, 4), r(6, 3), r(5, 3)), dict(causal=True)),
        "attention_bias_vjp": (ac.attention_bias_vjp, (r(5, 4), r(6, 4), r(6, 3), r(5, 3)), dict(normalize="l2")),
        "linear_vjp": (ac.linear_vjp, (r(5, 4), r(4, 3), r(5, 3)), {}),
        "ffn_vjp": (ac.ffn_vjp, (r(5, 4), r(4, 8), r(8), r(8, 4), r(5, 4)), {}),
        "layer_norm_vjp": (ac.layer_norm_vjp, (r(5, 4), r(5, 4)), dict(gamma=r(4), beta=r(4))),
        "multi_head_attention_vjp": (ac.multi_head_attention_vjp, (r(5, 8), r(8, 8), r(8, 8), r(8, 8), r(8, 8), 2, r(5, 8)),
                                     dict(b_q=r(8), b_o=r(8))),
        "transformer_block_vjp": (ac.transformer_block_vjp, (r(5, 8), p, 2, r(5, 8)), dict(placement="pre")),
        "shaw_attention_vjp": (ac.shaw_attention_vjp, (r(5, 4), r(6, 4), r(6, 3), r(5, 6, 4), r(5, 6, 3), r(5, 3)), {}),
    }


def _flat(result):
    """The arrays of a vjp's result, in order (a BlockParams flattened, None dropped)."""
    if isinstance(result, np.ndarray):
        return [result]
    out = []
    for item in result:
        out += _flat(item) if isinstance(item, tuple) else [] if item is None else [item]
    return out


def _widen(a):
    if isinstance(a, ac.BlockParams):
        return ac.BlockParams(*(None if f is None else f.astype(np.float32) for f in a))
    return a.astype(np.float32) if isinstance(a, np.ndarray) else a


@pytest.mark.parametrize("name", list(_f16_cases(np.random.default_rng(0))))
def test_float16_is_computed_in_float32_and_rounded_once(name):
    rng = np.random.default_rng(2)
    fn, args, kwargs = _f16_cases(rng)[name]
    half = _flat(fn(*args, **kwargs))
    single = _flat(fn(*map(_widen, args), **{k: _widen(v) for k, v in kwargs.items()}))
    assert len(half) == len(single)
    for i, (h, s) in enumerate(zip(half, single)):
        assert h.dtype == np.float16, (name, i)
        # the float32 route rounded once; float16 at every step would differ in the last bits
        assert np.array_equal(h, s.astype(np.float16)), (name, i, np.abs(h.astype(np.float32) - s).max())


def test_each_gradient_has_its_parameters_dtype():
    rng = np.random.default_rng(3)
    x, g = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    dx, dgamma, dbeta = ac.layer_norm_vjp(x, g, gamma=np.ones(6, np.float32), beta=np.zeros(6, np.float16))
    assert (dx.dtype, dgamma.dtype, dbeta.dtype) == (np.float64, np.float32, np.float16)
    q = rng.normal(size=(3, 2)).astype(np.float16)
    assert ac.attention_bias_vjp(q, q, q, q).dbias.dtype == np.float16  # no bias: the scores' dtype
    p = ac.init_block_params(6, 8, rng, dtype=np.float32)
    dx, dp = ac.transformer_block_vjp(x.astype(np.float32), p, 2, g.astype(np.float32))
    assert dx.dtype == np.float32 and all(f.dtype == np.float32 for f in dp if f is not None)
    dx, dw, db = ac.linear_vjp(x.astype(np.float32), rng.normal(size=(6, 2)), rng.normal(size=(4, 2)).astype(np.float32))
    assert (dx.dtype, dw.dtype, db.dtype) == (np.float32, np.float64, np.float64)


def test_float32_sums_over_262144_tokens_are_right_to_rounding():
    """0.1 summed over 512 x 512 tokens is 26214.4 (in float32, 0.1 is 0.100000001490116...):
    accumulated in float32 along the tokens it drifts to about 26149."""
    tokens = 512 * 512
    tenth = np.float32(0.1)
    exact = tokens * float(tenth)  # the sum of the float32 numbers, exact in float64
    x, g = np.ones((512, 512, 2), np.float32), np.full((512, 512, 3), tenth, np.float32)
    naive = g.reshape(-1, 3).sum(axis=0)  # float32 accumulated along the tokens: 26149.6
    assert np.all(np.abs(naive.astype(np.float64) - exact) > 50)  # what accumulating in float32 would give
    dx, dw, db = ac.linear_vjp(x, np.ones((2, 3), np.float32), g)
    for got in (dw, db):
        assert np.all(np.abs(got.astype(np.float64) - exact) <= np.spacing(np.float32(exact)))
    z = np.tile(np.array([1.0, -1.0], np.float32), (512, 512, 1))  # normalised: +-1 (up to eps)
    dx, dgamma, dbeta = ac.layer_norm_vjp(z, np.full(z.shape, tenth), gamma=np.ones(2, np.float32), eps=0.0)
    assert np.abs(dbeta.astype(np.float64) - exact).max() <= np.spacing(np.float32(exact))
    assert np.abs(np.abs(dgamma.astype(np.float64)) - exact).max() <= np.spacing(np.float32(exact))


# --------------------------------------------------------------------------------------
# The trainers: a loss of the wrong type is a TypeError at the first step; a run that
# diverges stops and is reported, so a sweep of learning rates can include diverging rates.
# --------------------------------------------------------------------------------------
def _quadratic(p):
    return float(np.sum((p[0] - 3) ** 2)), [2 * (p[0] - 3)]


@pytest.mark.parametrize("trainer", [ac.gradient_descent, ac.adam])
@pytest.mark.parametrize("loss", ["1.0", 1.0 + 0j, np.ones(2), True, None, [1.0]])
def test_trainers_reject_a_loss_of_the_wrong_type_at_the_first_step(trainer, loss):
    seen = []

    def loss_and_grad(p):
        seen.append(1)
        return loss, [np.zeros(2)]

    with pytest.raises(TypeError, match="loss") as error:
        trainer(loss_and_grad, [np.zeros(2)], steps=5, lr=0.1)
    assert len(seen) == 1 and type(loss).__name__ in str(error.value)  # at the first step, naming what came back


@pytest.mark.parametrize("trainer", [ac.gradient_descent, ac.adam])
@pytest.mark.parametrize("grads, kind", [("0.0", TypeError), (np.zeros(2), TypeError), ([np.zeros(2) + 1j], TypeError),
                                         (0.0, TypeError), ([np.zeros(3)], ValueError)])
def test_trainers_reject_gradients_of_the_wrong_type_at_the_first_step(trainer, grads, kind):
    with pytest.raises(kind, match="gradient"):
        trainer(lambda p: (1.0, grads), [np.zeros(2)], steps=5, lr=0.1)


@pytest.mark.parametrize("trainer", [ac.gradient_descent, ac.adam])
def test_trainers_reject_a_result_that_is_not_a_pair(trainer):
    with pytest.raises(TypeError, match="pair"):
        trainer(lambda p: 1.0, [np.zeros(2)], steps=5, lr=0.1)


def test_a_learning_rate_sweep_includes_diverging_rates():
    """(p - 3)^2 has curvature 2: gradient descent converges for lr < 1 and diverges beyond."""
    runs = {}
    with np.errstate(over="ignore", invalid="ignore"):  # the loss itself overflows
        for lr in (0.1, 0.5, 0.99, 1.2, 1.5, 10.0):
            runs[lr] = ac.gradient_descent(_quadratic, [np.zeros(1)], steps=3000, lr=lr)
    assert all(runs[lr].diverged_at is None and abs(runs[lr].params[0][0] - 3) < 1e-6 for lr in (0.1, 0.5, 0.99))
    for lr in (1.2, 1.5, 10.0):
        t = runs[lr].diverged_at
        assert t is not None and np.isfinite(runs[lr].losses[:t]).all() and not np.isfinite(runs[lr].losses[t:]).any()
        loss_at_result = _quadratic(runs[lr].params)[0]  # the parameters of the last finite loss, not the next ones
        assert np.isfinite(loss_at_result) and loss_at_result == runs[lr].losses[t - 1]
    assert runs[10.0].diverged_at < runs[1.5].diverged_at < runs[1.2].diverged_at  # the faster, the sooner


def test_a_non_finite_gradient_during_training_stops_the_run_too():
    calls = []

    def loss_and_grad(p):
        calls.append(1)
        return 1.0, [np.full(2, np.inf if len(calls) == 4 else 1.0)]

    result = ac.adam(loss_and_grad, [np.zeros(2)], steps=10, lr=0.1)
    assert result.diverged_at == 3 and len(calls) == 4 and np.isfinite(result.params[0]).all()
    assert np.allclose(result.params[0], -0.2)  # where losses[2], the last finite one, was computed: two steps of lr
    params, losses = result  # unpacks as before
    assert losses.shape == (10,)


def test_a_loss_that_is_not_finite_at_the_start_is_an_error():
    with pytest.raises(ValueError, match="starting point"):
        ac.gradient_descent(lambda p: (np.nan, [np.zeros(2)]), [np.zeros(2)], steps=3, lr=0.1)
