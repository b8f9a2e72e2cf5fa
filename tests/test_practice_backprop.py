"""The backprop practice exercises (notebook 6p) are evidence that can fail.

tests/test_practice.py runs every notebook's folded solution (it must pass) and its stub (it
must report "not implemented yet"), notebook 6p's included.  Here: wrong solutions a student
would plausibly write, independently of the grader's own variants, each failing with the
``mistake`` id that names it; correct solutions by another route passing; the references
(attncore's vjps) agreeing with central finite differences on every case the grader uses;
and the bug of Exercise 6.6 being the notebook's own listing, one line away from its fix.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from attncore._exercises import CHAPTERS, EXERCISE_TABLE
from attncore.practice import check

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = (ROOT / "notebooks" / "06p_practice.md").read_text(encoding="utf-8")
BACKPROP = sorted(ident for ident, chapter in CHAPTERS.items() if chapter == 6)


def _t(a):
    return np.swapaxes(a, -1, -2)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---- students' solutions, right and wrong ---------------------------------------------------

def shapes_student(q, k, v, *, out_from="broadcast", width_of="v", sum_grads=True, dk_rows="k"):
    batch = np.broadcast_shapes(q[:-2], k[:-2], v[:-2]) if out_from == "broadcast" else q[:-2]
    out = tuple(batch) + (q[-2], (v if width_of == "v" else q)[-1])
    if not sum_grads:
        return out, tuple(batch) + q[-2:], tuple(batch) + k[-2:], tuple(batch) + v[-2:]
    return out, q, k[:-2] + ((k if dk_rows == "k" else q)[-2], k[-1]), v


def softmax_vjp_jacobian(x, g):
    """Right, by another route: the explicit Jacobian diag(a) - a a^T, row by row."""
    a = _softmax(x)
    jacobian = a[..., :, None] * (np.eye(x.shape[-1], dtype=x.dtype) - a[..., None, :])  # (..., m, m)
    return np.einsum("...i,...ij->...j", g, jacobian)


def linear_student(x, w, g, *, dx_w=False, transpose=_t, sum_batch=True, db_sum=True):
    dx = g @ (w if dx_w else w.T)
    dw = transpose(x) @ g
    db = g.sum(axis=-2) if db_sum else g
    if sum_batch:
        dw, db = dw.reshape(-1, *w.shape).sum(axis=0), db.reshape(-1, w.shape[-1]).sum(axis=0) if db_sum else db
    return dx, dw, db


def linear_reshaped(x, w, g):
    """Right, by another route: every token of the batch as one long matrix."""
    flat_x, flat_g = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
    return g @ w.T, flat_x.T @ flat_g, flat_g.sum(axis=0)


def attention_student(q, k, v, g, *, transpose=_t, dv_a=False, dk_plain=False, rowsum=True, scale_dq=True):
    scale = 1 / math.sqrt(q.shape[-1])
    a = _softmax(q @ transpose(k) * scale)
    dv = (a if dv_a else transpose(a)) @ g
    da = g @ transpose(v)
    ds = a * (da - np.sum(da * a, axis=-1, keepdims=True)) if rowsum else da * a
    dq = ds @ k * (scale if scale_dq else 1.0)
    dk = (ds if dk_plain else transpose(ds)) @ q * scale
    return dq, dk, dv


def layer_norm_student(x, g, *, mean_path=True, var_path=True, eps=1e-5):
    mu, sd = x.mean(axis=-1, keepdims=True), np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    y = (x - mu) / sd
    out = g - (g.mean(axis=-1, keepdims=True) if mean_path else 0.0)
    return (out - (y * (g * y).mean(axis=-1, keepdims=True) if var_path else 0.0)) / sd


def layer_norm_by_sums(x, g):
    """Right, by another route: the appendix's four sums S1, S2, H1, Hx and the chain rule through them."""
    d = x.shape[-1]
    s1, s2 = x.sum(-1, keepdims=True), (x * x).sum(-1, keepdims=True)
    h1, hx = g.sum(-1, keepdims=True), (g * x).sum(-1, keepdims=True)
    mu = s1 / d
    r = 1 / np.sqrt(s2 / d - mu * mu + 1e-5)
    # L = (Hx - mu H1) r, with dmu/dx_j = 1/d and dr/dx_j = -r^3 (x_j - mu) / d
    return r * g - r * h1 / d - (hx - mu * h1) * r ** 3 * (x - mu) / d


