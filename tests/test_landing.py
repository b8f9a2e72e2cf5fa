"""The code and the numbers of the methods page run and say what the page says.

`book/how_this_book_proves.md` teaches a three-line stable softmax before any attncore helper;
the listing is executed from the page itself, so that a change to either the page or the package
that made them disagree fails here. The reference for extreme logits is 40-digit arithmetic,
not attncore.
"""

import re

import mpmath
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attncore import softmax

PAGE = Path(__file__).resolve().parent.parent / "book" / "how_this_book_proves.md"
FENCE = re.compile(r"^```python\n(def stable_softmax\(x\):\n.*?)^```$", re.M | re.S)


def page_listing() -> str:
    found = FENCE.findall(PAGE.read_text(encoding="utf-8"))
    assert len(found) == 1, "how_this_book_proves.md must show exactly one `def stable_softmax(x):` listing"
    return found[0]


@pytest.fixture(scope="module")
def stable_softmax():
    namespace = {"np": np}
    exec(page_listing(), namespace)  # noqa: S102 - the page's own listing is the code under test
    return namespace["stable_softmax"]


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
    stable_softmax = {"np": np}
    exec(page_listing(), stable_softmax)  # noqa: S102
    assert np.allclose(stable_softmax["stable_softmax"](x), softmax(x), rtol=1e-14, atol=1e-300)


def test_the_tie_example_of_the_page():
    """At a small temperature the row (3, 1, 3, 0.5) is half-half on its tied maxima, not one-hot."""
    text = PAGE.read_text(encoding="utf-8")
    assert "x = (3, 1, 3, 0.5)" in text and r"(\tfrac12, 0, \tfrac12, 0)" in text
    limit = softmax(np.array([3.0, 1.0, 3.0, 0.5]), temperature=0.001)
    assert np.allclose(limit, [0.5, 0.0, 0.5, 0.0], rtol=0, atol=1e-12)
