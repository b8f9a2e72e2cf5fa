"""The vector-Jacobian products against central finite differences, their invariants, and wrong variants.

Independent route: the forward functions of attncore differentiated numerically
(central differences with Richardson extrapolation, float64), never the vjps
themselves.  Each comparison is ``<g, J u>`` (the finite difference of
``<g, f(x + t u)>`` in ``t``) against ``<vjp(g), u>`` for random ``g`` and
``u``, to 1e-7 relative, plus full Jacobians at tiny sizes.  The wrong
variants at the end (a softmax vjp without the row-sum term, attention with
``A`` instead of ``A^T`` in ``dV``...) fail the same comparison, which is what
makes it evidence.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import attncore as ac
from strategies import permutations, seeds
from messages import raises_message

RTOL = 1e-7


def directional(f, args, us, h=1e-3):
    """``d/dt <f(args + t us)>`` at 0, a scalar f; central differences at h and h/2, Richardson-extrapolated (O(h^4))."""

    def central(step):
        plus = f(*[a + step * u for a, u in zip(args, us)])
        minus = f(*[a - step * u for a, u in zip(args, us)])
        return (plus - minus) / (2 * step)

    return (4 * central(h / 2) - central(h)) / 3


def fd_errors(forward, args, grads, g, rng, h=1e-3):
    """Relative errors of ``<grad_i, u_i>`` against the finite difference of ``<g, forward(...)>`` along each argument.

    ``forward(*args)`` returns the output that ``g`` multiplies; ``grads`` are the
    claimed gradients, one per entry of ``args``.  Returns one error per argument
    and one for all arguments moved at once.
    """
    loss = lambda *a: float(np.sum(g * forward(*a)))  # noqa: E731
    errors = []
    directions = [rng.standard_normal(np.shape(a)) for a in args]
    for i in range(len(args)):
        us = [u if j == i else np.zeros(np.shape(a)) for j, (a, u) in enumerate(zip(args, directions))]
        errors.append((directional(loss, args, us, h), float(np.sum(grads[i] * us[i]))))
    errors.append((directional(loss, args, directions, h), sum(float(np.sum(d * u)) for d, u in zip(grads, directions))))
    return [abs(fd - an) / max(abs(fd), abs(an), 1e-300) for fd, an in errors]


def jacobian(forward, x, h=1e-4):
    """The full Jacobian ``d forward(x).ravel() / d x.ravel()`` by central differences."""
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = h
        e = e.reshape(x.shape)
        cols.append(((forward(x + e) - forward(x - e)) / (2 * h)).ravel())
    return np.stack(cols, axis=1)


def vjp_jacobian(vjp, out_shape):
    """The Jacobian assembled row by row from a vjp: row j is vjp(e_j)."""
    rows = []
    for j in range(int(np.prod(out_shape))):
        e = np.zeros(int(np.prod(out_shape)))
        e[j] = 1.0
        rows.append(np.ravel(vjp(e.reshape(out_shape))))
    return np.stack(rows)


@pytest.fixture
def rng():
    return np.random.default_rng(20261127)


# --------------------------------------------------------------------------------------
# Finite differences, function by function.
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_vjp_matches_finite_differences(rng, axis):
    x, g = rng.normal(size=(3, 4, 5)), rng.normal(size=(3, 4, 5))
    errors = fd_errors(lambda x: ac.softmax(x, axis), [x], [ac.softmax_vjp(x, g, axis=axis)], g, rng)
    assert max(errors) < RTOL, errors


def test_softmax_vjp_with_masked_logits_matches_and_is_zero_there(rng):
    x, g = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    x[:, 2] = -np.inf
    dx = ac.softmax_vjp(x, g)
    assert np.all(dx[:, 2] == 0)
    finite = np.isfinite(x)
    # move only the finite logits
    errors = fd_errors(lambda z: ac.softmax(np.where(finite, z, -np.inf)), [np.where(finite, x, 0.0)],
                       [np.where(finite, dx, 0.0)], g, rng)
    assert max(errors) < RTOL, errors


def test_softmax_full_jacobian_is_diag_minus_outer(rng):
    x = rng.normal(size=5)
    a = ac.softmax(x)
    fd = jacobian(ac.softmax, x)
    from_vjp = vjp_jacobian(lambda e: ac.softmax_vjp(x, e), (5,))
    np.testing.assert_allclose(fd, np.diag(a) - np.outer(a, a), rtol=0, atol=1e-9)
    np.testing.assert_allclose(from_vjp, np.diag(a) - np.outer(a, a), rtol=0, atol=1e-15)


def _weights(s, normalize, mask=None):
    return ac.attention_weights(np.zeros(s.shape[:-1] + (1,)), np.zeros((s.shape[-1], 1)), bias=s, scale=1.0,
                                normalize=normalize, mask=mask)


@pytest.mark.parametrize("normalize", ac.NORMALIZERS)
def test_normalize_vjp_matches_finite_differences(rng, normalize):
    s = rng.normal(size=(2, 3, 6))
    s = np.where(np.abs(s) < 0.05, 0.5, s)  # keep relu2 away from its kink at 0
    mask = rng.random((3, 6)) < 0.7
    g = rng.normal(size=s.shape)
    ds = ac.normalize_vjp(s, g, normalize=normalize, mask=mask)
    assert np.all(ds[..., ~mask] == 0)
    errors = fd_errors(lambda s: _weights(s, normalize, mask), [s], [ds], g, rng)
    assert max(errors) < RTOL, errors


def _attention_case(rng, batch=(), n=4, m=5, dk=3, dv=2):
    q, k, v = (rng.normal(size=batch + shape) for shape in ((n, dk), (m, dk), (m, dv)))
    return q, k, v, rng.normal(size=batch + (n, dv))


@pytest.mark.parametrize("options", [
    {},
    {"scale": 0.7},
    {"causal": True},
    {"mask": "random"},
    {"bias": "random", "scale": 1.3},
])
def test_attention_vjp_matches_finite_differences(rng, options):
    q, k, v, g = _attention_case(rng, batch=(2,))
    options = dict(options)
    if options.get("mask") == "random":
        options["mask"] = rng.random((4, 5)) < 0.6
    if options.get("bias") == "random":
        options["bias"] = rng.normal(size=(2, 4, 5))
    grads = ac.attention_vjp(q, k, v, g, **options)
    errors = fd_errors(lambda q, k, v: ac.attention(q, k, v, **options), [q, k, v], grads, g, rng)
    assert max(errors) < RTOL, errors


def test_attention_vjp_sums_over_broadcast_batch_axes(rng):
    """q has batch axes, k and v are shared: dk and dv sum over the batch, and match the FD of the shared argument."""
    q, g = rng.normal(size=(3, 4, 2)), rng.normal(size=(3, 4, 2))
    k, v = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    dq, dk, dv = ac.attention_vjp(q, k, v, g)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    errors = fd_errors(lambda q, k, v: ac.attention(q, k, v), [q, k, v], [dq, dk, dv], g, rng)
    assert max(errors) < RTOL, errors


def test_attention_full_jacobian_at_tiny_size(rng):
    q, k, v, _ = _attention_case(rng, n=2, m=2, dk=2, dv=1)
    packed = np.concatenate([q.ravel(), k.ravel(), v.ravel()])

    def forward(p):
        return ac.attention(p[:4].reshape(2, 2), p[4:8].reshape(2, 2), p[8:].reshape(2, 1))

    fd = jacobian(forward, packed)
    from_vjp = vjp_jacobian(lambda e: np.concatenate([d.ravel() for d in ac.attention_vjp(q, k, v, e)]), (2, 1))
    np.testing.assert_allclose(from_vjp, fd, rtol=0, atol=1e-9)


@pytest.mark.parametrize("normalize", ac.NORMALIZERS)
def test_attention_bias_vjp_matches_finite_differences(rng, normalize):
    q, k, v, g = _attention_case(rng, batch=(2,))
    bias = rng.normal(size=(4, 5))  # shared across the batch: dbias sums over it
    mask = np.ones((4, 5), bool)
    mask[1, 3] = False

    def forward(q, k, v, bias):
        return ac.attention(q, k, v, bias=bias, mask=mask, normalize=normalize)

    grads = ac.attention_bias_vjp(q, k, v, g, bias=bias, mask=mask, normalize=normalize)
    assert grads[3].shape == bias.shape and grads[3][1, 3] == 0
    errors = fd_errors(forward, [q, k, v, bias], grads, g, rng)
    assert max(errors) < RTOL, errors


def test_attention_bias_vjp_softmax_agrees_with_attention_vjp(rng):
    q, k, v, g = _attention_case(rng)
    for a, b in zip(ac.attention_vjp(q, k, v, g, causal=True), ac.attention_bias_vjp(q, k, v, g, causal=True)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def test_relative_bias_vjp_matches_finite_differences(rng):
    table, g = rng.normal(size=(2, 3 + 4 - 1)), rng.normal(size=(2, 3, 4))
    errors = fd_errors(lambda t: ac.relative_bias(3, 4, t), [table], [ac.relative_bias_vjp(g)], g, rng)
    assert max(errors) < RTOL, errors


def test_t5_table_through_attention_matches_finite_differences(rng):
    """A learned T5 bucket table: attention_bias_vjp, relative_bias_vjp, then np.add.at over the buckets."""
    n, buckets = 6, 8
    q, k, v, g = _attention_case(rng, n=n, m=n)
    table = rng.normal(size=buckets)
    offsets = np.arange(-(n - 1), n)
    bucket = ac.t5_relative_bucket(offsets, num_buckets=buckets, max_distance=16)

    def forward(table):
        return ac.attention(q, k, v, bias=ac.relative_bias(n, n, table[bucket]))

    dbias = ac.attention_bias_vjp(q, k, v, g, bias=ac.relative_bias(n, n, table[bucket]))[3]
    dtable = np.zeros(buckets)
    np.add.at(dtable, bucket, ac.relative_bias_vjp(dbias))
    errors = fd_errors(forward, [table], [dtable], g, rng)
    assert max(errors) < RTOL, errors


@pytest.mark.parametrize("convention", ["interleaved", "half"])
def test_rope_vjp_matches_finite_differences(rng, convention):
    x, g = rng.normal(size=(2, 5, 6)), rng.normal(size=(2, 5, 6))
    positions = rng.normal(size=5) * 10
    dx = ac.rope_vjp(g, positions, base=100.0, convention=convention)
    errors = fd_errors(lambda x: ac.rope(x, positions, base=100.0, convention=convention), [x], [dx], g, rng)
    assert max(errors) < RTOL, errors


@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_vjp_matches_finite_differences(rng, affine):
    x, g = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    if not affine:
        dx = ac.layer_norm_vjp(x, g)
        errors = fd_errors(lambda x: ac.layer_norm(x), [x], [dx], g, rng)
    else:
        gamma, beta = rng.normal(size=5), rng.normal(size=5)
        grads = ac.layer_norm_vjp(x, g, gamma=gamma, beta=beta, eps=1e-3)
        errors = fd_errors(lambda x, gm, bt: ac.layer_norm(x, gm, bt, eps=1e-3), [x, gamma, beta], grads, g, rng)
    assert max(errors) < RTOL, errors


def test_linear_vjp_matches_finite_differences(rng):
    x, w, b, g = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5)), rng.normal(size=5), rng.normal(size=(2, 3, 5))
    errors = fd_errors(ac.linear, [x, w, b], ac.linear_vjp(x, w, g), g, rng)
    assert max(errors) < RTOL, errors


def test_ffn_vjp_matches_finite_differences(rng):
    x, w1, b1 = rng.normal(size=(3, 4)), rng.normal(size=(4, 6)), rng.normal(size=6)
    w2, b2, g = rng.normal(size=(6, 4)), rng.normal(size=4), rng.normal(size=(3, 4))
    hidden = x @ w1 + b1
    assert np.abs(hidden).min() > 1e-2  # no pre-activation near the ReLU's kink for this seed
    errors = fd_errors(ac.ffn, [x, w1, b1, w2, b2], ac.ffn_vjp(x, w1, b1, w2, g), g, rng, h=1e-4)
    assert max(errors) < RTOL, errors


@pytest.mark.parametrize("normalize", ac.NORMALIZERS)
def test_shaw_attention_vjp_matches_finite_differences(rng, normalize):
    n, m = 4, 4
    q, k, v, g = _attention_case(rng, batch=(2,), n=n, m=m)
    rel_k, rel_v = rng.normal(size=(n, m, 3)), rng.normal(size=(n, m, 2))
    mask = ac.causal_mask(n)

    def forward(q, k, v, rel_k, rel_v):
        return ac.shaw_attention(q, k, v, rel_k, rel_v, mask=mask, normalize=normalize)

    grads = ac.shaw_attention_vjp(q, k, v, rel_k, rel_v, g, mask=mask, normalize=normalize)
    errors = fd_errors(forward, [q, k, v, rel_k, rel_v], grads, g, rng)
    assert max(errors) < RTOL, errors


def test_shaw_relative_embeddings_vjp_matches_finite_differences(rng):
    table, g = rng.normal(size=(5, 3)), rng.normal(size=(4, 6, 3))
    errors = fd_errors(lambda t: ac.shaw_relative_embeddings(4, 6, t), [table], [ac.shaw_relative_embeddings_vjp(g, 2)],
                       g, rng)
    assert max(errors) < RTOL, errors


@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_attention_vjp_matches_finite_differences(rng, cross):
    d, h = 6, 3
    x, g = rng.normal(size=(2, 4, d)), rng.normal(size=(2, 4, d))
    weights = [rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(4)]
    biases = [rng.normal(size=d) for _ in range(4)]
    context = rng.normal(size=(2, 5, d)) if cross else None
    mask = rng.random((4, 5 if cross else 4)) < 0.7
    names = ["w_q", "w_k", "w_v", "w_o", "b_q", "b_v", "b_o"]  # b_k: see below

    def forward(x, w_q, w_k, w_v, w_o, b_q, b_v, b_o, *ctx):
        return ac.multi_head_attention(x, w_q, w_k, w_v, w_o, h, b_q=b_q, b_k=biases[1], b_v=b_v, b_o=b_o,
                                       context=ctx[0] if cross else None, mask=mask, causal=not cross)

    grads = ac.multi_head_attention_vjp(x, *weights, h, g, **dict(zip(["b_q", "b_k", "b_v", "b_o"], biases)), context=context,
                                        mask=mask, causal=not cross)
    args = [x, *weights, biases[0], biases[2], biases[3]] + ([context] if cross else [])
    order = ["x", *names] + (["context"] if cross else [])
    assert (grads.dcontext is None) == (not cross)
    errors = fd_errors(forward, args, [getattr(grads, "d" + name) for name in order], g, rng)
    assert max(errors) < RTOL, errors
    # a key bias adds q . b_k to a whole row of scores, which the softmax ignores: its gradient is 0
    assert np.abs(grads.db_k).max() < 1e-12 * np.abs(grads.db_q).max()


@pytest.mark.parametrize("placement", ["post", "pre", "branch"])
@pytest.mark.parametrize("bias", [True, False])
def test_transformer_block_vjp_matches_finite_differences(rng, placement, bias):
    params = ac.init_block_params(4, 6, rng, bias=bias)
    x, g = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 4))
    mask = ac.causal_mask(5)
    present = [f for f, v in zip(ac.BlockParams._fields, params) if v is not None and f != "b_k"]  # b_k: gradient 0

    def forward(x, *values):
        return ac.transformer_block(x, params._replace(**dict(zip(present, values))), 2, placement=placement, mask=mask)

    dx, dparams = ac.transformer_block_vjp(x, params, 2, g, placement=placement, mask=mask)
    assert all((getattr(dparams, f) is None) == (getattr(params, f) is None) for f in ac.BlockParams._fields)
    errors = fd_errors(forward, [x, *(getattr(params, f) for f in present)], [dx, *(getattr(dparams, f) for f in present)],
                       g, rng, h=1e-4)
    assert max(errors) < RTOL, errors


# --------------------------------------------------------------------------------------
# Invariants (hypothesis).
# --------------------------------------------------------------------------------------
@given(seed=seeds, n=st.integers(1, 5), m=st.integers(1, 6), axis=st.sampled_from([0, 1, -1]))
def test_softmax_vjp_sums_to_zero_along_its_axis(seed, n, m, axis):
    rng = np.random.default_rng(seed)
    x, g = 3 * rng.normal(size=(n, m)), rng.normal(size=(n, m))
    dx = ac.softmax_vjp(x, g, axis=axis)
    assert np.all(np.abs(dx.sum(axis=axis)) <= 8 * np.finfo(float).eps * max(x.shape) * np.abs(g).max())


@given(seed=seeds, n=st.integers(1, 4), d=st.integers(2, 7))
def test_layer_norm_vjp_has_zero_mean_and_is_orthogonal_to_the_normalised_x(seed, n, d):
    """With eps = 0 a token's scale changes nothing, so dx is orthogonal to x-hat; with eps > 0 the
    inner product is r <g, x-hat> eps / (var + eps), by the formula's last term (checked too)."""
    rng = np.random.default_rng(seed)
    x, g = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    eps = np.finfo(float).eps
    for e in (0.0, 0.5):
        dx, xhat = ac.layer_norm_vjp(x, g, eps=e), ac.layer_norm(x, eps=e)
        var = x.var(axis=-1)
        sigma = np.sqrt(var.min() + e)
        # rounding of x - mean(x) is eps |x|, not eps |x - mean|: divided by sigma it grows as |x| / sigma
        scale = np.abs(g).max() / sigma * (1 + np.abs(x).max() / sigma)
        assert np.all(np.abs(dx.mean(axis=-1)) <= 16 * eps * scale)
        want = (g * xhat).sum(axis=-1) / np.sqrt(var + e) * e / (var + e)
        assert np.all(np.abs((dx * xhat).sum(axis=-1) - want) <= 16 * d * eps * scale)