def _planted():
    """The backward pass with the bug, from the notebook's listing of Exercise 6.6."""
    listing = re.search(r"```python\n(def ffn_vjp\(.*?)```", NOTEBOOK, re.S).group(1)
    namespace = {"np": np}
    exec(listing, namespace)  # noqa: S102 - the notebook's own listing
    return listing, namespace["ffn_vjp"]


def ffn_student(x, w1, w2, g, *, relu_grad):
    h = np.maximum(x @ w1, 0)
    dpre = g @ w2.T * relu_grad(x @ w1, h)
    return dpre @ w1.T, x.T @ dpre, h.T @ g


WRONG = {
    "attention_grad_shapes": [
        ("output_width_d_k", lambda q, k, v: shapes_student(q, k, v, width_of="q")),
        ("gradients_not_summed", lambda q, k, v: shapes_student(q, k, v, sum_grads=False)),
        ("output_batch_of_q", lambda q, k, v: shapes_student(q, k, v, out_from="q")),
        ("dk_rows_of_dq", lambda q, k, v: shapes_student(q, k, v, dk_rows="q")),
    ],
    "softmax_vjp": [
        ("no_rowsum_term", lambda x, g: _softmax(x) * g),
        ("unweighted_rowsum", lambda x, g: _softmax(x) * (g - g.sum(axis=-1, keepdims=True))),
        ("no_max_shift", lambda x, g: (lambda a: a * (g - (a * g).sum(-1, keepdims=True)))(
            np.exp(x) / np.exp(x).sum(-1, keepdims=True))),
        ("dtype_changed", lambda x, g: softmax_vjp_jacobian(x.astype(float), g.astype(float))),
        ("jacobian_of_one_row", lambda x, g: g @ (np.diag(_softmax(x)) - np.outer(_softmax(x), _softmax(x)))),
    ],
    "linear_vjp": [
        ("dx_uses_w", lambda x, w, g: linear_student(x, w, g, dx_w=True)),
        ("transpose_with_T", lambda x, w, g: linear_student(x, w, g, transpose=np.transpose)),
        ("not_summed_over_batch", lambda x, w, g: linear_student(x, w, g, sum_batch=False)),
        ("db_not_summed", lambda x, w, g: linear_student(x, w, g, db_sum=False)),
    ],
    "attention_vjp": [
        ("dv_uses_a", lambda q, k, v, g: attention_student(q, k, v, g, dv_a=True)),
        ("dk_from_ds", lambda q, k, v, g: attention_student(q, k, v, g, dk_plain=True)),
        ("no_rowsum_term", lambda q, k, v, g: attention_student(q, k, v, g, rowsum=False)),
        ("dq_missing_scale", lambda q, k, v, g: attention_student(q, k, v, g, scale_dq=False)),
        ("transpose_with_T", lambda q, k, v, g: attention_student(q, k, v, g, transpose=np.transpose)),
        ("no_scale", lambda q, k, v, g: attention_student(q * math.sqrt(q.shape[-1]), k, v, g, scale_dq=False)),
    ],
    "layer_norm_vjp": [
        ("no_mean_term", lambda x, g: layer_norm_student(x, g, mean_path=False)),
        ("no_variance_term", lambda x, g: layer_norm_student(x, g, var_path=False)),
        ("constant_statistics", lambda x, g: g / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)),
        ("no_eps", lambda x, g: layer_norm_student(x, g, eps=0.0)),
    ],
    "fix_ffn_vjp": [
        ("multiplies_by_activation", _planted()[1]),
        ("no_relu_gradient", lambda x, w1, w2, g: ffn_student(x, w1, w2, g, relu_grad=lambda pre, h: h >= 0)),
        ("relu_mask_inverted", lambda x, w1, w2, g: ffn_student(x, w1, w2, g, relu_grad=lambda pre, h: pre < 0)),
        ("sigmoid_derivative", lambda x, w1, w2, g: ffn_student(x, w1, w2, g, relu_grad=lambda pre, h: h * (1 - h))),
    ],
}
CASES = [(ident, expected, fn) for ident, rows in WRONG.items() for expected, fn in rows]


