"""attncore.shaw: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np
import pytest

from attncore._shaw import shaw_attention, shaw_relative_embeddings
from messages import raises_message

N, M, K, V = 3, 4, 2, 5


def good():
    rng = np.random.default_rng(3)
    return dict(q=rng.normal(size=(N, K)), k=rng.normal(size=(M, K)), v=rng.normal(size=(M, V)),
                rel_k=rng.normal(size=(N, M, K)), rel_v=rng.normal(size=(N, M, V)))


@pytest.mark.parametrize("name", ["q", "k", "v", "rel_k", "rel_v"])
def test_shaw_attention_names_an_argument_of_the_wrong_type(name):
    args = good()
    args[name] = args[name] > 0
    with raises_message(TypeError, name):
        shaw_attention(**args)


@pytest.mark.parametrize("name,shape,expected,others", [
    ("q", (K,), ["(..., n, k)"], []),
    # a shape taken from another argument names that argument and its shape too
    ("k", (K,), [f"(..., m, {K})", (N, K)], ["q"]),
    ("v", (V,), [f"(..., {M}, v)", (M, K)], ["k"]),
    ("rel_k", (N, M, K + 1), [f"({N}, {M}, {K})", (N, K)], ["q", "k"]),
    ("rel_v", (N, M, V + 1), [f"({N}, {M}, {V})", (M, V)], ["q", "v"]),
])
def test_shaw_attention_names_an_argument_of_the_wrong_shape(name, shape, expected, others):
    args = good()
    args[name] = np.zeros(shape)
    with raises_message(ValueError, name, names=others, shapes=[*expected, shape]):
        shaw_attention(**args)


@pytest.mark.parametrize("name", ["v", "rel_k", "rel_v"])
def test_shaw_attention_names_an_argument_holding_nan(name):
    args = good()
    args[name][(0,) * args[name].ndim] = np.nan
    with raises_message(ValueError, name):
        shaw_attention(**args)


def test_shaw_relative_embeddings_errors_name_the_argument():
    with raises_message(ValueError, "m"):
        shaw_relative_embeddings(2, 0, np.zeros((3, 1)))
    with raises_message(TypeError, "table"):
        shaw_relative_embeddings(2, 2, np.zeros((3, 1), dtype=bool))
    with raises_message(ValueError, "table", shapes=["(2K+1, k)"]):
        shaw_relative_embeddings(2, 2, np.zeros(3))


def test_shaw_attention_with_a_given_scale_matches_the_loop():
    # e_ij = s q_i . (k_j + a^K_ij), alpha = softmax_j(e_ij), z_i = sum_j alpha_ij (v_j + a^V_ij);
    # the scale s multiplies the content and the relative term alike
    args = good()
    s = 0.3
    got = shaw_attention(**args, scale=s)
    q, k, v, rk, rv = args["q"], args["k"], args["v"], args["rel_k"], args["rel_v"]
    for i in range(N):
        e = [np.exp(s * float(q[i] @ (k[j] + rk[i, j]))) for j in range(M)]
        z = sum(e[j] / sum(e) * (v[j] + rv[i, j]) for j in range(M))
        np.testing.assert_allclose(got[i], z, rtol=1e-12, atol=1e-14)


def test_shaw_attention_names_a_bad_normalize_and_scale():
    with raises_message(ValueError, "normalize", values=["sparsemax"], options=["softmax", "l2", "relu2", "none"]):
        shaw_attention(**good(), normalize="sparsemax")
    with raises_message(ValueError, "scale"):
        shaw_attention(**good(), scale=float("nan"))


def test_shaw_attention_without_features_says_the_default_scale_is_undefined():
    # k = 0: 1/sqrt(k) is undefined, with or without batch axes; the error names q and k = 0
    for batch in [(), (2,)]:
        args = good()
        args.update(q=np.zeros(batch + (N, 0)), k=np.zeros((M, 0)), rel_k=np.zeros((N, M, 0)))
        with raises_message(ValueError, "q", names=["k", "scale"], shapes=[batch + (N, 0)], says="undefined"):
            shaw_attention(**args)
        # with a scale given there is nothing to divide by: every score is 0, so the weights are uniform
        z = shaw_attention(**args, scale=0.5)
        np.testing.assert_allclose(z, np.broadcast_to(np.mean(args["v"] + args["rel_v"], axis=1), batch + (N, V)),
                                   rtol=1e-12)


def test_shaw_attention_accepts_no_queries():
    # n = 0 queries (with or without batch axes) is a valid, empty input: the result has shape (..., 0, v)
    args = good()
    for batch in [(), (2,)]:
        args.update(q=np.zeros(batch + (0, K)), rel_k=np.zeros((0, M, K)), rel_v=np.zeros((0, M, V)))
        assert shaw_attention(**args).shape == batch + (0, V)


def loop(q, k, v, rk, rv, s):
    out = []
    for i in range(q.shape[0]):
        e = [s * float(q[i].astype(np.float64) @ (k[j].astype(np.float64) + rk[i, j])) for j in range(k.shape[0])]
        w = np.exp(np.array(e) - max(e))
        out.append(sum(w[j] / w.sum() * (v[j].astype(np.float64) + rv[i, j]) for j in range(k.shape[0])))
    return np.array(out)


def test_shaw_attention_checks_the_scale_in_the_dtype_of_the_scores():
    # float16 scores are computed in float32, as attention computes them: 1e5, beyond float16's
    # largest number (65504), is accepted there; 1e39, beyond float32's, is refused, naming the scale
    args = {name: a.astype(np.float16) for name, a in good().items()}
    args["q"] = (args["q"] * 1e-4).astype(np.float16)
    z = shaw_attention(**args, scale=1e5)
    assert z.dtype == np.float16 and np.all(np.isfinite(z))
    with raises_message(ValueError, "scale", dtypes=["float32"]):
        shaw_attention(**args, scale=1e39)
    # one float32 operand of q and k makes the scores float32, where 1e5 is fine, in either order;
    # small queries keep the scaled scores of order 1, and the result is the loop's
    rng = np.random.default_rng(4)
    for dq, dk in [(np.float16, np.float32), (np.float32, np.float16)]:
        args = good()
        args["q"] = (args["q"] * 1e-4).astype(dq)
        args["k"] = args["k"].astype(dk)
        args["rel_k"] = rng.normal(size=(N, M, K)).astype(np.float32)
        z = shaw_attention(**args, scale=1e5)
        assert z.dtype == np.float64  # v and rel_v are float64
        ref = loop(args["q"], args["k"], args["v"], args["rel_k"].astype(np.float64), args["rel_v"], 1e5)
        np.testing.assert_allclose(z, ref, rtol=1e-3, atol=1e-5)


def test_float16_relative_scores_are_computed_in_float32():
    """float16 q and rel_k with a large scale: the relative scores (about 1e5 * 30) overflow
    float16 but not float32, the dtype attention computes float16 in. The result must match
    the same call in float32 (rounded to float16 once), not fail naming an argument `bias`
    that shaw_attention does not have; scores that overflow float32 too are an error naming
    the relative scores."""
    from attncore import shaw_attention

    rng = np.random.default_rng(0)
    q = rng.normal(size=(3, 4)).astype(np.float16)
    k = rng.normal(size=(3, 4)).astype(np.float32)
    rel_k = (10 * rng.normal(size=(3, 3, 4))).astype(np.float16)
    rel_v = np.zeros((3, 3, 4), np.float32)
    got = shaw_attention(q, k, k, rel_k, rel_v, scale=1e5)
    ref = shaw_attention(q.astype(np.float32), k, k, rel_k.astype(np.float32), rel_v, scale=1e5)
    assert got.dtype == np.float32 and np.array_equal(got, ref)
    with raises_message(ValueError, "rel_k", names=["scale", "q"], shapes=[(3, 4), (3, 3, 4)], dtypes=["float32"],
                            says="overflow", remedy=("shrink",)):
        shaw_attention(q, k, k, rel_k, rel_v, scale=1e37)


@pytest.mark.parametrize("wide", ["q", "k"])
def test_relative_scores_are_computed_in_the_dtype_of_the_scores(wide):
    """A float64 q or k makes attention's scores float64, and q . rel_k joins them there: the
    result must match a plain-loop float64 reference to 1e-12, which rounding q . rel_k to
    float32 (about 1e-7) would miss."""
    from attncore import softmax

    rng = np.random.default_rng(7)
    n, k_ = 4, 3
    a = {"q": rng.normal(size=(n, k_)), "k": rng.normal(size=(n, k_)),
         "rel_k": rng.normal(size=(n, n, k_))}
    v, rel_v = rng.normal(size=(n, 2)), np.zeros((n, n, 2))
    args = {name: (x if name in (wide, "rel_k") else x.astype(np.float32)) for name, x in a.items()}
    got = shaw_attention(args["q"], args["k"], v, args["rel_k"], rel_v)
    q, kk, rk = (args[name].astype(np.float64) for name in ("q", "k", "rel_k"))
    scores = np.array([[q[i] @ (kk[j] + rk[i, j]) for j in range(n)] for i in range(n)]) / np.sqrt(k_)
    ref = softmax(scores) @ v
    assert np.max(np.abs(got - ref)) < 1e-12, (wide, np.max(np.abs(got - ref)))


def test_a_scale_beyond_float32_is_refused_before_any_score_is_computed():
    """The scale is checked in the compute dtype first (the message says it is not
    representable there); overflowing scores are a separate error, and no overflow warning
    escapes on the way."""
    import warnings

    rng = np.random.default_rng(8)
    q = rng.normal(size=(3, 4)).astype(np.float32)
    r = np.zeros((3, 3, 4), np.float32)
    with raises_message(ValueError, "scale", values=[1e39], dtypes=["float32"], says="not representable"):
        shaw_attention(q, q, q, r, r, scale=1e39)
    # q . rel_k = 4e30 is finite in float32; times the scale 1e10 it is not
    ones, big = np.ones((3, 4), np.float32), np.full((3, 3, 4), 1e30, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with raises_message(ValueError, "rel_k", names=["scale", "q"], shapes=[(3, 4), (3, 3, 4)], dtypes=["float32"],
                            says="overflow", remedy=("shrink",)):
            shaw_attention(ones, ones, ones, big, r, scale=1e10)


def test_a_float64_rel_k_beyond_float32_is_an_error_naming_the_relative_scores():
    """With float32 q and k the scores are float32; a float64 rel_k of 1e39 cannot join them,
    and the error names the relative scores, not an internal argument."""
    q = np.ones((3, 4), np.float32)
    with raises_message(ValueError, "rel_k", names=["scale", "q"], shapes=[(3, 4), (3, 3, 4)], dtypes=["float32"],
                            says="overflow", remedy=("shrink",)):
        shaw_attention(q, q, q, np.full((3, 3, 4), 1e39), np.zeros((3, 3, 4)))


def test_shaw_attention_does_not_depend_on_how_its_inputs_lie_in_memory():
    """A strided q or rel_k gives the same bits as its contiguous copy (einsum sums in another
    order over a strided operand: without the contiguous copy the last bits differ)."""
    rng = np.random.default_rng(0)
    q_wide, k, v = rng.standard_normal((4, 32)), rng.standard_normal((4, 16)), rng.standard_normal((4, 2))
    rel_k_wide, rel_v = rng.standard_normal((4, 4, 32)), rng.standard_normal((4, 4, 2))
    q, rel_k = q_wide[:, ::2], rel_k_wide[..., ::2]  # strided views
    expected = shaw_attention(q.copy(), k, v, rel_k.copy(), rel_v)
    for args in ((q, rel_k.copy()), (q.copy(), rel_k), (q, rel_k)):
        assert np.array_equal(shaw_attention(args[0], k, v, args[1], rel_v), expected)
