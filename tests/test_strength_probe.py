"""attncore.probe: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np
import pytest

from attncore._probe import linear_readout
from messages import raises_message

# Four centred rows whose two columns are orthogonal, of norms 2 and 1: the singular values
# of the (already centred) features are exactly 2 and 1, and so is the spectral norm 2.
F = np.array([[1.0, 0.5], [-1.0, 0.5], [1.0, -0.5], [-1.0, -0.5]])
SECOND = F[:, 1] / np.linalg.norm(F[:, 1])   # unit direction of the smaller singular value


def test_readout_errors_name_the_argument():
    y = np.arange(4.0)
    with raises_message(TypeError, "features"):
        linear_readout(F > 0, y)
    with raises_message(ValueError, "features", shapes=["(n, d)"]):
        linear_readout(np.arange(4.0), y)
    with raises_message(TypeError, "targets"):
        linear_readout(F, y > 1)
    with raises_message(ValueError, "targets", shapes=["(4,)"]):
        linear_readout(F, np.arange(5.0))
    with raises_message(TypeError, "rcond", values=["str"], says="real"):
        linear_readout(F, y, rcond="0.1")
    with raises_message(ValueError, "rcond"):
        linear_readout(F, y, rcond=1.0)  # the cut-off must lie strictly inside (0, 1)


def test_readout_cutoff_uses_the_spectral_norm():
    # G = F / 4 has singular values 0.5 and 0.25, spectral norm 0.5, Frobenius norm 0.559.
    # With rcond = 0.45 the cut-off is 0.225 < 0.25: both directions are kept and a target
    # along the second one is read exactly (a cut-off from the Frobenius norm, 0.2516, or from
    # any norm above 0.556, would drop it and predict the mean)
    g = F / 4
    y = 3.0 * SECOND + 5.0
    pred, mse = linear_readout(g, y, rcond=0.45)
    np.testing.assert_allclose(pred, y, rtol=0, atol=1e-12)
    assert mse < 1e-24


def test_readout_drops_a_singular_value_exactly_at_the_cutoff():
    sv = np.linalg.svd(F - F.mean(axis=0), compute_uv=False)
    if not (sv[1] == 0.5 * np.linalg.norm(F, 2)):
        pytest.skip("this LAPACK does not return the singular values 2 and 1 exactly")
    # "at most rcond * ||F||_2 counts as zero": the direction is dropped, the prediction is
    # the mean and the error the variance of the targets
    y = 3.0 * SECOND + 5.0
    pred, mse = linear_readout(F, y, rcond=0.5)
    np.testing.assert_allclose(pred, np.full(4, 5.0), rtol=0, atol=1e-12)
    assert abs(mse - np.var(y)) < 1e-12


def test_readout_of_features_without_columns_is_the_mean():
    y = np.arange(4.0)
    pred, mse = linear_readout(np.zeros((4, 0)), y)
    np.testing.assert_array_equal(pred, np.full(4, 1.5))
    assert mse == np.var(y)


# ---- the random probe model ---------------------------------------------------------------------

from attncore._positional import sinusoidal_encoding  # noqa: E402
from attncore._probe import probe_hidden_states  # noqa: E402


@pytest.mark.parametrize("name", ["n", "d", "d_ff", "num_heads"])
def test_probe_model_errors_name_the_count(name):
    sizes = dict(d=4, d_ff=4, num_heads=1)
    sizes[name] = 0
    n = sizes.pop("n", 3)
    with raises_message(ValueError, name):
        probe_hidden_states(n, np.random.default_rng(0), **sizes)


def test_probe_model_other_errors():
    rng = np.random.default_rng(0)
    with raises_message(ValueError, "shaw_clip"):
        probe_hidden_states(3, rng, scheme="shaw", shaw_clip=-1)
    with raises_message(TypeError, "rng", values=["int"], options=["numpy.random.Generator"]):
        probe_hidden_states(3, 0)
    with raises_message(ValueError, "scheme", values=["absolute"], options=["none", "sinusoidal", "learned", "t5", "alibi", "rope", "shaw"]):
        probe_hidden_states(3, rng, scheme="absolute")
    with raises_message(ValueError, "normalize", values=["sparsemax"], options=["softmax", "l2", "relu2", "none"]):
        probe_hidden_states(3, rng, normalize="sparsemax")
    with raises_message(ValueError, "urpe", names=["scheme"], values=["True", "shaw"]):
        probe_hidden_states(3, rng, scheme="shaw", urpe=True)


def test_probe_model_smallest_sizes_and_no_clipping_distance():
    # width, FFN width and heads of 1 are valid; with K = 0 every offset shares one Shaw
    # embedding, so nothing tells the identical tokens apart and all states are equal
    # (a layer norm over a single feature maps every state to 0)
    h = probe_hidden_states(3, np.random.default_rng(1), d=1, d_ff=1, num_heads=1)
    np.testing.assert_array_equal(h, np.zeros((3, 1)))
    h = probe_hidden_states(4, np.random.default_rng(1), d=4, num_heads=1, scheme="shaw", shaw_clip=0)
    np.testing.assert_allclose(h, np.broadcast_to(h[0], h.shape), rtol=0, atol=1e-12)


@pytest.mark.parametrize("special_tokens", [False, True])
def test_probe_model_without_layers_is_the_token_plus_its_code(special_tokens):
    # L = 0: the output is the input, n copies of one token drawn first from rng, plus the
    # position code (the [CLS] / [SEP] embeddings come next from rng and are dropped)
    n, d, seed = 5, 6, 4
    ref = np.random.default_rng(seed)
    token = ref.standard_normal(d)
    first = 1 if special_tokens else 0
    total = n + 2 * first
    got = probe_hidden_states(n, np.random.default_rng(seed), d=d, num_heads=1, layers=0,
                              scheme="sinusoidal", special_tokens=special_tokens)
    np.testing.assert_array_equal(got, token + sinusoidal_encoding(total, d)[first:first + n])


def test_probe_model_learned_code_without_layers():
    n, d, seed = 5, 6, 4
    ref = np.random.default_rng(seed)
    token = ref.standard_normal(d)
    table = ref.standard_normal((n, d))
    got = probe_hidden_states(n, np.random.default_rng(seed), d=d, num_heads=1, layers=0, scheme="learned")
    np.testing.assert_array_equal(got, token + table)


@pytest.mark.parametrize("scheme", ["none", "shaw"])
def test_probe_model_defaults_are_the_documented_ones(scheme):
    # two layers, FFN width 64 and Shaw clipping distance 8 (the signature's documented values)
    a = probe_hidden_states(6, np.random.default_rng(2), scheme=scheme, causal=True)
    b = probe_hidden_states(6, np.random.default_rng(2), scheme=scheme, causal=True,
                            layers=2, d_ff=64, shaw_clip=8)
    np.testing.assert_array_equal(a, b)
    c = probe_hidden_states(6, np.random.default_rng(2), scheme=scheme, causal=True, layers=3)
    assert not np.allclose(a, c)


@pytest.mark.parametrize("scheme", ["none", "shaw", "alibi"])
def test_probe_model_causal_states_ignore_later_tokens(scheme):
    # under the causal mask token i sees tokens 0..i only; these schemes draw nothing whose
    # size depends on n, so the first n states of n + 2 tokens are the states of n tokens
    a = probe_hidden_states(4, np.random.default_rng(6), scheme=scheme, causal=True, d=8, num_heads=2)
    b = probe_hidden_states(6, np.random.default_rng(6), scheme=scheme, causal=True, d=8, num_heads=2)
    np.testing.assert_allclose(b[:4], a, rtol=1e-12, atol=1e-12)


def test_probe_model_alibi_bias_changes_the_states_around_special_tokens():
    # ALiBi draws nothing, so without its bias the states would be those of scheme "none";
    # with identical tokens alone any weights average the same value, so [CLS] / [SEP] are
    # needed for the bias to show
    a = probe_hidden_states(5, np.random.default_rng(6), scheme="alibi", special_tokens=True)
    b = probe_hidden_states(5, np.random.default_rng(6), scheme="none", special_tokens=True)
    assert np.max(np.abs(a - b)) > 1e-2


# ---- the position signal, the rounding floor and the held-out readout ---------------------------

from attncore._probe import heldout_readout, position_signal, rounding_floor  # noqa: E402


def test_new_scores_errors_name_the_argument():
    y = np.arange(4.0)
    train = np.array([True, False, True, False])
    with raises_message(ValueError, "states", shapes=[(1, 2)], says="at least two"):
        position_signal(np.ones((1, 2)))
    with raises_message(ValueError, "states"):
        position_signal(np.ones(3))
    with raises_message(TypeError, "dtype"):
        rounding_floor("int32", sublayers=1, terms=1)
    with raises_message(TypeError, "sublayers"):
        rounding_floor(np.float64, sublayers=1.0, terms=1)
    with raises_message(ValueError, "terms"):
        rounding_floor(np.float64, sublayers=1, terms=0)
    with raises_message(TypeError, "train", says="boolean"):
        heldout_readout(F, y, [1, 0, 1, 0])
    with raises_message(ValueError, "train", shapes=["(4,)"]):
        heldout_readout(F, y, train[:3])
    with raises_message(ValueError, "train", says="held out"):
        heldout_readout(F, y, np.zeros(4, bool))
    with raises_message(ValueError, "targets", shapes=["(4,)"]):
        heldout_readout(F, np.arange(5.0), train)


def test_position_signal_uses_the_largest_norm_and_the_smallest_gap():
    # gaps 1 (rows 0, 1), 3 and 4; norms 3, 4, 0: the signal is 1 / 4 (a mean norm, 7/3, or the
    # largest gap would give another number); all-zero states have no signal
    h = np.array([[3.0, 0.0], [4.0, 0.0], [0.0, 0.0]])
    assert position_signal(h) == 0.25
    assert position_signal(np.zeros((3, 2))) == 0.0


def test_heldout_readout_drops_rounding_directions_of_the_training_rows():
    # training states equal up to one ulp: the readout must predict the training mean (the
    # baseline) instead of fitting the rounding; a cut-off relative to the centred rows would fit it
    rng = np.random.default_rng(0)
    base = np.tile(rng.standard_normal(6), (8, 1))
    noisy = base * (1 + np.finfo(np.float64).eps * rng.choice([-1.0, 1.0], size=base.shape))
    y = np.arange(1.0, 9.0)
    train = np.arange(8) % 2 == 0
    mse, baseline = heldout_readout(noisy, y, train)
    assert mse == baseline


# ---- survivors of the 2026-11-23 run of _probe --------------------------------------------------

EPS = np.finfo(np.float64).eps


def test_heldout_readout_errors_name_features_and_the_shapes():
    # kills, in heldout_readout: the name "features" replaced (None, "XXfeaturesXX", "FEATURES",
    # or dropped so the spec takes its place), the spec ("n", "d") dropped or its letters mangled
    # ("XXnXX", "N", "XXdXX", "D"); match=("features", f) dropped or mangled for targets;
    # describe(train) replaced by describe(None) in the message of a non-boolean train.
    # In linear_readout: match=("XXfeaturesXX", f) for targets.
    y = np.arange(4.0)
    train = np.array([True, False, True, False])
    with raises_message(ValueError, "features", shapes=["(n, d)", "(4,)"]):
        heldout_readout(np.arange(4.0), y, train)
    with raises_message(TypeError, "features", dtypes=["bool"], says="real"):
        heldout_readout(F > 0, y, train)
    with raises_message(ValueError, "targets", names=["features"], shapes=["(4,)", "(4, 2)"]):
        heldout_readout(F, np.arange(5.0), train)
    with raises_message(ValueError, "targets", names=["features"], shapes=["(4,)", "(4, 2)"]):
        linear_readout(F, np.arange(5.0))
    with raises_message(TypeError, "train", values=["[1, 0, 1, 0]"], says="boolean"):
        heldout_readout(F, y, [1, 0, 1, 0])


def _far_from_zero(seed=0):
    # features with a large common offset (1e8) and O(1) variation, targets an exact affine
    # function of the variation with a large mean (1e6): centring the features rounds at
    # ulp(1e8), so the left singular vectors are orthogonal to the ones vector only to about 1e-8
    rng = np.random.default_rng(seed)
    r = rng.standard_normal((8, 2))
    return 1e8 + r, r @ np.array([1.0, -2.0]) + 1e6


def test_readouts_of_features_far_from_zero_with_targets_of_large_mean():
    # An affine target is read to rounding accuracy (mean squared error about 1e-16 here).
    # Kills the centring of the targets with the wrong sign, y + mean instead of y - mean, in
    # linear_readout (yc = y + y.mean()) and in heldout_readout (y[t] + mean): the sign is
    # harmless in exact arithmetic (the left singular vectors are orthogonal to the ones vector),
    # but with these inputs 2 * mean * u^T 1 is about 1e-2 and the error grows to 1e-4 .. 1e-2.
    f, y = _far_from_zero()
    _, mse = linear_readout(f, y)
    assert mse < 1e-10
    train = np.arange(8) < 6
    mse, baseline = heldout_readout(f, y, train)
    assert mse < 1e-10 and baseline > 1.0


def test_heldout_readout_of_constant_zero_training_rows_is_the_mean():
    # All-zero training features: no direction is kept (the cut-off is 0 and no singular value
    # exceeds it) and the readout predicts the training mean, the baseline. Kills keep = sv >= cut,
    # which keeps the zero singular values and divides by them (NaN).
    f = np.zeros((4, 2))
    y = np.arange(4.0)
    train = np.array([True, True, False, True])
    mse, baseline = heldout_readout(f, y, train)
    assert mse == baseline and abs(baseline - (2.0 - 4.0 / 3.0) ** 2) < 1e-15


def test_heldout_readout_cutoff_scales_with_the_training_rows():
    # The noisy copies of one state of the test above, 1000 times larger: their rounding
    # directions have singular values near 1000 * eps and must still be dropped. Kills the
    # spectral norm replaced by the constant np.linalg.norm(2) = 2 (cut-off 8 * eps * 2).
    rng = np.random.default_rng(0)
    base = np.tile(rng.standard_normal(6), (8, 1))
    noisy = 1000 * base * (1 + EPS * rng.choice([-1.0, 1.0], size=base.shape))
    y = np.arange(1.0, 9.0)
    mse, baseline = heldout_readout(noisy, y, np.arange(8) % 2 == 0)
    assert mse == baseline


def _hadamard(k):
    h = np.ones((1, 1))
    for _ in range(k):
        h = np.block([[h, h], [h, -h]])
    return h


def test_heldout_readout_cutoff_uses_the_spectral_norm():
    # 16 training rows: eight orthogonal +-1 columns (singular value 4 each, spectral norm 4,
    # Frobenius norm 4 * sqrt(8)) and a ninth column 30 * eps * (+-1), singular value 120 * eps.
    # The cut-off 16 * eps * ||fit||_2 = 64 * eps keeps it, and a target along it is read on the
    # held-out row; a cut-off from the Frobenius norm (181 * eps) drops it and predicts the mean.
    # Kills np.linalg.norm(fit, 2) replaced by np.linalg.norm(fit, None) or np.linalg.norm(fit).
    h = _hadamard(4)
    fit = np.column_stack([h[:, 1:9], 30 * EPS * h[:, 9]])  # (16, 9), columns sum to 0
    sv = np.linalg.svd(fit, compute_uv=False)
    assert 64 * EPS < sv[-1] < 16 * EPS * np.linalg.norm(fit)  # the window the test relies on
    f = np.vstack([fit, np.r_[np.zeros(8), 30 * EPS]])  # the held-out row: +1 along the small column
    y = np.r_[5.0 + h[:, 9], 6.0]
    mse, baseline = heldout_readout(f, y, np.arange(17) < 16)
    assert baseline == 1.0 and mse < 1e-20


def test_position_signal_shape_error_shows_the_axes():
    # kills the spec letters of position_signal mangled ("XXnXX", "N", "XXdXX", "D")
    with raises_message(ValueError, "states", shapes=["(n, d)", "(3,)"]):
        position_signal(np.ones(3))


@pytest.mark.parametrize("kwargs, exc, name, facts", [
    (dict(layers=-1), ValueError, "layers", dict(values=[0, -1], says="out of range")),
    (dict(layers=1.0), TypeError, "layers", dict(values=["float", 1.0], says="integer")),
    (dict(d_ff=0), ValueError, "d_ff", dict(values=[1, 0], says="out of range")),
    (dict(scheme="shaw", shaw_clip=-1), ValueError, "shaw_clip", dict(values=[0, -1], says="out of range")),
    (dict(d=6, num_heads=4), ValueError, "num_heads", dict(names=["d"], values=[6, 4], says="divisible")),
    (dict(d=6, num_heads=2, scheme="rope"), ValueError, "rope", dict(names=["d", "num_heads"], values=[6, 2, 3], says="even")),
    (dict(urpe="sym"), ValueError, "urpe", dict(values=["sym"], options=["False", "True", "symmetric"])),
    (dict(causal=1), TypeError, "causal", dict(values=["int", 1], says="boolean")),
    (dict(special_tokens="yes"), TypeError, "special_tokens", dict(values=["str", "yes"], says="boolean")),
])
def test_probe_model_error_messages(kwargs, exc, name, facts):
    # the facts of each message: kills a mangled argument name (e.g. check_bool(causal, "XXcausalXX"),
    # check_bool(special_tokens, "XXspecial_tokensXX")), a wrong minimum and a value dropped
    with raises_message(exc, name, **facts):
        probe_hidden_states(3, np.random.default_rng(0), **kwargs)


# ---- the probe model against a plain re-implementation ------------------------------------------

from attncore._positional import alibi_slopes, rope, t5_relative_bucket  # noqa: E402


def _reference_probe(n, seed, *, scheme="none", layers=2, d=8, num_heads=2, d_ff=12, causal=False,
                     special_tokens=False, urpe=False, shaw_clip=2, normalize="softmax"):
    """The probe model of probe_hidden_states, restated with loops over heads, queries and keys.

    The model definition, in its documented draw order: one token, [CLS] / [SEP], the position
    table; then per block W_Q, W_K, W_V, W_O ~ N(0, 1/d), their biases ~ N(0, 0.01), W_1 ~ N(0, 1/d),
    W_2 ~ N(0, 1/d_ff), b_1, b_2 ~ N(0, 0.01), then the T5 table, the URPE diagonals (1 + N(0, 1/4))
    and the Shaw tables. Softmax, l2 (exp over its norm) or relu2 (relu(s)^2 / number of keys t,
    also under the causal mask) weights, layer norms with eps = 1e-5, the ReLU FFN.
    """
    rng = np.random.default_rng(seed)
    dk = d // num_heads
    t = n + 2 if special_tokens else n
    x = np.tile(rng.standard_normal(d), (n, 1))
    if special_tokens:
        cls, sep = rng.standard_normal((2, d))
        x = np.vstack([cls, x, sep])
    if scheme == "sinusoidal":
        x = x + sinusoidal_encoding(t, d)
    elif scheme == "learned":
        x = x + rng.standard_normal((t, d))

    def ln(z):
        mu = z.mean(axis=-1, keepdims=True)
        return (z - mu) / np.sqrt(((z - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)

    for _ in range(layers):
        w_q, w_k, w_v, w_o = (rng.standard_normal((d, d)) / np.sqrt(d) for _ in range(4))
        b_q, b_k, b_v, b_o = (0.1 * rng.standard_normal(d) for _ in range(4))
        w1 = rng.standard_normal((d, d_ff)) / np.sqrt(d)
        w2 = rng.standard_normal((d_ff, d)) / np.sqrt(d_ff)
        b1 = 0.1 * rng.standard_normal(d_ff)
        b2 = 0.1 * rng.standard_normal(d)
        q, k, v = x @ w_q + b_q, x @ w_k + b_k, x @ w_v + b_v
        table = rng.standard_normal((num_heads, 32)) if scheme == "t5" else None
        c = None  # URPE's C[h, i, j] = c_{j - i}, written out index by index
        offset = np.arange(t)[None, :] - np.arange(t)[:, None]  # (t, t), j - i
        if urpe == "symmetric":
            half = 1.0 + 0.5 * rng.standard_normal((num_heads, t))  # c_0 .. c_{t-1}, c_{-r} = c_r
            c = half[:, np.abs(offset)]
        elif urpe:
            diag = 1.0 + 0.5 * rng.standard_normal((num_heads, 2 * t - 1))  # c_{-(t-1)} .. c_{t-1}
            c = diag[:, offset + t - 1]
        if scheme == "shaw":
            tab_k = rng.standard_normal((num_heads, 2 * shaw_clip + 1, dk)) / np.sqrt(dk)
            tab_v = rng.standard_normal((num_heads, 2 * shaw_clip + 1, dk))
        out = np.zeros((t, d))
        for hh in range(num_heads):
            cols = slice(hh * dk, (hh + 1) * dk)
            qh, kh, vh = q[:, cols], k[:, cols], v[:, cols]
            if scheme == "rope":
                qh, kh = rope(qh), rope(kh)
            for i in range(t):
                keys = range(i + 1) if causal else range(t)
                s = []
                for j in keys:
                    key = kh[j] + (tab_k[hh, np.clip(j - i, -shaw_clip, shaw_clip) + shaw_clip] if scheme == "shaw" else 0)
                    score = qh[i] @ key / np.sqrt(dk)
                    if scheme == "t5":
                        score += table[hh, int(t5_relative_bucket(j - i, bidirectional=not causal))]
                    elif scheme == "alibi":
                        score -= alibi_slopes(num_heads)[hh] * abs(j - i)
                    s.append(score)
                if normalize == "relu2":
                    a = np.maximum(np.array(s), 0) ** 2 / t
                else:
                    a = np.exp(np.array(s) - max(s))
                    a /= a.sum() if normalize == "softmax" else np.sqrt(np.sum(a * a))
                for j, aj in zip(keys, a):
                    weight = aj * (c[hh, i, j] if c is not None else 1.0)
                    val = vh[j] + (tab_v[hh, np.clip(j - i, -shaw_clip, shaw_clip) + shaw_clip] if scheme == "shaw" else 0)
                    out[i, cols] += weight * val
        x = ln(x + out @ w_o + b_o)
        x = ln(x + np.maximum(x @ w1 + b1, 0) @ w2 + b2)
    return x[1:-1] if special_tokens else x


@pytest.mark.parametrize("kwargs", [
    dict(scheme="none", special_tokens=True),
    dict(scheme="learned", causal=True),
    dict(scheme="t5", special_tokens=True),
    dict(scheme="t5", causal=True, special_tokens=True, n=10),
    dict(scheme="alibi", special_tokens=True),
    dict(scheme="rope", special_tokens=True),
    dict(scheme="shaw"),
    dict(scheme="shaw", causal=True, shaw_clip=1),
    dict(scheme="shaw", normalize="relu2", causal=True),
    dict(scheme="none", normalize="l2", special_tokens=True),
    dict(scheme="sinusoidal", urpe=True),
    dict(scheme="alibi", urpe="symmetric", special_tokens=True),
])
def test_probe_model_matches_a_plain_reimplementation(kwargs):
    # kills changes to the model's definition: a weight or bias scale (0.1 -> 1.1, * -> /,
    # / sqrt(d) -> * sqrt(d)), a bias dropped from a projection, the T5 table's size or its
    # bidirectional flag, the ALiBi sign, the URPE diagonals, the Shaw tables, the draw order.
    # Identical tokens alone hide a score-only scheme (every weighting averages the same value),
    # hence the special tokens; the causal T5 buckets differ from the bidirectional ones only from
    # offset 8 on, hence n = 10 there. Also kills normalize=normalize dropped from either call.
    kwargs = dict(kwargs)
    n = kwargs.pop("n", 5)
    d, h, d_ff = 8, 2, 12
    clip = kwargs.pop("shaw_clip", 2)
    got = probe_hidden_states(n, np.random.default_rng(3), d=d, num_heads=h, d_ff=d_ff, shaw_clip=clip, **kwargs)
    ref = _reference_probe(n, 3, d=d, num_heads=h, d_ff=d_ff, shaw_clip=clip, **kwargs)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)
