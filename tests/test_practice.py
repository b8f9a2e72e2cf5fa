"""The practice grader (attncore.practice) is evidence that can fail.

For every exercise: the folded solution of its practice notebook passes; at least three
wrong solutions a student would plausibly write, written here independently of the
grader's own variants, fail with the ``mistake`` id that names them (the id, not the
wording); and the notebook's unsolved stub reports "not implemented yet" without a
traceback.  The grader's cases are fixed (seeded), so each verdict is deterministic.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from attncore import practice
from attncore._exercises import CHAPTERS, EXERCISE_TABLE
from attncore.practice import EXERCISES, check

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0[1-6]p_practice.md"))
SOLUTION = re.compile(r"<summary>Solution</summary>\s*```python\n(.*?)```", re.S)
STUB = re.compile(r"```\{code-cell\} ipython3\n(def (\w+)\(.*?\n    raise NotImplementedError.*?check\(\"(\w+)\", \2\)\n)```", re.S)


def exercises_of(path):
    """``[(exercise id, function name, stub cell, solution source)]`` of a practice notebook's twin."""
    text = path.read_text(encoding="utf-8")
    stubs, solutions = STUB.findall(text), SOLUTION.findall(text)
    assert len(stubs) == len(solutions), f"{path.name}: {len(stubs)} stubs, {len(solutions)} solutions"
    return [(ident, name, stub, solution) for (stub, name, ident), solution in zip(stubs, solutions)]


ALL = [(p.name, *row) for p in NOTEBOOKS for row in exercises_of(p)]


def run(source, name):
    namespace = {"np": np, "check": lambda *a: None}
    exec(source, namespace)  # noqa: S102 - the notebook's own folded solution
    return namespace[name]


def test_every_exercise_is_in_one_notebook_and_the_counts_hold():
    assert len(NOTEBOOKS) == 6
    ids = [row[1] for row in ALL]
    assert sorted(ids) == sorted(EXERCISES) and len(set(ids)) == len(ids)
    assert len(EXERCISES) >= 35
    for path in NOTEBOOKS:
        rows = exercises_of(path)
        assert len(rows) >= 5, path.name
        assert {CHAPTERS[r[0]] for r in rows} == {int(path.name[1])}, path.name


@pytest.mark.parametrize("notebook, ident, name, stub, solution", ALL, ids=[r[1] for r in ALL])
def test_solution_passes_within_2_seconds(notebook, ident, name, stub, solution):
    start = time.process_time()
    result = check(ident, run(solution, name))
    assert time.process_time() - start < 2.0
    assert result and result.mistake is None and result.status == "passed", str(result)
    assert str(result).count("\n") == 0 and "passed" in str(result)  # one line


@pytest.mark.parametrize("notebook, ident, name, stub, solution", ALL, ids=[r[1] for r in ALL])
def test_unsolved_stub_reports_not_implemented(notebook, ident, name, stub, solution):
    result = check(ident, run(stub, name))
    assert not result and result.status == "not implemented" and result.mistake is None
    assert "not implemented yet" in str(result) and "Traceback" not in str(result)
    assert str(result).count("\n") == 0


def test_check_rejects_unknown_exercises_and_non_functions():
    with pytest.raises(ValueError, match="softmax"):
        check("sofmax", lambda x: x)
    with pytest.raises(TypeError, match="fn"):
        check("softmax", np.ones(3))


def test_result_is_truthy_on_pass_and_prints_the_diagnosis():
    result = check("causal_mask", lambda n: np.triu(np.ones((n, n), dtype=bool)))
    assert not result and result.mistake == "future_visible"
    text = str(result)
    assert "expected" in text and "returned" in text and "query 0" in text and "key 1" in text
    assert repr(result) == text and result.exercise == "causal_mask"


# ---- wrong solutions a student would plausibly write, and the mistake each must be named by ----

def _exp_shift(x, axis=-1):
    return np.exp(x - np.max(x, axis=axis, keepdims=True))


