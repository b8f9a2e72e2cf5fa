"""attncore._attention: checks added to kill surviving mutants (see the appendix "How strong is the evidence").

Each test says which mutants it kills, by the change they make (mutmut's numbers are not stable).
"""

import math
import re
import sys

import numpy as np
import pytest

from attncore import (
    attention,
    attention_weights,
    causal_mask,
    merge_heads,
    multi_head_attention,
    split_heads,
)
from strength import raises_naming

module = sys.modules["attncore._attention"]


def weights(d, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(d, d)).astype(dtype) for _ in range(4)]


# ------------------------------------------------------------------ errors name the argument


def test_split_and_merge_heads_name_x_and_the_expected_axes():
    """Kills, in split_heads and merge_heads, ``as_float_array(x, "x", spec)`` with the
    spec dropped or None (a 1-D or 2-D x then fails later with numpy's AxisError, which names
    no argument), the name mangled ("XXxXX") and each axis letter mangled ("XXnXX", "N"...)."""
    with raises_naming(ValueError, "x", "(..., n, d)", "got shape (4,)"):
        split_heads(np.ones(4), 2)
    with raises_naming(ValueError, "x", "(..., h, n, k)", "got shape (2, 3)"):
        merge_heads(np.ones((2, 3)))
    with raises_naming(TypeError, "x"):
        split_heads(np.ones((2, 4)) > 0, 2)
    with raises_naming(TypeError, "x"):
        merge_heads(np.ones((2, 2, 4)) > 0)


def test_multi_head_attention_names_every_bad_argument():
    """Kills in multi_head_attention: x's spec dropped or None (a 1-D x then raises IndexError),
    x's name or axis letters mangled; "causal" mangled; the names w_k, w_v, w_o, b_q, b_k, b_o
    mangled ("XXw_kXX", "B_K"...); the mask's target "the scores (..., n, m)" dropped or mangled."""
    d = 4
    w = weights(d)
    x = np.ones((3, d))
    with raises_naming(ValueError, "x", "(..., n, d)", "got shape (4,)"):
        multi_head_attention(np.ones(d), *w, 2)
    with raises_naming(TypeError, "causal"):
        multi_head_attention(x, *w, 2, causal=1)
    for i, name in enumerate(("w_q", "w_k", "w_v", "w_o")):
        bad = list(w)
        bad[i] = np.ones((d, d + 1))
        with raises_naming(ValueError, name, f"({d}, {d})", f"got shape ({d}, {d + 1})"):
            multi_head_attention(x, *bad, 2)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        with raises_naming(ValueError, name, f"({d},)", "got shape (3,)"):
            multi_head_attention(x, *w, 2, **{name: np.ones(3)})
    with raises_naming(ValueError, "mask", "(3, 4)", "of the scores (..., n, m), (2, 3, 3)"):
        multi_head_attention(np.ones((2, 3, d)), *w, 2, mask=np.ones((3, 4), bool))


def test_multi_head_attention_checks_every_bias_before_computing():
    """Every parameter is checked under the caller's name before any work (and before the mask):
    a bias of the wrong shape together with a non-boolean mask is reported as the bias's
    ValueError.  Kills ``as_float_array(b, name, (d,))`` with the spec dropped or None, where a
    bias of the wrong shape is found only by linear() after the attention, so the mask's
    TypeError comes first."""
    d = 4
    w = weights(d)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        with raises_naming(ValueError, name, f"({d},)"):
            multi_head_attention(np.ones((3, d)), *w, 2, mask=np.ones((3, 3)), **{name: np.ones((1, d))})


def test_multi_head_attention_names_a_float64_bias_too_large_for_float32():
    """float32 tokens and weights compute in float32; a float64 bias beyond float32's largest
    number is refused, naming the bias.  The check is linear()'s, made with the name
    multi_head_attention passes.  Kills name="w_q"/"w_k"/"w_v"/"w_o" dropped or mangled
    ("XXw_qXX", "W_Q"...: the bias is then called "b" or "bias of XXw_qXX"), and dropping b_k from
    the key projection (``linear(context, w_k, None, ...)`` or without b_k: the bias of the keys
    changes no weight in exact arithmetic, so only this error shows that it is used)."""
    d = 4
    w = weights(d, np.float32)
    x = np.random.default_rng(1).normal(size=(3, d)).astype(np.float32)
    for name in ("b_q", "b_k", "b_v", "b_o"):
        b = np.zeros(d)
        b[1] = 1e39
        with raises_naming(ValueError, name, "float32"):
            multi_head_attention(x, *w, 2, **{name: b})


