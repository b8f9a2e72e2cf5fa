"""Permutation helpers: matrices, inverses, token permutation, errors."""

import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

from attncore import inverse_permutation, permutation_matrix, permute_tokens
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
    with pytest.raises(ValueError, match="perm must contain each of"):
        permutation_matrix(bad)


@pytest.mark.parametrize("bad", [[0.0, 1.0], [True, False]])
def test_non_integer_permutation_raises_type_error(bad):
    with pytest.raises(TypeError, match="perm must be a 1-d array of integers"):
        inverse_permutation(bad)


def test_permutation_of_wrong_rank_raises_value_error():
    with pytest.raises(ValueError, match=r"perm must be a 1-d array of integers, got shape \(1, 2\)"):
        inverse_permutation([[0, 1]])


def test_length_mismatch():
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 3, d\), got shape \(4, 2\)"):
        permute_tokens(np.zeros((4, 2)), [2, 0, 1])