def softmax_in_place(x, axis=-1):
    x -= np.max(x, axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_float64(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention_student(q, k, v, mask=None, *, scale=None, axis=-1, fill=True, keep=True):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(d_k) if scale is None else scale(q, v))
    if mask is not None and fill:
        s = np.where(mask if keep else ~mask, s, -1e9)
    w = np.exp(s - s.max(axis=axis, keepdims=True))
    w = w / w.sum(axis=axis, keepdims=True)
    if mask is not None and not fill:
        w = w * mask
    return w @ v


def layer_norm_student(x, g, b, *, ddof=0, axis=-1, inside=True):
    mu = np.mean(x, axis=axis, keepdims=True)
    var = np.var(x, axis=axis, ddof=ddof, keepdims=True)
    return g * (x - mu) / (np.sqrt(var + 1e-5) if inside else np.sqrt(var) + 1e-5) + b


def sinusoid_student(n, d, *, start=0, scale=1.0, cos_first=False, omega_step=2):
    p = (np.arange(n) + start)[:, None] * scale
    w = 1 / 10000 ** (np.arange(0, d, 2) / d * (omega_step / 2))
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = (np.cos(p * w), np.sin(p * w)) if cos_first else (np.sin(p * w), np.cos(p * w))
    return pe


def rope_student(x, *, sign=1, half=False, start=0):
    n, d = x.shape[-2:]
    theta = (np.arange(n)[:, None] + start) * 10000.0 ** (-np.arange(0, d, 2) / d) * sign
    a, b = (x[..., : d // 2], x[..., d // 2:]) if half else (x[..., ::2], x[..., 1::2])
    y = np.empty_like(x)
    first, second = a * np.cos(theta) - b * np.sin(theta), a * np.sin(theta) + b * np.cos(theta)
    if half:
        y[..., : d // 2], y[..., d // 2:] = first, second
    else:
        y[..., ::2], y[..., 1::2] = first, second
    return y


def alibi_student(h, *, start=1, odd=False, sort=False, plain=False):
    def geo(k):
        return np.array([2 ** (-8 * (t + start) / k) for t in range(k)])
    c = 2 ** int(math.log2(h))
    if plain or c == h:
        return geo(h)
    out = np.concatenate([geo(c), geo(2 * c)[1 if odd else 0::2][: h - c]])
    return np.sort(out)[::-1] if sort else out


def causal_linear_student(fq, fk, v, *, shift=False, global_norm=False, future=False, normalise=True):
    kv = np.cumsum(np.einsum("...nd,...ne->...nde", fk, v), axis=-3)
    z = np.cumsum(fk, axis=-2)
    if future:
        kv, z = np.broadcast_to(kv[..., -1:, :, :], kv.shape), np.broadcast_to(z[..., -1:, :], z.shape)
    if shift:
        kv, z = kv - np.einsum("...nd,...ne->...nde", fk, v), z - fk
    if global_norm:
        z = np.broadcast_to(fk.sum(axis=-2, keepdims=True), z.shape)
    num = np.einsum("...nd,...nde->...ne", fq, kv)
    return num / np.einsum("...nd,...nd->...n", fq, z)[..., None] if normalise else num


def _mixture(scores, logits, weights):
    return sum(w * s for w, s in zip(weights(np.asarray(logits)), scores))


WRONG = {
    "softmax": [
        ("no_max_shift", lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)),
        ("sum_over_all", lambda x, axis=-1: _exp_shift(x, axis) / _exp_shift(x, axis).sum()),
        ("no_keepdims", lambda x, axis=-1: _exp_shift(x, axis) / _exp_shift(x, axis).sum(axis=axis)),
        ("ignores_axis", lambda x, axis=-1: _exp_shift(x) / _exp_shift(x).sum(axis=-1, keepdims=True)),
        ("dtype_changed", softmax_float64),
        ("mutates_input", softmax_in_place),
    ],
    "causal_mask": [
        ("future_visible", lambda n: np.triu(np.ones((n, n), dtype=bool))),
        ("diagonal_excluded", lambda n: np.tril(np.ones((n, n), dtype=bool), k=-1)),
        ("inverted", lambda n: np.triu(np.ones((n, n), dtype=bool), k=1)),
        ("not_boolean", lambda n: np.tril(np.ones((n, n)))),
    ],
    "attention": [
        ("no_scale", lambda q, k, v, mask=None: attention_student(q, k, v, mask, scale=lambda q, v: 1.0)),
        ("scale_1_over_d_k", lambda q, k, v, mask=None: attention_student(q, k, v, mask, scale=lambda q, v: 1 / q.shape[-1])),
        ("scale_uses_d_v", lambda q, k, v, mask=None: attention_student(q, k, v, mask, scale=lambda q, v: v.shape[-1] ** -0.5)),
        ("softmax_over_queries", lambda q, k, v, mask=None: attention_student(q, k, v, mask, axis=-2)),
        ("mask_inverted", lambda q, k, v, mask=None: attention_student(q, k, v, mask, keep=False)),
        ("mask_after_softmax", lambda q, k, v, mask=None: attention_student(q, k, v, mask, fill=False)),
        ("dtype_changed", lambda q, k, v, mask=None: attention_student(q, k, v, mask, scale=lambda q, v: 1 / np.sqrt(q.shape[-1]))),
    ],
    "split_heads": [
        ("no_transpose", lambda x, h: x.reshape(*x.shape[:-1], h, x.shape[-1] // h)),
        ("reshape_only", lambda x, h: x.reshape(*x.shape[:-2], h, x.shape[-2], x.shape[-1] // h)),
        ("strided_heads", lambda x, h: np.stack([x[..., i::h] for i in range(h)], axis=-3)),
    ],
    "merge_heads": [
        ("reshape_only", lambda x: x.reshape(*x.shape[:-3], x.shape[-2], x.shape[-3] * x.shape[-1])),
        ("strided_heads", lambda x: np.stack(list(np.moveaxis(x, -3, 0)), axis=-1).reshape(*x.shape[:-3], x.shape[-2], -1)),
        ("sums_heads", lambda x: x.sum(axis=-3)),
        ("heads_as_tokens", lambda x: np.concatenate(list(np.moveaxis(x, -3, 0)), axis=-2)),
    ],
    "layer_norm": [
        ("unbiased_variance", lambda x, g, b: layer_norm_student(x, g, b, ddof=1)),
        ("gamma_beta_swapped", lambda x, g, b: layer_norm_student(x, b, g)),
        ("over_tokens", lambda x, g, b: layer_norm_student(x, g, b, axis=-2)),
        ("eps_outside_sqrt", lambda x, g, b: layer_norm_student(x, g, b, inside=False)),
    ],
    "softmax_shift_proof": [
        ("numpy_exp", lambda xs: [np.exp(x) / sum(np.exp(y) for y in xs) for x in xs]),
        ("no_normalisation", lambda xs: [__import__("sympy").exp(x) for x in xs]),
        ("no_exp", lambda xs: [x / sum(xs) for x in xs]),
    ],
    "permutation_matrix": [
        ("transposed", lambda p: np.eye(len(p))[:, p]),
        ("one_based", lambda p: np.array([[1.0 if j == p[i] - 1 else 0.0 for j in range(len(p))] for i in range(len(p))])),
        ("dtype_changed", lambda p: np.eye(len(p), dtype=int)[p]),
    ],
    "inverse_permutation": [
        ("returns_perm", lambda p: np.asarray(p).copy()),
        ("squared", lambda p: np.array([p[p[i]] for i in range(len(p))])),
        ("reversed", lambda p: np.flip(p)),
        ("dtype_changed", lambda p: np.argsort(p).astype(float)),
    ],
    "permute_tokens": [
        ("permutes_features", lambda x, p: x[..., p]),
        ("inverse", lambda x, p: x[..., np.argsort(p), :]),
        ("permutes_batch", lambda x, p: x[p]),
    ],
    "permute_mask": [
        ("rows_only", lambda m, p: m[p, :]),
        ("columns_only", lambda m, p: m[:, p]),
        ("inverse", lambda m, p: (np.eye(len(p))[p].T @ m @ np.eye(len(p))[p]) > 0),
        ("not_boolean", lambda m, p: m[p][:, p].astype(int)),
    ],
    "equivariance_gap": [
        ("invariance", lambda f, x, p: float(np.abs(f(x[p]) - f(x)).max())),
        ("inverse", lambda f, x, p: float(np.abs(f(x[p]) - f(x)[np.argsort(p)]).max())),
        ("mean_not_max", lambda f, x, p: float(np.abs(f(x[p]) - f(x)[p]).mean())),
        ("permutes_features", lambda f, x, p: float(np.abs(f(x[:, p]) - f(x)[:, p]).max())),
    ],
    "self_attention": [
        ("no_scale", lambda x, wq, wk, wv: attention_student(x @ wq, x @ wk, x @ wv, scale=lambda q, v: 1.0)),
        ("scale_uses_d", lambda x, wq, wk, wv: attention_student(x @ wq, x @ wk, x @ wv, scale=lambda q, v: 1 / math.sqrt(x.shape[-1]))),
        ("values_are_x", lambda x, wq, wk, wv: attention_student(x @ wq, x @ wk, x)),
        ("softmax_over_queries", lambda x, wq, wk, wv: attention_student(x @ wq, x @ wk, x @ wv, axis=-2)),
    ],
    "sinusoidal_encoding": [
        ("sin_cos_swapped", lambda n, d: sinusoid_student(n, d, cos_first=True)),
        ("length_dependent", lambda n, d: sinusoid_student(n, d, scale=1 / n)),
        ("positions_from_one", lambda n, d: sinusoid_student(n, d, start=1)),
        ("frequency_exponent", lambda n, d: sinusoid_student(n, d, omega_step=1)),
        ("concatenated_layout", lambda n, d: np.concatenate(np.split(sinusoid_student(n, d).reshape(n, d // 2, 2), 2, axis=-1), axis=1).reshape(n, d)),
    ],
    "relative_bias": [
        ("i_minus_j", lambda t, n: np.array([[t[i - j + n - 1] for j in range(n)] for i in range(n)])),
        ("missing_offset", lambda t, n: np.array([[t[j - i] for j in range(n)] for i in range(n)])),
        ("absolute", lambda t, n: np.tile(t[:n], (n, 1))),
    ],
    "alibi_slopes": [
        ("t_from_zero", lambda h: alibi_student(h, start=0)),
        ("power_formula_for_all", lambda h: alibi_student(h, plain=True)),
        ("extras_interleaved", lambda h: alibi_student(h, sort=True)),
        ("extras_from_odd", lambda h: alibi_student(h, odd=True)),
    ],
    "rope": [
        ("wrong_direction", lambda x: rope_student(x, sign=-1)),
        ("half_layout", lambda x: rope_student(x, half=True)),
        ("positions_from_one", lambda x: rope_student(x, start=1)),
    ],
    "l2_weights": [
        ("l1_normalised", lambda s: _exp_shift(s) / _exp_shift(s).sum(axis=-1, keepdims=True)),
        ("no_sqrt", lambda s: _exp_shift(s) / (_exp_shift(s) ** 2).sum(axis=-1, keepdims=True)),
        ("no_exp", lambda s: s / np.linalg.norm(s, axis=-1, keepdims=True)),
        ("no_max_shift", lambda s: np.exp(s) / np.linalg.norm(np.exp(s), axis=-1, keepdims=True)),
    ],
    "relu2_weights": [
        ("row_sum_normalised", lambda s: np.maximum(s, 0) ** 2 / (np.maximum(s, 0) ** 2).sum(axis=-1, keepdims=True)),
        ("no_relu", lambda s: s * s / s.shape[-1]),
        ("no_square", lambda s: np.maximum(s, 0) / s.shape[-1]),
        ("divides_by_queries", lambda s: np.maximum(s, 0) ** 2 / len(s)),
    ],
    "positive_random_features": [
        ("no_norm_term", lambda x, w: np.exp(x @ w.T) / np.sqrt(len(w))),
        ("no_sqrt_m", lambda x, w: np.exp(x @ w.T - (x ** 2).sum(-1, keepdims=True) / 2)),
        ("divides_by_m", lambda x, w: np.exp(x @ w.T - (x ** 2).sum(-1, keepdims=True) / 2) / len(w)),
        ("full_norm_term", lambda x, w: np.exp(x @ w.T - (x ** 2).sum(-1, keepdims=True)) / np.sqrt(len(w))),
    ],
    "trig_random_features": [
        ("negative_exponent", lambda x, w: np.concatenate([np.cos(x @ w.T), np.sin(x @ w.T)], -1) * np.exp(-(x ** 2).sum(-1, keepdims=True) / 2) / np.sqrt(len(w))),
        ("no_norm_factor", lambda x, w: np.concatenate([np.cos(x @ w.T), np.sin(x @ w.T)], -1) / np.sqrt(len(w))),
        ("interleaved", lambda x, w: np.stack([np.cos(x @ w.T), np.sin(x @ w.T)], -1).reshape(*x.shape[:-1], -1) * np.exp((x ** 2).sum(-1, keepdims=True) / 2) / np.sqrt(len(w))),
    ],
    "elu_feature_map": [
        ("relu_plus_one", lambda x: np.where(x > 0, x, 0) + 1),
        ("no_plus_one", lambda x: np.where(x > 0, x, np.exp(x) - 1)),
        ("exp_everywhere", lambda x: np.exp(x)),
    ],
    "linear_attention_weights": [
        ("no_normaliser", lambda q, k: q @ np.swapaxes(k, -1, -2)),
        ("normalised_over_queries", lambda q, k: (q @ np.swapaxes(k, -1, -2)) / (q @ np.swapaxes(k, -1, -2)).sum(-2, keepdims=True)),
        ("softmax_of_scores", lambda q, k: _exp_shift(q @ np.swapaxes(k, -1, -2)) / _exp_shift(q @ np.swapaxes(k, -1, -2)).sum(-1, keepdims=True)),
    ],
    "linear_attention": [
        ("no_normaliser", lambda q, k, v: q @ (np.swapaxes(k, -1, -2) @ v)),
        ("normalised_over_queries", lambda q, k, v: ((q @ np.swapaxes(k, -1, -2)) / (q @ np.swapaxes(k, -1, -2)).sum(-2, keepdims=True)) @ v),
        ("softmax_of_scores", lambda q, k, v: (_exp_shift(q @ np.swapaxes(k, -1, -2)) / _exp_shift(q @ np.swapaxes(k, -1, -2)).sum(-1, keepdims=True)) @ v),
    ],
    "causal_linear_attention": [
        ("includes_future", lambda q, k, v: causal_linear_student(q, k, v, future=True)),
        ("excludes_self", lambda q, k, v: causal_linear_student(q, k, v, shift=True)),
        ("normaliser_not_causal", lambda q, k, v: causal_linear_student(q, k, v, global_norm=True)),
        ("no_normaliser", lambda q, k, v: causal_linear_student(q, k, v, normalise=False)),
    ],
    "dense_scores": [
        ("no_relu", lambda x, w1, b1, w2, b2: (x @ w1 + b1) @ w2 + b2),
        ("relu_on_output", lambda x, w1, b1, w2, b2: np.maximum((x @ w1 + b1) @ w2 + b2, 0)),
        ("b1_missing", lambda x, w1, b1, w2, b2: np.maximum(x @ w1, 0) @ w2 + b2),
        ("b2_missing", lambda x, w1, b1, w2, b2: np.maximum(x @ w1 + b1, 0) @ w2),
    ],
    "factorized_random_scores": [
        ("transposed", lambda r1, r2: (r1 @ r2.T).T),
        ("wrong_contraction", lambda r1, r2: r1.T @ r2),
        ("elementwise", lambda r1, r2: r1 * r2),
    ],
    "mixture_weights": [
        ("raw_logits", lambda z: np.asarray(z, dtype=float)),
        ("divided_by_sum", lambda z: z / np.sum(z)),
        ("sigmoid", lambda z: 1 / (1 + np.exp(-z))),
        ("no_max_shift", lambda z: np.exp(z) / np.sum(np.exp(z))),
    ],
    "mixture_scores": [
        ("mixes_maps", lambda s, z: _mixture([_exp_shift(b) / _exp_shift(b).sum(-1, keepdims=True) for b in s], z,
                                             lambda z: np.exp(z) / np.exp(z).sum())),
        ("raw_logits", lambda s, z: _mixture(s, z, lambda z: z)),
        ("plain_mean", lambda s, z: sum(s) / len(s)),
    ],
    "synthesizer_attention": [
        ("softmax_over_queries", lambda x, s, w: (_exp_shift(s, -2) / _exp_shift(s, -2).sum(-2, keepdims=True)) @ x @ w),
        ("values_not_projected", lambda x, s, w: (_exp_shift(s) / _exp_shift(s).sum(-1, keepdims=True)) @ x),
        ("no_softmax", lambda x, s, w: s @ (x @ w)),
        ("scaled_scores", lambda x, s, w: (lambda a: a / a.sum(-1, keepdims=True))(_exp_shift(s / math.sqrt(x.shape[-1]))) @ x @ w),
    ],
}
CASES = [(ident, expected, fn) for ident, rows in WRONG.items() for expected, fn in rows]


def test_every_exercise_has_three_wrong_solutions():
    # the backprop appendix's exercises (chapter 6) have theirs in tests/test_practice_backprop.py
    assert set(WRONG) == {ident for ident in EXERCISES if CHAPTERS[ident] <= 5}
    assert all(len(rows) >= 3 for rows in WRONG.values()), {k: len(v) for k, v in WRONG.items() if len(v) < 3}


@pytest.mark.parametrize("ident, expected, fn", CASES, ids=[f"{i}-{e}" for i, e, _ in CASES])
def test_wrong_solution_fails_with_its_mistake(ident, expected, fn):
    result = check(ident, fn)
    assert not result and result.status == "failed"
    assert result.mistake == expected, str(result)
    text = str(result)
    assert "expected" in text and "returned" in text and "input" in text


def test_every_listed_variant_of_the_grader_is_rejected_with_its_own_id():
    """The grader's own wrong variants, as students: each fails, named by its own id."""
    for ident, spec in EXERCISE_TABLE.items():
        for mistake in spec.mistakes:
            result = check(ident, mistake.variant)
            assert not result and result.mistake == mistake.id, (ident, mistake.id, str(result))


def test_module_is_exported():
    import attncore

    assert attncore.practice is practice and callable(practice.check)
    assert all(isinstance(t, str) and t for t in EXERCISES.values())


# ---- one source of truth: the ledger's `catches` and the grader's wrong variants ----------

# (claim id, mistake id) -> words of the claim's `catches` that name the same wrong variant
LEDGER = {
    ("softmax-max-subtraction-is-stable", "no_max_shift"): "without subtracting the maximum",
    ("weights-sum-to-one", "sum_over_all"): "anything but the row's own sum",
    ("weights-sum-to-one", "wrong_axis"): "over the wrong axis",
    ("weights-sum-to-one", "divides_by_max"): "by the maximum",
    ("attention-worked-example", "scale_1_over_d_k"): "A scale of $1/d_k$ instead of $1/\\sqrt{d_k}$",
    ("attention-worked-example", "softmax_over_queries"): "a softmax over the queries instead of the keys",
    ("attention-masks", "mask_ignored"): "A mask that is not applied",
    ("synth-multi-head-is-repetition", "reshape_only"): "splits the features in another order",
    ("ln-parameter-names", "unbiased_variance"): "divisor $d - 1$",
    ("ln-parameter-names", "gamma_beta_swapped"): "uses gamma as the shift and beta as the scale",
    ("norm-axes", "over_tokens"): "reducing over other axes",
    ("attention-symmetry-breakers", "inverse"): "$P^\\top M P$ instead of $PMP^\\top$",
    ("self-attention-not-invariant", "invariance"): "does not change its output",
    ("notes-multi-head-undefined", "scale_uses_d"): "instead of $\\sqrt{d_k}$",
    ("sinusoid-code-length-independent", "length_dependent"): "positions normalised by $n$",
    ("relative-bias-translation-invariant", "i_minus_j"): "indexed by $i - j$",
    ("relative-bias-translation-invariant", "absolute"): "by absolute position",
    ("alibi-slopes", "t_from_zero"): "with $t$ from 0",
    ("alibi-slopes", "extras_interleaved"): "interleaved instead of appended",
    ("alibi-slopes", "extras_from_odd"): "from the odd indices",
    ("rp-l2-uniform-row-sum", "l1_normalised"): "divides by the $\\ell_1$ norm",
    ("rp-l2-uniform-row-sum", "no_sqrt"): "sum of squares without the square root",
    ("rp-gau-relu2-breaks-row-sums", "row_sum_normalised"): "divided by its own row sum",
    ("rp-gau-relu2-breaks-row-sums", "no_relu"): "other than $\\max(s, 0)^2/m$",
    ("la-performer-unbiased", "no_norm_term"): "without the $-\\|x\\|^2/2$ term",
    ("la-performer-unbiased", "no_sqrt_m"): "wrong $1/\\sqrt{D}$ factor",
    ("la-performer-unbiased", "divides_by_m"): "wrong $1/\\sqrt{D}$ factor",
    ("la-linear-attention-form", "includes_future"): "include future keys",
    ("la-linear-attention-form", "normaliser_not_causal"): "normalises by the wrong sum",
    ("la-linear-attention-form", "no_normaliser"): "normalises by the wrong sum",
    ("la-softmax-sum-index", "normalised_over_queries"): "the wrong axis",
    ("synth-mixture-weights", "raw_logits"): "returning the raw logits",
    ("synth-mixture-weights", "divided_by_sum"): "non-positive weights",
    ("synth-random-vanilla-is-position-bias", "mixes_maps"): "mixed the attention maps instead of the scores",
    ("synth-attention-is-mixing", "softmax_over_queries"): "softmax over the wrong axis",
    ("synth-attention-is-mixing", "values_not_projected"): "values not $XW_v$",
    ("backprop-vjps-match-finite-differences", "no_rowsum_term"): "A softmax vjp without the row-sum term",
    ("backprop-vjps-match-finite-differences", "dv_uses_a"): "$A$ instead of $A^\\top$ in $dV$",
    ("backprop-vjps-match-finite-differences", "dq_missing_scale"): "a $dQ$ without the scale",
    ("backprop-vjps-match-finite-differences", "no_variance_term"): "a layer-norm vjp without its projection term",
}


def test_grader_and_ledger_name_the_same_wrong_variants():
    """Every variant the grader ties to a ledger row is one that row's `catches` names, and
    every pairing listed here is one the grader makes."""
    rows = {row["id"]: row for row in yaml.safe_load((ROOT / "book" / "claims.yml").read_text())["claims"]}
    linked = {(m.claim, m.id) for spec in EXERCISE_TABLE.values() for m in spec.mistakes if m.claim}
    assert linked == set(LEDGER), (linked ^ set(LEDGER))
    for (claim, mistake), words in LEDGER.items():
        assert claim in rows, f"{mistake}: no ledger row {claim}"
        catches = rows[claim].get("catches") or ""
        assert words in catches, f"{claim}'s catches does not name the grader's {mistake}: {catches[:200]}"


def test_ledger_variants_behave_as_the_ledger_says():
    """Spot checks that the grader's variant is the ledger's: the same failure, computed."""
    variant = {(ident, m.id): m.variant for ident, spec in EXERCISE_TABLE.items() for m in spec.mistakes}
    with np.errstate(all="ignore"):
        assert np.isnan(variant["softmax", "no_max_shift"](np.array([1000.0, 0.0]))).any()
    weights = variant["relu2_weights", "row_sum_normalised"](np.array([[1.0, 2.0, -1.0], [3.0, 1.0, 1.0]]))
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)  # every row sums to 1: no position signal
    np.testing.assert_allclose(variant["l2_weights", "l1_normalised"](np.zeros((1, 4))).sum(), 1.0)  # not sqrt(4)
    grows = [variant["sinusoidal_encoding", "length_dependent"](n, 4)[1] for n in (4, 8)]
    assert not np.allclose(*grows)  # the code of position 1 changes with the length


def test_a_batch_transposed_with_T_is_named_in_attention():
    """`k.T` passes unbatched cases and raises on a batch; the grader names it (found by a student)."""
    def attention(q, k, v, mask=None):
        s = q @ k.T / math.sqrt(q.shape[-1])
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True) @ v
    result = practice.check("attention", attention)
    assert not result and result.mistake == "transpose_with_T"


def test_an_error_is_blamed_on_a_variant_only_if_it_is_the_same_error():
    """A softmax_vjp without keepdims raises a broadcasting error of its own shapes: no variant raises that one."""
    def softmax_vjp(x, g):
        a = np.exp(x - x.max(axis=-1, keepdims=True))
        a = a / a.sum(axis=-1, keepdims=True)
        return a * (g - (g * a).sum(axis=-1))
    result = practice.check("softmax_vjp", softmax_vjp)
    assert not result and result.mistake is None
    assert "raised" in str(result)
