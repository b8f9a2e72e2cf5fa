"""attncore.synthesizer: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import math

import numpy as np
import pytest

from attncore._synthesizer import (
    dense_features,
    dense_scores,
    factorized_dense_scores,
    factorized_random_scores,
    mixture_scores,
    mixture_weights,
    random_scores,
    synthesizer_attention,
    synthesizer_costs,
)
from messages import raises_message
from test_synthesizer import factorized_loop

RNG = np.random.default_rng(11)


def normal(*shape):
    return RNG.normal(size=shape)


# ---- errors name the argument, the expected shape and the variant ------------------------------

def test_dense_errors():
    x = normal(3, 2)
    with raises_message(ValueError, "w1", names=["x"], shapes=["(2, f)", "(3, 2)"]):  # kills match=("XXxXX", x)
        dense_features(x, normal(4, 5), normal(5, 3))
    # w2 is checked against w1 (the caller's argument), not against the hidden layer inside linear(): kills
    # as_float_array(w2, ...) with spec None or no spec, with match None, no match, ("XXw1XX", w1), ("W1", w1)
    with raises_message(ValueError, "w2", names=["w1"], shapes=["(5, e)", "(2, 5)"]):
        dense_features(x, normal(2, 5), normal(4, 3))
    with raises_message(ValueError, "b1", shapes=["(5,)"]):
        dense_features(x, normal(2, 5), normal(5, 3), b1=normal(4))
    # dense_features checks x itself, before w1 is checked against it: kills as_float_array(x, "XXxXX", ...),
    # spec None or no spec, and the axis letters "XXnXX", "N", "XXdXX", "D"
    with raises_message(TypeError, "x"):
        dense_features(x > 0, normal(2, 5), normal(5, 3))
    with raises_message(ValueError, "x", shapes=["(..., n, d)", "()"]):
        dense_features(np.float64(1.0), normal(1, 5), normal(5, 3))
    with raises_message(ValueError, "x", shapes=["(..., n, d)", "(3,)"]):
        dense_features(normal(3), normal(2, 5), normal(5, 3))
    with raises_message(TypeError, "x"):
        dense_scores(x > 0, normal(2, 5), normal(5, 3))
    with raises_message(ValueError, "x", shapes=["(..., n, d)"]):
        dense_scores(normal(2), normal(2, 5), normal(5, 3))
    with raises_message(TypeError, "w2"):
        dense_scores(x, normal(2, 5), normal(5, 3) > 0)
    with raises_message(ValueError, "w2", shapes=["(f, n)"]):
        dense_scores(x, normal(2, 5), normal(5))
    # the facts: the variant, the parameter and its shape, the length it fixes, the length given, the remedy
    with raises_message(ValueError, "w2", values=["Dense", 4, 3], shapes=[(5, 4)], remedy=("pad", "4")):
        dense_scores(x, normal(2, 5), normal(5, 4))


def test_random_errors():
    with raises_message(TypeError, "r"):
        random_scores(normal(3, 3) > 0, 3)
    with raises_message(ValueError, "r", shapes=["(L, L)"]):
        random_scores(normal(3), 3)
    r = normal(3, 3)
    r[1, 2] = np.nan
    with raises_message(ValueError, "r"):
        random_scores(r, 3)
    with raises_message(ValueError, "r", values=["Random", 4, 3], shapes=[(4, 4)], remedy=("pad", "4")):
        random_scores(normal(4, 4), 3)


def test_factorized_random_errors():
    with raises_message(TypeError, "r1"):
        factorized_random_scores(normal(3, 2) > 0, normal(3, 2), 3)
    with raises_message(TypeError, "r2"):
        factorized_random_scores(normal(3, 2), normal(3, 2) > 0, 3)
    with raises_message(ValueError, "r1", shapes=["(L, r)"]):
        factorized_random_scores(normal(3), normal(3, 2), 3)
    with raises_message(ValueError, "r2", names=["r1"], shapes=["(3, 2)", "(3, 2)"]):  # kills match=("XXr1XX", r1)
        factorized_random_scores(normal(3, 2), normal(3, 3), 3)
    with raises_message(ValueError, "r1", values=["Factorized Random", 4, 3], shapes=[(4, 2)], remedy=("pad", "4")):
        factorized_random_scores(normal(4, 2), normal(4, 2), 3)


@pytest.mark.parametrize("call", [
    lambda n: random_scores(normal(3, 3), n),
    lambda n: factorized_random_scores(normal(3, 2), normal(3, 2), n),
], ids=["random", "factorized random"])
def test_length_argument_errors_name_n(call):
    """The length ``n`` is checked as a count named ``n``.

    Kills, in random_scores and factorized_random_scores, check_count(n, "n") => check_count(n, None),
    check_count(n, "XXnXX") and check_count(n, "N").
    """
    with raises_message(ValueError, "n", values=[1, 0], says="out of range"):
        call(0)
    with raises_message(TypeError, "n", values=["float", 3.0], says="integer"):
        call(3.0)


def test_factorized_dense_errors():
    with raises_message(TypeError, "f_a"):
        factorized_dense_scores(normal(6, 2) > 0, normal(6, 3))
    with raises_message(TypeError, "f_b"):
        factorized_dense_scores(normal(6, 2), normal(6, 3) > 0)
    with raises_message(ValueError, "f_a", shapes=["(..., n, a)"]):
        factorized_dense_scores(normal(6), normal(6, 3))
    with raises_message(ValueError, "f_b", names=["f_a"], shapes=["(..., 6, b)", "(6, 2)"]):
        factorized_dense_scores(normal(6, 2), normal(6))  # kills match=None, no match, ("XXf_aXX", f_a), ("F_A", f_a)
    # the choices are named: kills check_choice(tiling, "XXtilingXX", ...) and check_choice(form, "XXformXX", ...)
    with raises_message(ValueError, "tiling", values=["stack"], options=["tile", "repeat"]):
        factorized_dense_scores(normal(6, 2), normal(6, 3), tiling="stack")
    with raises_message(ValueError, "form", values=["transpose"], options=["as_written", "transposed"]):
        factorized_dense_scores(normal(6, 2), normal(6, 3), form="transpose")
    with raises_message(ValueError, "f_a", names=["f_b"], shapes=[(2, 6, 2), (3, 6, 3)], says="broadcast"):
        factorized_dense_scores(normal(2, 6, 2), normal(3, 6, 3))
    # the facts: both factors and their widths a = 2, b = 4, their product 8 and the length n = 6
    with raises_message(ValueError, "f_a", names=["f_b", "a", "b", "n"], values=[2, 4, 8, 6], says="divisible"):
        factorized_dense_scores(normal(6, 2), normal(6, 4))


def test_mixture_errors_name_the_matrix():
    with raises_message(TypeError, "logits"):
        mixture_weights(np.array([True, False]))
    with raises_message(ValueError, "logits", shapes=["(N,)"]):
        mixture_weights(np.zeros((2, 2)))
    with raises_message(ValueError, "logits", shapes=[(0,)], says="not empty"):  # kills the "XX...XX" message
        mixture_weights(np.zeros(0))
    # the type of the rejected argument is named: kills {type(None).__name__} for {type(scores).__name__}
    with raises_message(TypeError, "scores", values=["str"]):
        mixture_scores("abc", np.zeros(3))
    with raises_message(TypeError, "scores", values=["float"]):
        mixture_scores(2.5, np.zeros(1))
    with raises_message(TypeError, "scores[1]"):
        mixture_scores([normal(3, 3), normal(3, 3) > 0], np.zeros(2))
    with raises_message(ValueError, "scores[0]", shapes=["(..., n, n)"]):
        mixture_scores([normal(3), normal(3, 3)], np.zeros(2))
    with raises_message(ValueError, "scores[0]", shapes=[(3, 4)], says="square"):
        mixture_scores([normal(3, 4)], np.zeros(1))
    with raises_message(ValueError, "scores[0]", shapes=[(2, 3, 4)], says="square"):
        mixture_scores([normal(2, 3, 4)], np.zeros(1))  # batched: the last two axes decide


def test_synthesizer_attention_errors():
    x, s, w_v = normal(3, 2), normal(3, 3), normal(2, 4)
    with raises_message(TypeError, "x"):
        synthesizer_attention(x > 0, s, w_v)
    with raises_message(TypeError, "scores"):
        synthesizer_attention(x, s > 0, w_v)
    with raises_message(ValueError, "x", shapes=["(..., n, d)"]):
        synthesizer_attention(normal(3), s, w_v)
    with raises_message(ValueError, "scores", shapes=["(..., n, m)"]):
        synthesizer_attention(x, normal(3), w_v)
    with raises_message(ValueError, "x", names=["scores"], shapes=[(2, 3, 2), (3, 3, 3)], says="broadcast"):
        synthesizer_attention(normal(2, 3, 2), normal(3, 3, 3), w_v)
    with raises_message(ValueError, "w_v", shapes=["(2, e)"]):
        synthesizer_attention(x, s, normal(3, 4))
    # the mask is checked against the scores, named: kills check_mask(..., None), "XXscoresXX" and "SCORES"
    with raises_message(ValueError, "mask", names=["scores"], shapes=[(2, 3), (3, 3)], says="broadcast"):
        synthesizer_attention(x, s, w_v, mask=np.ones((2, 3), dtype=bool))


# ---- values against independent routes ----------------------------------------------------------

@pytest.mark.parametrize("tiling", ["tile", "repeat"])
@pytest.mark.parametrize("form", ["as_written", "transposed"])
def test_factorized_dense_batched_matches_loop_per_slice(tiling, form):
    fa, fb = normal(2, 6, 2), normal(2, 6, 3)
    got = factorized_dense_scores(fa, fb, tiling=tiling, form=form)
    for t in range(2):
        np.testing.assert_array_equal(got[t], factorized_loop(fa[t], fb[t], tiling, form))


def test_mixture_with_deeper_batch_matches_the_weighted_sum():
    s0, s1 = normal(1, 2, 3, 3), normal(3, 3)
    logits = np.array([0.3, -0.4])
    e = [math.exp(v) for v in logits]
    alpha = [v / sum(e) for v in e]
    got = mixture_scores([s0, s1], logits)
    np.testing.assert_allclose(got, alpha[0] * s0 + alpha[1] * s1, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("logits_dtype,scores_dtype", [
    (np.float32, np.float32), (np.float64, np.float32), (np.float32, np.float64)])
def test_mixture_keeps_the_promoted_dtype(logits_dtype, scores_dtype):
    out = mixture_scores([normal(3, 3).astype(scores_dtype)] * 2, np.zeros(2, dtype=logits_dtype))
    assert out.dtype == np.promote_types(logits_dtype, scores_dtype)


def test_synthesizer_attention_applies_the_mask():
    # causal mask: row i averages the values of tokens 0..i with weights exp(s_ij) / sum
    x, s, w_v = normal(4, 2), normal(4, 4), normal(2, 3)
    got = synthesizer_attention(x, s, w_v, mask=np.tril(np.ones((4, 4), dtype=bool)))
    values = x @ w_v
    for i in range(4):
        e = [math.exp(s[i, j]) for j in range(i + 1)]
        ref = sum(e[j] / sum(e) * values[j] for j in range(i + 1))
        np.testing.assert_allclose(got[i], ref, rtol=1e-12, atol=1e-14)


# ---- costs --------------------------------------------------------------------------------------

def test_costs_defaults():
    # rank defaults to min(8, n): factorized random holds two n x rank factors
    assert synthesizer_costs(16, 4)["factorized random"]["score_params"] == 2 * 16 * 8
    # a defaults to the smallest divisor of n with a^2 >= n: a = b = 4 for n = 16, a = 7, b = 1
    # for the prime 7, a = b = 1 for n = 1; factorized dense holds one shared hidden layer
    # (d f) and two output layers (f (a + b)), weights only
    d = f = 4
    for n, a, b in [(16, 4, 4), (7, 7, 1), (1, 1, 1)]:
        assert synthesizer_costs(n, d)["factorized dense"]["score_params"] == d * f + f * (a + b)


def test_costs_are_integers_and_accept_all_ones():
    costs = synthesizer_costs(1, 1)
    assert all(type(c) is int for variant in costs.values() for c in variant.values())
    assert all(type(c) is int for variant in synthesizer_costs(12, 4).values() for c in variant.values())


@pytest.mark.parametrize("bad", ["n", "d", "k", "v", "f", "a", "rank"])
def test_costs_reject_a_zero_size(bad):
    sizes = dict(n=4, d=4, k=4, v=4, f=4, a=1, rank=2)  # all given: no default hides the zero
    sizes[bad] = 0
    n, d = sizes.pop("n"), sizes.pop("d")
    with raises_message(ValueError, bad, values=[1, 0], says="out of range"):
        synthesizer_costs(n, d, **sizes)
