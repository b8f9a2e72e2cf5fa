"""The plain listings and formulas that pages teach run and say what the pages say.

`book/how_this_book_proves.md` teaches a three-line stable softmax before any attncore helper,
and Chapter 1 a row-blocked attention loop and T5's bucket formula in place of the package's
internals. Each listing is executed from the page itself, so that a change to the page or to the
package that made them disagree fails here. The references are independent of attncore where
they can be (40-digit arithmetic, the unblocked definition, the formula in float64).
"""

import re

import mpmath
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attncore import attention, softmax, t5_relative_bucket

BOOK = Path(__file__).resolve().parent.parent / "book"
PAGE = BOOK / "how_this_book_proves.md"
CHAPTER1 = BOOK / "transformer_fundamentals.md"


def page_listing(page=PAGE, name="stable_softmax") -> str:
    """The one fenced python listing of ``page`` that defines ``name``."""
    fence = re.compile(rf"^```python\n(def {name}\(.*?)^```$", re.M | re.S)
    found = fence.findall(page.read_text(encoding="utf-8"))
    assert len(found) == 1, f"{page.name} must show exactly one listing `def {name}(...)`"
    return found[0]


def page_function(page, name):
    namespace = {"np": np}
    exec(page_listing(page, name), namespace)  # noqa: S102 - the page's own listing is the code under test
    return namespace[name]


@pytest.fixture(scope="module")
def stable_softmax():
    return page_function(PAGE, "stable_softmax")


def test_the_listing_is_three_lines():
    lines = [line for line in page_listing().splitlines() if line.strip()]
    assert len(lines) == 3, lines


def exact_softmax(row):
    """The softmax of a row of numbers in 40-digit arithmetic (mpmath), rounded to float64 at the end."""
    with mpmath.workdps(40):
        terms = [mpmath.exp(mpmath.mpf(x)) for x in row]
        return [float(term / mpmath.fsum(terms)) for term in terms]


def test_the_listing_survives_logits_where_the_textbook_formula_fails(stable_softmax):
    x = np.array([1000.0, 1001.0, 1002.0])
    with np.errstate(over="ignore", invalid="ignore"):
        textbook = np.exp(x) / np.exp(x).sum()
    assert np.all(np.isnan(textbook))
    stable = stable_softmax(x)
    # the numbers the page quotes, and the theorem: the softmax of (0, 1, 2)
    assert np.array_equal(stable.round(3), np.array([0.090, 0.245, 0.665]))
    assert np.allclose(stable, exact_softmax([1000, 1001, 1002]), rtol=4 * np.finfo(float).eps, atol=0)


def test_the_listing_normalises_the_last_axis_of_a_batch(stable_softmax):
    rng = np.random.default_rng(0)
    x = rng.normal(scale=30.0, size=(3, 4, 7))
    y = stable_softmax(x)
    assert np.allclose(y.sum(axis=-1), 1.0, rtol=0, atol=1e-15)
    assert not np.allclose(y.sum(axis=-2), 1.0)  # a softmax over the wrong axis would pass the line above here


@given(arrays(np.float64, st.integers(1, 9), elements=st.floats(-700, 700)))
def test_the_listing_is_what_attncore_softmax_computes(x):
    assert np.allclose(page_function(PAGE, "stable_softmax")(x), softmax(x), rtol=1e-14, atol=1e-300)


def test_the_tie_example_of_the_page():
    """At a small temperature the row (3, 1, 3, 0.5) is half-half on its tied maxima, not one-hot."""
    text = PAGE.read_text(encoding="utf-8")
    assert "x = (3, 1, 3, 0.5)" in text and r"(\tfrac12, 0, \tfrac12, 0)" in text
    limit = softmax(np.array([3.0, 1.0, 3.0, 0.5]), temperature=0.001)
    assert np.allclose(limit, [0.5, 0.0, 0.5, 0.0], rtol=0, atol=1e-12)


# ---- Chapter 1: the row-blocked loop and T5's buckets ---------------------------------------

def definition(Q, K, V):
    """softmax(Q K^T / sqrt(d_k)) V in one piece, in 40-digit arithmetic (the unblocked reference)."""
    with mpmath.workdps(40):
        S = mpmath.matrix(Q.tolist()) * mpmath.matrix(K.tolist()).T / mpmath.sqrt(K.shape[1])
        rows = []
        for i in range(S.rows):
            e = [mpmath.exp(S[i, j]) for j in range(S.cols)]
            total = mpmath.fsum(e)
            rows.append([float(mpmath.fsum(e[j] * V[j, c] for j in range(S.cols)) / total) for c in range(V.shape[1])])
    return np.array(rows)


@pytest.mark.parametrize("n, rows", [(7, 3), (9, 3), (5, 256), (1, 1)])
def test_the_blocked_loop_is_attention(n, rows):
    """Blocks that divide n, blocks that do not, one block, one row: each equals the definition."""
    blocked_attention = page_function(CHAPTER1, "blocked_attention")
    rng = np.random.default_rng(n)
    Q, K, V = rng.normal(size=(n, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    out = blocked_attention(Q, K, V, rows=rows)
    assert np.allclose(out, definition(Q, K, V), rtol=1e-13, atol=1e-15)
    assert np.allclose(out, attention(Q, K, V), rtol=1e-13, atol=1e-15)


def test_the_blocked_loop_survives_large_scores():
    blocked_attention = page_function(CHAPTER1, "blocked_attention")
    Q, K, V = np.full((3, 2), 30.0), np.array([[30.0, 30.0], [29.0, 29.0]]), np.eye(2)  # scores about 1270
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(np.exp(Q @ K.T / np.sqrt(2)) / np.exp(Q @ K.T / np.sqrt(2)).sum(axis=1, keepdims=True)).all()
    # relative error of the small weight ~ |score| * eps, from the rounding of the shifted exponent
    assert np.allclose(blocked_attention(Q, K, V, rows=2), definition(Q, K, V), rtol=1e-11, atol=1e-300)


def t5_bucket_formula(r, num_buckets=32, max_distance=128):
    """The chapter's equation eq-ch1-t5-bucket (bidirectional, u_max = max_distance), in float64."""
    N = num_buckets // 2
    E, u = N // 2, np.abs(r)
    logarithmic = np.minimum(N - 1, E + np.floor(np.log(np.maximum(u, E) / E) / np.log(max_distance / E) * (N - E)))
    return N * (r > 0) + np.where(u < E, u, logarithmic).astype(np.int64)


def test_the_t5_formula_of_the_chapter_is_what_attncore_computes():
    text = CHAPTER1.read_text(encoding="utf-8")
    assert ":label: eq-ch1-t5-bucket" in text and "from distance 91 on" in text
    r = np.arange(-5000, 5001)
    assert np.array_equal(t5_bucket_formula(r), t5_relative_bucket(r))
    first_shared = int(np.argmax(t5_relative_bucket(-np.arange(200)) == 15))
    assert first_shared == 91
