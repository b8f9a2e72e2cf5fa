"""Permutation helpers: matrices, inverses, token permutation, errors."""

import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

from attncore import inverse_permutation, permutation_matrix, permute_tokens
from messages import raises_message
from strategies import permutations, seeds


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_every_small_permutation_matrix_is_orthogonal(n):
    for perm in itertools.permutations(range(n)):
        p = permutation_matrix(perm)
        assert np.array_equal(p @ p.T, np.eye(n))
        assert np.array_equal(p.T, permutation_matrix(inverse_permutation(perm)))


@given(st.integers(1, 40).flatmap(permutations), seeds)
def test_matrix_matches_indexing(perm, seed):
    x = np.random.default_rng(seed).normal(size=(2, perm.size, 3))
    np.testing.assert_array_equal(permute_tokens(x, perm), x[:, perm])
    np.testing.assert_allclose(permutation_matrix(perm) @ x, x[:, perm], rtol=0, atol=0)
    np.testing.assert_array_equal(permute_tokens(permute_tokens(x, perm), inverse_permutation(perm)), x)


@pytest.mark.parametrize("bad", [[0, 0, 1], [1, 2, 3], [0, -1]])
def test_invalid_permutation_raises_value_error(bad):
    with raises_message(ValueError, "perm", values=[len(bad) - 1]):
        permutation_matrix(bad)


@pytest.mark.parametrize("bad", [[0.0, 1.0], [True, False]])
def test_non_integer_permutation_raises_type_error(bad):
    with raises_message(TypeError, "perm", dtypes=[np.asarray(bad).dtype], shapes=[(2,)], says="integer"):
        inverse_permutation(bad)


def test_permutation_of_wrong_rank_raises_value_error():
    with raises_message(ValueError, "perm", shapes=[(1, 2)], says="1-d"):
        inverse_permutation([[0, 1]])


def test_length_mismatch():
    with raises_message(ValueError, "x", shapes=["(..., 3, d)", (4, 2)]):
        permute_tokens(np.zeros((4, 2)), [2, 0, 1])