def test_every_backprop_exercise_has_three_wrong_solutions():
    assert set(WRONG) == set(BACKPROP) and len(BACKPROP) >= 5
    assert all(len(rows) >= 3 for rows in WRONG.values())


@pytest.mark.parametrize("ident, expected, fn", CASES, ids=[f"{i}-{e}" for i, e, _ in CASES])
def test_wrong_solution_fails_with_its_mistake(ident, expected, fn):
    result = check(ident, fn)
    assert not result and result.status == "failed"
    assert result.mistake == expected, str(result)
    text = str(result)
    assert "expected" in text and "returned" in text and "input" in text


@pytest.mark.parametrize("ident, fn", [("softmax_vjp", softmax_vjp_jacobian), ("linear_vjp", linear_reshaped),
                                       ("layer_norm_vjp", layer_norm_by_sums)])
def test_a_right_solution_by_another_route_passes(ident, fn):
    result = check(ident, fn)
    assert result and result.mistake is None, str(result)


def test_a_diagnosis_names_the_gradient_at_fault():
    text = str(check("attention_vjp", WRONG["attention_vjp"][0][1]))
    assert "wrong: dv; right: dq, dk." in text and "dq = " in text and "A^T G" in text
    text = str(check("linear_vjp", lambda x, w, g: (g @ w.T, _t(x) @ g, g.sum(axis=-2))))
    assert "wrong: dw, db; right: dx." in text  # the batch case: dw and db keep the batch axis
    assert "shape" in text and "(2, 3, 2)" not in text


def test_a_batched_transpose_is_named_from_the_error_it_raises():
    result = check("linear_vjp", WRONG["linear_vjp"][1][1])
    assert result.mistake == "transpose_with_T" and "raised ValueError" in str(result)
    assert "np.swapaxes" in str(result) and "case 3 of 4" in str(result)  # the first batched case


def test_an_error_from_another_operation_is_not_blamed_on_a_transpose():
    def einsum_without_ellipsis(x, w, g):  # raises on the batch case, but not in a matmul
        return g @ w.T, np.einsum("nd,ne->de", x, g), g.reshape(-1, w.shape[-1]).sum(0)

    result = check("linear_vjp", einsum_without_ellipsis)
    assert not result and result.mistake is None and "raised ValueError" in str(result)


def test_results_in_the_wrong_form_get_a_clear_message():
    gradients = check("attention_vjp", lambda q, k, v, g: [q, k])
    assert not gradients and "(dq, dk, dv) as a tuple" in str(gradients) and "list of 2" in str(gradients)
    shapes = check("attention_grad_shapes", lambda q, k, v: np.zeros(4))
    assert not shapes and "tuple of 4 shapes" in str(shapes)
    dtype = check("linear_vjp", lambda x, w, g: (g @ w.T, (_t(x) @ g).reshape(-1, *w.shape).sum(0).astype(float),
                                                 g.reshape(-1, w.shape[-1]).sum(0)))
    assert dtype.mistake == "dtype_changed" and str(dtype).count("dw:") == 1  # the float32 case, dw named


def test_a_solution_that_changes_g_in_place_is_told_so():
    def in_place(x, w, g):
        dx, dw, db = linear_reshaped(x, w, g)
        g *= 0
        return dx, dw, db

    assert check("linear_vjp", in_place).mistake == "mutates_input"


