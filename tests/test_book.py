"""The website builds with zero warnings, and its API page links to numpy.

The session fixture ``book_build`` (tests/conftest.py) runs scripts/build_book.py,
the same command as `make book`: jupyter-book with -W (warnings are errors),
-n (every reference must resolve) and --keep-going, showing the notebooks'
stored outputs (nbval checks them; the build does not execute the notebooks).
"""

import pytest


@pytest.mark.book
def test_book_builds_without_warnings(book_build):
    tail = "\n".join(book_build.output.splitlines()[-40:])
    assert book_build.returncode == 0, tail
    assert (book_build.html / "index.html").is_file()


@pytest.mark.book
def test_api_signatures_link_to_numpy(book_build):
    """The type hints of the API page link to numpy's documentation (book/_intersphinx/numpy.inv).

    Every signature of a public function that names a numpy type (``ArrayLike``,
    ``np.ndarray``, ``np.random.Generator``, ...) holds a link into
    https://numpy.org/doc/2.4/; the numpy names in the docstrings' prose
    (``:func:`numpy.einsum```) link there too.
    """
    import re

    import attncore

    assert book_build.returncode == 0
    page = "\n".join(p.read_text() for p in sorted((book_build.html / "book" / "appendix").glob("api*.html")))
    signatures = dict(re.findall(r'<dt class="sig sig-object py" id="attncore\.(\w+)">(.*?)</dt>', page, re.S))
    numpy_typed = [
        name for name in attncore.__all__
        if callable(getattr(attncore, name)) and re.search(
            r"\b(ArrayLike|DTypeLike|np\.)", " ".join(map(str, getattr(attncore, name).__annotations__.values())))
    ]
    assert len(numpy_typed) >= 45
    unlinked = [name for name in numpy_typed if "https://numpy.org/doc/2.4/" not in signatures.get(name, "")]
    assert not unlinked, f"signatures without a numpy link: {unlinked}"
    for target in ("reference/generated/numpy.einsum.html#numpy.einsum",
                   "reference/typing.html#numpy.typing.ArrayLike",
                   "reference/random/generator.html#numpy.random.Generator"):
        assert f'href="https://numpy.org/doc/2.4/{target}"' in page, target


@pytest.mark.book
def test_evidence_page_shows_the_mutation_results(book_build):
    """The appendix "How strong is the evidence" renders bench/mutation.md: the score, the table of
    modules and the survivors' diffs, not a code block holding the include directive (a stray
    code fence left over from an edit once swallowed the whole Results section)."""
    import json
    import re
    from pathlib import Path

    assert book_build.returncode == 0
    page = (book_build.html / "book" / "appendix" / "evidence_strength.html").read_text()
    assert "{include}" not in page and "../../bench/mutation.md" not in page
    results = json.loads((Path(__file__).resolve().parent.parent / "bench" / "mutation.json").read_text())
    assert re.search(r"<strong>Score: [\d.]+%</strong>", page)
    rows = re.findall(r"<td[^>]*><p><code[^>]*><span class=\"pre\">(_\w+)</span></code>", page)
    assert set(results["modules"]) <= set(rows), sorted(set(results["modules"]) - set(rows))


@pytest.mark.book
def test_footer_shows_the_editions_copyright_year(book_build):
    """Sphinx replaces the copyright year by SOURCE_DATE_EPOCH's (the Makefile fixes it for
    reproducible files): the footer must show _config.yml's year, not 1970 (epoch 0)."""
    import re
    from pathlib import Path

    import yaml

    assert book_build.returncode == 0
    year = str(yaml.safe_load((Path(__file__).parent.parent / "_config.yml").read_text())["copyright"])
    footer = re.search(r"(?:©|&copy;|&#169;)\s*Copyright\s*(\d{4})", (book_build.html / "book" / "index.html").read_text())
    assert footer, "no copyright line in the footer of book/index.html"
    assert footer.group(1) == year, f"the footer says {footer.group(1)}, _config.yml says {year}"