@given(seed=seeds, n=st.integers(1, 4), m=st.integers(2, 6), causal=st.booleans())
def test_attention_vjp_gives_zero_rows_for_keys_no_query_may_attend(seed, n, m, causal):
    rng = np.random.default_rng(seed)
    q, k, v, g = _attention_case(rng, n=n, m=m)
    mask = rng.random((n, m)) < 0.6
    mask[:, rng.integers(m)] = False  # one key nobody may attend
    dq, dk, dv = ac.attention_vjp(q, k, v, g, mask=mask, causal=causal)
    visible = (mask & ac.causal_mask(n, m)) if causal else mask
    dead = ~visible.any(axis=0)
    assert dead.any()
    assert np.all(dk[dead] == 0) and np.all(dv[dead] == 0)
    # a query that may attend nothing gets no gradient either
    assert np.all(dq[~visible.any(axis=1)] == 0)


@given(seed=seeds, data=st.data())
def test_attention_vjp_is_permutation_equivariant(seed, data):
    rng = np.random.default_rng(seed)
    q, k, v, g = _attention_case(rng, n=4, m=5)
    pq, pk = data.draw(permutations(4)), data.draw(permutations(5))
    dq, dk, dv = ac.attention_vjp(q, k, v, g)
    # permuting the queries (and g with them) permutes dq and leaves dk, dv alone
    pdq, pdk, pdv = ac.attention_vjp(q[pq], k, v, g[pq])
    np.testing.assert_allclose(pdq, dq[pq], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pdk, dk, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pdv, dv, rtol=1e-12, atol=1e-14)
    # permuting the keys with their values permutes dk and dv and leaves dq alone
    pdq, pdk, pdv = ac.attention_vjp(q, k[pk], v[pk], g)
    np.testing.assert_allclose(pdq, dq, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pdk, dk[pk], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pdv, dv[pk], rtol=1e-12, atol=1e-14)