def test_the_planted_bug_is_one_line_away_from_the_folded_fix():
    listing, _ = _planted()
    fix = re.search(r"<summary>Solution</summary>\s*```python\n(def ffn_vjp\(.*?)```", NOTEBOOK, re.S).group(1)
    code = [[line.split("#")[0].rstrip() for line in text.splitlines()] for text in (listing, fix)]
    assert len(code[0]) == len(code[1])
    assert [a for a, b in zip(*code) if a != b] == ["    dpre = dh * h"]


# ---- the references, checked by another route: central finite differences --------------------

def _forward(ident):
    """The forward map of an exercise, in numpy, as a function of the gradients' arguments."""
    def attention(q, k, v):
        return _softmax(q @ _t(k) / math.sqrt(q.shape[-1])) @ v

    def layer_norm(x):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)

    return {"softmax_vjp": _softmax, "layer_norm_vjp": layer_norm, "attention_vjp": attention,
            "linear_vjp": lambda x, w, b: x @ w + b,
            "fix_ffn_vjp": lambda x, w1, w2: np.maximum(x @ w1, 0) @ w2}[ident]


def _fd_cases():
    for ident in ("softmax_vjp", "linear_vjp", "attention_vjp", "layer_norm_vjp", "fix_ffn_vjp"):
        for number, case in enumerate(EXERCISE_TABLE[ident].cases()):
            if case.args[0].dtype == np.float64:
                yield pytest.param(ident, case, id=f"{ident}-{number + 1}")


@pytest.mark.parametrize("ident, case", list(_fd_cases()))
def test_reference_matches_central_finite_differences(ident, case):
    """<g, f(args + t u)> differentiated at t = 0 by central differences, against sum <grad_i, u_i>."""
    spec = EXERCISE_TABLE[ident]
    *args, g = case.args
    grads = spec.reference(*case.args)
    grads = list(grads) if isinstance(grads, tuple) else [grads]
    if ident == "linear_vjp":  # db is the gradient of a bias the reference does not take
        args.append(np.zeros(args[1].shape[-1]))
    rng = np.random.default_rng(2024)
    directions = [rng.standard_normal(a.shape) for a in args]
    f, h = _forward(ident), 1e-6

    def along(t):
        return float(np.sum(g * f(*(a + t * u for a, u in zip(args, directions)))))

    numeric = (along(h) - along(-h)) / (2 * h)

    def predicted(grads):
        return sum(float(np.sum(d * u)) for d, u in zip(grads, directions))

    assert math.isclose(numeric, predicted(grads), rel_tol=1e-6, abs_tol=1e-6), (numeric, predicted(grads))
    # the comparison has teeth: every wrong variant of the grader that returns gradients of the
    # right shapes, different from the reference's, misses the finite difference on this case
    for mistake in spec.mistakes:
        with np.errstate(all="ignore"):
            try:
                wrong = mistake.variant(*case.args)
            except ValueError:  # a transpose that does not fit this case's shapes
                continue
        wrong = list(wrong) if isinstance(wrong, tuple) else [wrong]
        if [np.shape(w) for w in wrong] == [np.shape(d) for d in grads] and not all(
                np.allclose(w, d, rtol=1e-6, atol=1e-9) for w, d in zip(wrong, grads)):
            assert not math.isclose(numeric, predicted(wrong), rel_tol=1e-6, abs_tol=1e-6), mistake.id


def test_float32_answers_are_compared_at_float32_precision():
    """A right float32 answer by another route differs from the reference in its last bits: it must
    pass (tolerance 1e-4), while an error of 1e-3 must not."""
    from attncore._practice import close

    reference = np.linspace(-1, 1, 7, dtype=np.float32)
    assert close(reference, reference * np.float32(1 + 4e-7))
    assert not close(reference, reference * np.float32(1 + 1e-3))
    wide = reference.astype(np.float64)
    assert not close(wide, wide * (1 + 4e-7))  # float64 against float64: 1e-7