def test_multi_head_attention_batch_axes_of_x_and_context():
    """The batch axes of x and of the context broadcast together, and a mismatch names both.
    Kills ``batch_shape(("x", x, 2), ("context", context, 2))`` with either entry dropped (the
    mask is then checked against the wrong shape, or the error comes later under other names)
    or a name mangled ("XXxXX", "X", "XXcontextXX", "CONTEXT")."""
    d = 4
    w = weights(d)
    rng = np.random.default_rng(2)
    x, context = rng.normal(size=(2, 3, d)), rng.normal(size=(5, d))
    with pytest.raises(ValueError, match=re.escape("batch axes do not broadcast: x (2, 3, 4), context (3, 5, 4)")):
        multi_head_attention(x, *w, 2, context=np.ones((3, 5, d)))
    # x has a batch axis the context lacks, and the context one x lacks: the mask has both
    mask = rng.random((2, 3, 5)) < 0.7
    mask[..., 0] = True
    got = multi_head_attention(x, *w, 2, context=context, mask=mask)
    want = np.stack([multi_head_attention(x[i], *w, 2, context=context, mask=mask[i]) for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    x2, context2 = rng.normal(size=(3, d)), rng.normal(size=(2, 5, d))
    got = multi_head_attention(x2, *w, 2, context=context2, mask=mask)
    want = np.stack([multi_head_attention(x2, *w, 2, context=context2[i], mask=mask[i]) for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_attention_names_every_bad_argument():
    """Kills in attention: "causal" mangled; v's match=("k", k) mangled; "reweight" mangled in
    as_float_array and in check_fits; the reweight's target "the weights (..., n, m)" dropped or
    mangled; and in attention_weights "causal" mangled."""
    q, k, v = np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2))
    with raises_naming(TypeError, "causal"):
        attention(q, k, v, causal=1)
    with raises_naming(TypeError, "causal"):
        attention_weights(q, k, causal=1)
    with raises_naming(ValueError, "v", "(..., 5, v)", "to match k of shape (5, 4)"):
        attention(q, k, np.ones((4, 2)))
    with raises_naming(TypeError, "reweight"):
        attention(q, k, v, reweight=np.ones((3, 5)) > 0)
    with raises_naming(ValueError, "reweight", "(2, 5)", "the weights (..., n, m), (3, 5)"):
        attention(q, k, v, reweight=np.ones((2, 5)))
    f32 = np.float32
    with raises_naming(ValueError, "reweight", "float32"):
        attention(q.astype(f32), k.astype(f32), v.astype(f32), reweight=np.full((3, 5), 1e39))


def test_attention_batch_axes_of_q_k_and_v():
    """q and k broadcast, v does not: the error lists all three.  Kills
    ``batch_shape(("q", q, 2), ("k", k, 2), ("v", v, 2))`` with an entry dropped or a name
    mangled ("XXqXX", "Q", "XXkXX", "K", "XXvXX", "V")."""
    with pytest.raises(ValueError, match=re.escape("batch axes do not broadcast: q (2, 3, 4), k (5, 4), v (3, 5, 2)")):
        attention(np.ones((2, 3, 4)), np.ones((5, 4)), np.ones((3, 5, 2)))


def test_reweight_is_checked_against_the_dtype_of_the_scores():
    """A float64 reweight must fit result_type(q, k), the dtype of the scores: with float32
    queries and float16 keys that is float32, so 1e5 (beyond float16) is accepted; with float64
    queries and float32 keys it is float64, so 1e39 is accepted.  Kills
    ``np.result_type(q, k)`` -> ``np.result_type(k)`` in attention's check_fits."""
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    for dq, dk, big in ((np.float32, np.float16, 1e5), (np.float64, np.float32, 1e39)):
        reweight = np.full((2, 4), big)
        got = attention(q.astype(dq), k.astype(dk), v.astype(dq), reweight=reweight)
        want = (attention_weights(q.astype(dq), k.astype(dk)).astype(np.float64) * big) @ v.astype(dq)
        assert got.dtype == dq
        np.testing.assert_allclose(got, want, rtol=1e-3)