@given(seed=seeds, normalize=st.sampled_from(["softmax", "l2"]))
def test_normalize_vjp_rows_sum_to_zero_for_shift_invariant_normalisations(seed, normalize):
    """Adding c to a row of scores leaves softmax and l2 weights unchanged, so their ds rows sum to 0
    (relu2 and "none" change with c, and their rows do not: see the next test)."""
    rng = np.random.default_rng(seed)
    s, g = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    ds = ac.normalize_vjp(s, g, normalize=normalize)
    assert np.all(np.abs(ds.sum(axis=-1)) <= 1e-14 * (1 + np.abs(g).max()))


def test_normalize_vjp_rows_of_none_and_relu2_are_the_derivative_along_a_row_shift():
    """For "none" and relu2 a shift of the row is not invisible: the row sum of ds is the derivative
    of <g, w(s + c 1)> in c, by finite differences (and it is not 0 here)."""
    rng = np.random.default_rng(3)
    s, g = rng.normal(size=(2, 5)) + 0.5, rng.normal(size=(2, 5))
    for normalize in ("none", "relu2"):
        def shifted(c, normalize=normalize):
            return np.sum(g * _weights(s + c, normalize))
        numeric = (shifted(1e-6) - shifted(-1e-6)) / 2e-6
        sums = ac.normalize_vjp(s, g, normalize=normalize).sum()
        assert abs(sums) > 1e-3 and abs(numeric - sums) < 1e-7 * abs(sums), normalize


