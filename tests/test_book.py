"""The website builds with zero warnings.

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
