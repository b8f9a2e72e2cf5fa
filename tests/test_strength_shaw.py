"""attncore.shaw: checks added to kill surviving mutants (see the appendix "How strong is the evidence")."""

import numpy as np
import pytest

from attncore._shaw import shaw_attention, shaw_relative_embeddings
from strength import raises_naming

N, M, K, V = 3, 4, 2, 5


def good():
    rng = np.random.default_rng(3)
    return dict(q=rng.normal(size=(N, K)), k=rng.normal(size=(M, K)), v=rng.normal(size=(M, V)),
                rel_k=rng.normal(size=(N, M, K)), rel_v=rng.normal(size=(N, M, V)))


@pytest.mark.parametrize("name", ["q", "k", "v", "rel_k", "rel_v"])
def test_shaw_attention_names_an_argument_of_the_wrong_type(name):
    args = good()
    args[name] = args[name] > 0
    with raises_naming(TypeError, name):
        shaw_attention(**args)


@pytest.mark.parametrize("name,shape,expected", [
    ("q", (K,), "(..., n, k)"),
    ("k", (K,), f"(..., m, {K})"),
    ("v", (V,), f"(..., {M}, v)"),
    ("rel_k", (N, M, K + 1), f"({N}, {M}, {K})"),
    ("rel_v", (N, M, V + 1), f"({N}, {M}, {V})"),
])
def test_shaw_attention_names_an_argument_of_the_wrong_shape(name, shape, expected):
    args = good()
    args[name] = np.zeros(shape)
    with raises_naming(ValueError, name, expected):
        shaw_attention(**args)


@pytest.mark.parametrize("name", ["v", "rel_k", "rel_v"])
def test_shaw_attention_names_an_argument_holding_nan(name):
    args = good()
    args[name][(0,) * args[name].ndim] = np.nan
    with raises_naming(ValueError, name):
        shaw_attention(**args)


def test_shaw_relative_embeddings_errors_name_the_argument():
    with raises_naming(ValueError, "m"):
        shaw_relative_embeddings(2, 0, np.zeros((3, 1)))
    with raises_naming(TypeError, "table"):
        shaw_relative_embeddings(2, 2, np.zeros((3, 1), dtype=bool))
    with raises_naming(ValueError, "table", "(2K+1, k)"):
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