# --------------------------------------------------------------------------------------
# Edges and errors specific to the backward pass.
# --------------------------------------------------------------------------------------
def test_layer_norm_vjp_without_a_derivative_is_an_error():
    with raises_message(ValueError, "x", names=["eps"], values=[0], shapes=[(2, 3)], says="variance"):
        ac.layer_norm_vjp(np.ones((2, 3)), np.ones((2, 3)), eps=0.0)
    # with eps > 0 a constant token is differentiable (dx = g / sqrt(eps), centred)
    dx = ac.layer_norm_vjp(np.ones((1, 3)), np.array([[1.0, 2.0, 3.0]]), eps=0.25)
    np.testing.assert_allclose(dx, [[-2.0, 0.0, 2.0]], rtol=1e-15)


def test_gradient_that_overflows_float16_is_an_error():
    with raises_message(ValueError, "dx", dtypes=["float16"], says="overflow", remedy=("shrink", "g")):
        ac.linear_vjp(np.ones((1, 2), np.float16), np.full((2, 2), 300.0, np.float16), np.full((1, 2), 300.0, np.float16))


def test_upstream_gradient_of_the_wrong_shape_names_g():
    with raises_message(ValueError, "g", names=["output"], shapes=["(..., n, v)", (3, 2), (3, 4)]):
        ac.attention_vjp(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)), np.ones((3, 4)))


