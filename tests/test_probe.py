"""The position probe, Shaw's relative attention and the normalisers of chapter 3."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from attncore import NORMALIZERS, attention, attention_weights, causal_mask, toeplitz
from attncore._probe import (
    ABSOLUTE_SCHEMES,
    SCORE_ONLY_SCHEMES,
    heldout_readout,
    linear_readout,
    position_signal,
    probe_floor,
    probe_hidden_states,
    rounding_floor,
)
from attncore._shaw import shaw_attention, shaw_relative_embeddings
from strategies import lengths, normal, seeds, widths
from messages import raises_message

SMALL = dict(d=8, num_heads=2, d_ff=16)


def floor_of(n, *, layers=2, d=32, d_ff=64, special_tokens=False):
    """The float64 rounding floor of a probe model of these sizes (longest sum: width, FFN or keys)."""
    return rounding_floor(np.float64, sublayers=2 * layers, terms=max(d, d_ff, n + 2 * special_tokens))


def blind(h, n, **sizes):
    """No position signal above rounding."""
    return position_signal(h) <= floor_of(n, **sizes)


def signal(h, n, **sizes):
    """A position signal a million times above rounding."""
    return position_signal(h) > 1e6 * floor_of(n, **sizes)


# ---- the normalisers: the row property each one documents -------------------------------


@given(seed=seeds, n=lengths, m=lengths, k=widths, causal=st.booleans())
def test_row_property_of_each_normaliser(seed, n, m, k, causal):
    rng = np.random.default_rng(seed)
    q, kk = normal(rng, (n, k), np.float64), normal(rng, (m, k), np.float64)
    mask = causal_mask(n, m) if causal else np.ones((n, m), dtype=bool)
    s = q @ kk.T / math.sqrt(k)  # independent route: the scores by hand
    kept = mask.any(axis=-1)
    a = attention_weights(q, kk, mask=mask, normalize="softmax")
    np.testing.assert_allclose(a.sum(axis=-1)[kept], 1.0, rtol=1e-12)
    a = attention_weights(q, kk, mask=mask, normalize="l2")
    np.testing.assert_allclose(np.linalg.norm(a, axis=-1)[kept], 1.0, rtol=1e-12)
    a = attention_weights(q, kk, mask=mask, normalize="relu2")
    np.testing.assert_allclose(a, np.where(mask, np.maximum(s, 0) ** 2 / m, 0.0), rtol=1e-10, atol=1e-14)
    a = attention_weights(q, kk, mask=mask, normalize="none")
    np.testing.assert_allclose(a, np.where(mask, np.exp(s), 0.0), rtol=1e-10)


@pytest.mark.parametrize("normalize", NORMALIZERS)
@given(seed=seeds, n=lengths, k=widths, causal=st.booleans())
def test_identical_values_give_row_sum_times_value(normalize, seed, n, k, causal):
    # The lemma behind the theorem: with every value equal to v, output row i is (sum_j A_ij) v.
    rng = np.random.default_rng(seed)
    q, kk = normal(rng, (n, k), np.float64), normal(rng, (n, k), np.float64)
    v = np.tile(normal(rng, (1, 3), np.float64), (n, 1))
    mask = causal_mask(n) if causal else None
    bias = normal(rng, (n, n), np.float64)
    out = attention(q, kk, v, mask=mask, bias=bias, normalize=normalize)
    a = attention_weights(q, kk, mask=mask, bias=bias, normalize=normalize)
    np.testing.assert_allclose(out, a.sum(axis=-1, keepdims=True) * v[0], rtol=1e-10, atol=1e-12)


def test_l2_with_equal_scores_gives_sqrt_of_key_count():
    # every score equal: each row is 1/sqrt(#keys), so its sum is sqrt(#keys)
    n = 7
    q = np.ones((n, 2))
    a = attention_weights(q, q, normalize="l2")
    np.testing.assert_allclose(a.sum(axis=-1), math.sqrt(n))
    a = attention_weights(q, q, normalize="l2", mask=causal_mask(n))
    np.testing.assert_allclose(a.sum(axis=-1), np.sqrt(np.arange(1, n + 1)))


# ---- Shaw et al. (2018) -----------------------------------------------------------------


def shaw_loop(q, k, v, table_k, table_v, clip, mask=None, normalize="softmax"):
    """Shaw attention for one sequence, from the definition with loops."""
    n, m = len(q), len(k)
    out = np.zeros((n, v.shape[1]))
    for i in range(n):
        keep = [j for j in range(m) if mask is None or mask[i][j]]
        r = {j: min(max(j - i, -clip), clip) + clip for j in keep}
        e = {j: float(q[i] @ (k[j] + table_k[r[j]])) / math.sqrt(q.shape[1]) for j in keep}
        if normalize == "relu2":  # relu(e)^2 / m, m the number of key positions
            w = {j: max(e[j], 0.0) ** 2 / m for j in keep}
        else:
            w = {j: math.exp(e[j]) for j in keep}
            if normalize == "softmax":
                total = math.fsum(w.values())
                w = {j: w[j] / total for j in keep}
            elif normalize == "l2":
                norm = math.sqrt(math.fsum(x * x for x in w.values()))
                w = {j: w[j] / norm for j in keep}
        for j in keep:
            out[i] += w[j] * (v[j] + table_v[r[j]])
    return out


@pytest.mark.parametrize("normalize", NORMALIZERS)
@given(seed=seeds, n=lengths, m=lengths, k=widths, clip=st.integers(0, 4), causal=st.booleans())
def test_shaw_matches_loop(normalize, seed, n, m, k, clip, causal):
    rng = np.random.default_rng(seed)
    q, kk, v = (normal(rng, (r, k), np.float64) for r in (n, m, m))
    tk, tv = normal(rng, (2 * clip + 1, k), np.float64), normal(rng, (2 * clip + 1, k), np.float64)
    mask = causal_mask(max(n, m))[:n, :m] if causal else None
    if mask is not None and not mask.any(axis=-1).all():
        mask = None
    rel_k, rel_v = shaw_relative_embeddings(n, m, tk), shaw_relative_embeddings(n, m, tv)
    got = shaw_attention(q, kk, v, rel_k, rel_v, mask=mask, normalize=normalize)
    want = shaw_loop(q, kk, v, tk, tv, clip, mask, normalize)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@given(seed=seeds, n=lengths, k=widths)
def test_shaw_with_zero_tables_is_attention(seed, n, k):
    rng = np.random.default_rng(seed)
    q, kk, v = (normal(rng, (2, n, k), np.float64) for _ in range(3))
    z = np.zeros((n, n, k))
    np.testing.assert_allclose(shaw_attention(q, kk, v, z, z), attention(q, kk, v), rtol=1e-12, atol=1e-14)


def test_shaw_embeddings_depend_on_offset_only():
    table = np.random.default_rng(0).normal(size=(7, 2))
    a = shaw_relative_embeddings(9, 9, table)
    np.testing.assert_array_equal(a[1:, 1:], a[:-1, :-1])  # constant along diagonals
    np.testing.assert_array_equal(a[0, 8], table[6])  # clipped at +K = 3
    np.testing.assert_array_equal(a[8, 0], table[0])  # clipped at -K


def test_shaw_errors():
    with raises_message(ValueError, "table", shapes=[(4, 2)], says="odd"):
        shaw_relative_embeddings(3, 3, np.zeros((4, 2)))
    with raises_message(ValueError, "rel_v", names=["q", "v"], shapes=[(3, 3, 4), (3, 3, 2)]):
        shaw_attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 4)), np.zeros((3, 3, 2)), np.zeros((3, 3, 2)))
    with raises_message(TypeError, "n", values=[2.5], says="integer"):
        shaw_relative_embeddings(2.5, 3, np.zeros((3, 2)))
    bad_v = np.ones((3, 4))
    bad_v[1, 2] = np.nan
    with raises_message(ValueError, "v", values=["nan"], says="finite"):
        shaw_attention(np.ones((3, 2)), np.ones((3, 2)), bad_v, np.zeros((3, 3, 2)), np.zeros((3, 3, 4)))


# ---- the theorem and the probe ----------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    seed=seeds,
    n=st.integers(1, 9),
    layers=st.integers(0, 3),
    scheme=st.sampled_from(SCORE_ONLY_SCHEMES),
    causal=st.booleans(),
)
def test_score_only_schemes_with_softmax_give_identical_states(seed, n, layers, scheme, causal):
    h = probe_hidden_states(n, np.random.default_rng(seed), scheme=scheme, layers=layers, causal=causal, **SMALL)
    assert h.shape == (n, 8)
    np.testing.assert_allclose(h, np.broadcast_to(h[0], h.shape), rtol=0, atol=1e-10)


@settings(max_examples=20, deadline=None)
@given(seed=seeds, normalize=st.sampled_from(NORMALIZERS), scheme=st.sampled_from(["none", "alibi"]))
def test_symmetric_bias_cannot_tell_i_from_mirror(seed, normalize, scheme):
    # bidirectional, bias a function of |j - i|: token i and token n-1-i end in the same state
    h = probe_hidden_states(8, np.random.default_rng(seed), scheme=scheme, normalize=normalize, **SMALL)
    np.testing.assert_allclose(h, h[::-1], rtol=0, atol=1e-9)
    assert blind(h, 8, d=8, d_ff=16)


@pytest.mark.parametrize("scheme", ABSOLUTE_SCHEMES + ("shaw",))
@pytest.mark.parametrize("causal", [False, True])
def test_absolute_and_shaw_pass_the_probe(scheme, causal):
    h = probe_hidden_states(12, np.random.default_rng(3), scheme=scheme, causal=causal)
    assert signal(h, 12)


@pytest.mark.parametrize("remedy", ["l2", "relu2", "none", "urpe", "cls"])
@pytest.mark.parametrize("scheme", ["t5", "rope"])
def test_remedies_pass_with_asymmetric_relative_schemes(remedy, scheme):
    kw = {"normalize": remedy} if remedy in NORMALIZERS else {}
    kw["urpe"] = remedy == "urpe"
    kw["special_tokens"] = remedy == "cls"
    h = probe_hidden_states(12, np.random.default_rng(4), scheme=scheme, **kw)
    assert signal(h, 12, special_tokens=remedy == "cls")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("normalize", NORMALIZERS)
def test_causal_model_without_positions(normalize, seed):
    # Causal mask, no position scheme: the softmax stays at the floor, while l2, relu2 (with the
    # package's relu(s)^2 / m convention, m the number of key positions) and no denominator pass.
    h = probe_hidden_states(12, np.random.default_rng(seed), scheme="none", normalize=normalize, causal=True)
    assert blind(h, 12) if normalize == "softmax" else signal(h, 12)


@given(seed=seeds, n=st.integers(2, 9), k=widths)
def test_relu2_with_per_row_divisor_keeps_identical_rows_causal(seed, n, k):
    # relu(s)^2 / (i + 1) on row i (i + 1 visible keys): with identical tokens every score is
    # the same s, so each row sums to relu(s)^2 and the outputs are identical; the package's
    # relu(s)^2 / n makes row i sum to (i + 1) relu(s)^2 / n instead.
    rng = np.random.default_rng(seed)
    x = np.tile(normal(rng, (1, k), np.float64), (n, 1))
    q, kk, v = x @ normal(rng, (k, k), np.float64), x @ normal(rng, (k, k), np.float64), x
    per_row = n / np.arange(1.0, n + 1)[:, None] * np.ones((n, n))  # turns 1/n into 1/(i + 1)
    out = attention(q, kk, v, mask=causal_mask(n), normalize="relu2", reweight=per_row)
    np.testing.assert_allclose(out, np.broadcast_to(out[0], out.shape), rtol=1e-10, atol=1e-12)
    s = float(q[0] @ kk[0]) / math.sqrt(k)
    sums = attention_weights(q, kk, mask=causal_mask(n), normalize="relu2").sum(axis=-1)
    np.testing.assert_allclose(sums, np.arange(1, n + 1) * max(s, 0.0) ** 2 / n, rtol=1e-9, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(seed=seeds)
def test_symmetric_urpe_on_symmetric_bias_stays_at_floor(seed):
    # exercise "URPE with a symmetric C": the whole model commutes with reversal
    h = probe_hidden_states(8, np.random.default_rng(seed), scheme="alibi", urpe="symmetric", **SMALL)
    np.testing.assert_allclose(h, h[::-1], rtol=0, atol=1e-9)
    assert blind(h, 8, d=8, d_ff=16)
    h = probe_hidden_states(8, np.random.default_rng(seed), scheme="alibi", urpe=True, **SMALL)
    assert not np.allclose(h, h[::-1], rtol=0, atol=1e-9)  # a generic C breaks the symmetry


def test_probe_is_deterministic_and_drops_special_tokens():
    a = probe_hidden_states(5, np.random.default_rng(7), scheme="t5", special_tokens=True, **SMALL)
    b = probe_hidden_states(5, np.random.default_rng(7), scheme="t5", special_tokens=True, **SMALL)
    assert a.shape == (5, 8)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs, error, name, facts",
    [
        (dict(scheme="xpos"), ValueError, "scheme", dict(values=["xpos"], options=["none", "sinusoidal", "rope", "shaw"])),
        (dict(normalize="l1"), ValueError, "normalize", dict(values=["l1"], options=["softmax", "l2", "relu2", "none"])),
        (dict(d=8, num_heads=3), ValueError, "num_heads", dict(names=["d"], values=[8, 3], says="divisible")),
        (dict(scheme="rope", d=6, num_heads=2), ValueError, "rope", dict(names=["d", "num_heads"], values=[3], says="even")),
        (dict(scheme="shaw", urpe=True), ValueError, "urpe", dict(names=["scheme"], values=["shaw"])),
        (dict(urpe="yes"), ValueError, "urpe", dict(values=["yes"], options=["False", "True", "symmetric"])),
        (dict(layers=-1), ValueError, "layers", dict(values=[0, -1], says="out of range")),
        (dict(layers=1.5), TypeError, "layers", dict(values=[1.5], says="integer")),
    ],
)
def test_probe_errors(kwargs, error, name, facts):
    with raises_message(error, name, **facts):
        probe_hidden_states(4, np.random.default_rng(0), **kwargs)
    with raises_message(TypeError, "rng", options=["numpy.random.Generator"]):
        probe_hidden_states(4, 0)


# ---- the readout ------------------------------------------------------------------------


@given(seed=seeds, n=st.integers(8, 14), d=st.integers(1, 6))
def test_readout_matches_normal_equations(seed, n, d):
    # independent route: least squares with an explicit intercept column, via the normal equations
    rng = np.random.default_rng(seed)
    f = normal(rng, (n, d), np.float64)
    y = np.arange(1.0, n + 1)
    design = np.column_stack([f, np.ones(n)])
    if np.linalg.cond(design) > 1e6:
        return
    coef = np.linalg.solve(design.T @ design, design.T @ y)
    pred, mse = linear_readout(f, y)
    np.testing.assert_allclose(pred, design @ coef, rtol=1e-7, atol=1e-7)
    assert math.isclose(mse, float(np.mean((design @ coef - y) ** 2)), rel_tol=1e-6, abs_tol=1e-9)


@given(n=st.integers(1, 50))
def test_floor_is_variance_and_constant_features_hit_it(n):
    y = np.arange(1.0, n + 1)
    assert math.isclose(probe_floor(n), float(np.var(y)), rel_tol=1e-12, abs_tol=1e-12)
    _, mse = linear_readout(np.full((n, 3), 2.5), y)
    assert math.isclose(mse, probe_floor(n), rel_tol=1e-12, abs_tol=1e-12)


@settings(deadline=None)
@given(seed=seeds, n=st.integers(6, 16), d=st.integers(1, 5), shift=st.floats(-1e3, 1e3))
def test_readout_unchanged_by_adding_a_constant(seed, n, d, shift):
    # an affine readout absorbs a constant added to every feature; one feature direction is
    # small (1e-6) but genuine, and must survive the shift
    rng = np.random.default_rng(seed)
    y = np.arange(1.0, n + 1)
    f = np.column_stack([normal(rng, (n, d), np.float64), 1e-6 * normal(rng, (n, 1), np.float64)])
    _, mse = linear_readout(f, y)
    _, shifted = linear_readout(f + shift, y)
    # least squares loses about cond(design) * eps of relative accuracy; the shift makes the
    # design ill-conditioned (up to ~1e13 here), while a readout that did not absorb the
    # constant would be off by order 1
    cond = np.linalg.cond(np.column_stack([f + shift, np.ones(n)]))
    rel = max(1e-6, cond * np.finfo(np.float64).eps)
    assert math.isclose(mse, shifted, rel_tol=rel, abs_tol=1e-9 * probe_floor(n))


def test_rounding_noise_changes_no_verdict_and_small_noise_fools_only_the_in_sample_fit():
    # States the theorem makes identical (T5 + softmax), times (1 + eta z).  At eta = 4 eps the
    # signal stays under the rounding floor and both readouts stay at their baselines.  At
    # eta = 1e-9 the in-sample least-squares fit (33 parameters, 16 positions) reads the noise
    # as positions, which is why it is not evidence; the held-out readout stays above a quarter
    # of its baseline (pure noise carries no order), and the signal reports a gap of the
    # noise's size.
    y = np.arange(1.0, 17.0)
    train = np.arange(16) % 2 == 0
    for seed in range(3):
        h = probe_hidden_states(16, np.random.default_rng(seed), scheme="t5")
        z = np.random.default_rng(10 + seed).standard_normal(h.shape)
        tiny = h * (1 + 4 * np.finfo(np.float64).eps * z)
        assert blind(tiny, 16)
        assert math.isclose(linear_readout(tiny, y)[1], probe_floor(16), rel_tol=1e-9)
        mse, base = heldout_readout(tiny, y, train)
        assert math.isclose(mse, base, rel_tol=1e-9)
        small = h * (1 + 1e-9 * z)
        assert linear_readout(small, y)[1] < 1e-6 * probe_floor(16)
        mse, base = heldout_readout(small, y, train)
        assert mse > 0.25 * base
        assert 1e-11 < position_signal(small) < 1e-8


def test_readout_errors():
    with raises_message(ValueError, "targets", names=["features"], shapes=[(4,), (3,), (4, 2)]):
        linear_readout(np.ones((4, 2)), np.ones(3))
    with raises_message(ValueError, "rcond", values=[0.0, "(0, 1)"]):
        linear_readout(np.ones((4, 2)), np.ones(4), rcond=0.0)
    with raises_message(TypeError, "rcond", values=["str"], says="real"):
        linear_readout(np.ones((4, 2)), np.ones(4), rcond="tiny")
    with raises_message(ValueError, "n", values=[1, 0], says="out of range"):
        probe_floor(0)


def test_toeplitz_reweight_breaks_row_sums():
    # URPE: a softmax row times a Toeplitz row sums to a weighted average of C's diagonals
    n = 6
    a = attention_weights(np.ones((n, 2)), np.ones((n, 2)))  # uniform rows
    c = toeplitz(np.arange(2 * n - 1, dtype=float))
    np.testing.assert_allclose((a * c).sum(axis=-1), [(n - 1) - i + (n - 1) / 2 for i in range(n)])


# ---- the position signal, the rounding floor and the held-out readout --------------------


@given(seed=seeds, n=st.integers(2, 9), d=st.integers(1, 5))
def test_position_signal_matches_a_loop(seed, n, d):
    rng = np.random.default_rng(seed)
    h = normal(rng, (n, d), np.float64)
    gaps = [math.dist(h[a], h[b]) for a in range(n) for b in range(n) if a != b]
    size = max(math.hypot(*row) for row in h)
    expected = min(gaps) / size if size > 0 else 0.0
    assert math.isclose(position_signal(h), expected, rel_tol=1e-12, abs_tol=0)


@given(seed=seeds, n=st.integers(2, 9), scale=st.floats(1e-3, 1e3))
def test_position_signal_is_scale_free_and_zero_for_repeated_rows(seed, n, scale):
    rng = np.random.default_rng(seed)
    h = normal(rng, (n, 3), np.float64)
    assert math.isclose(position_signal(scale * h), position_signal(h), rel_tol=1e-9)
    h[-1] = h[0]  # two equal states: a readout cannot tell them apart
    assert position_signal(h) == 0.0


def test_rounding_floor_formula_and_dtypes():
    assert rounding_floor(np.float64, sublayers=4, terms=64) == 2 * 5 * 64 * np.finfo(np.float64).eps
    assert rounding_floor(np.float32, sublayers=0, terms=1) == 2 * np.finfo(np.float32).eps
    with raises_message(TypeError, "dtype", dtypes=["int64"], says="real"):
        rounding_floor(np.int64, sublayers=1, terms=1)
    with raises_message(ValueError, "terms", values=[1, 0], says="out of range"):
        rounding_floor(np.float64, sublayers=1, terms=0)
    with raises_message(ValueError, "sublayers", values=[0, -1], says="out of range"):
        rounding_floor(np.float64, sublayers=-1, terms=1)


@settings(max_examples=30, deadline=None)
@given(seed=seeds, layers=st.integers(0, 3), scheme=st.sampled_from(SCORE_ONLY_SCHEMES), causal=st.booleans())
def test_identical_states_stay_under_the_rounding_floor(seed, layers, scheme, causal):
    # the floor is a first-order estimate; this checks it holds for the probe models it is used on
    h = probe_hidden_states(9, np.random.default_rng(seed), scheme=scheme, layers=layers, causal=causal, **SMALL)
    assert blind(h, 9, layers=layers, d=8, d_ff=16)


@given(seed=seeds, n=st.integers(6, 14), d=st.integers(1, 3))
def test_heldout_readout_matches_normal_equations_on_the_training_rows(seed, n, d):
    # independent route: fit with an explicit intercept column on the training rows by the
    # normal equations, predict the held-out rows, score them and the training-mean baseline
    rng = np.random.default_rng(seed)
    f = normal(rng, (n, d), np.float64)
    y = normal(rng, (n,), np.float64)
    train = np.arange(n) % 3 != 0
    design = np.column_stack([f, np.ones(n)])
    if np.linalg.cond(design[train]) > 1e6:
        return
    coef = np.linalg.solve(design[train].T @ design[train], design[train].T @ y[train])
    mse, base = heldout_readout(f, y, train)
    expected = float(np.mean((design[~train] @ coef - y[~train]) ** 2))
    assert math.isclose(mse, expected, rel_tol=1e-6, abs_tol=1e-9)
    assert math.isclose(base, float(np.mean((y[train].mean() - y[~train]) ** 2)), rel_tol=1e-12, abs_tol=1e-15)


def test_heldout_readout_of_equal_states_is_the_baseline_and_errors():
    y = np.arange(1.0, 9.0)
    train = np.arange(8) % 2 == 0
    mse, base = heldout_readout(np.full((8, 3), 2.0), y, train)
    assert mse == base == float(np.mean((4.0 - y[~train]) ** 2))
    with raises_message(TypeError, "train", dtypes=["int64"], shapes=[(8,)], says="boolean"):
        heldout_readout(np.ones((8, 1)), y, train.astype(int))
    with raises_message(ValueError, "train", says="held out"):
        heldout_readout(np.ones((8, 1)), y, np.ones(8, bool))
    with raises_message(ValueError, "train", names=["targets"], shapes=[(8,), (7,)]):
        heldout_readout(np.ones((8, 1)), y, np.ones(7, bool))
    with raises_message(ValueError, "states", shapes=[(1, 3)], says="at least two"):
        position_signal(np.ones((1, 3)))