def test_float32_gradients_agree_with_float64(rng):
    q, k, v, g = _attention_case(rng)
    want = ac.attention_vjp(q, k, v, g)
    got = ac.attention_vjp(*(a.astype(np.float32) for a in (q, k, v, g)))
    for a, b in zip(got, want):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------
# Wrong variants: the same comparisons reject them.
# --------------------------------------------------------------------------------------
def test_softmax_vjp_without_the_row_sum_term_is_rejected(rng):
    x, g = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    wrong = ac.softmax(x) * g  # diag(a) only, missing - a a^T
    errors = fd_errors(ac.softmax, [x], [wrong], g, rng)
    assert min(errors) > 1e-2, errors


def test_attention_vjp_with_a_transposed_in_dv_is_rejected(rng):
    q, k, v, g = _attention_case(rng, n=4, m=4)  # square, so that A g has the shape of v
    dq, dk, _ = ac.attention_vjp(q, k, v, g)
    wrong_dv = ac.attention_weights(q, k) @ g  # A G instead of A^T G
    errors = fd_errors(lambda v: ac.attention(q, k, v), [v], [wrong_dv], g, rng)
    assert min(errors) > 1e-2, errors


def test_attention_vjp_without_the_scale_in_dq_is_rejected(rng):
    q, k, v, g = _attention_case(rng)
    dq, _, _ = ac.attention_vjp(q, k, v, g)
    errors = fd_errors(lambda q: ac.attention(q, k, v), [q], [dq * np.sqrt(q.shape[-1])], g, rng)
    assert min(errors) > 1e-2, errors


def test_layer_norm_vjp_without_the_projection_term_is_rejected(rng):
    x, g = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    r = 1 / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
    wrong = r * (g - g.mean(axis=-1, keepdims=True))  # drops - xhat * mean(g * xhat)
    errors = fd_errors(ac.layer_norm, [x], [wrong], g, rng)
    assert min(errors) > 1e-2, errors


def test_l2_vjp_with_the_softmax_formula_is_rejected(rng):
    s, g = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    w = _weights(s, "l2")
    wrong = w * (g - (g * w).sum(axis=-1, keepdims=True))  # the softmax rule applied to l2 weights
    errors = fd_errors(lambda s: _weights(s, "l2"), [s], [wrong], g, rng)
    assert min(errors) > 1e-2, errors


def test_the_finite_difference_check_is_not_met_by_a_small_perturbation(rng):
    """The comparison's resolution: a relative change of 1e-5 to a correct gradient already fails 1e-7."""
    x, g = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    dx = ac.softmax_vjp(x, g)
    errors = fd_errors(ac.softmax, [x], [dx * (1 + 1e-5)], g, rng)
    assert min(errors) > RTOL, errors
