"""Write book/_intersphinx/numpy.inv: the part of numpy's Sphinx inventory this book links to.

Usage: python scripts/numpy_inventory.py [--check NUMPY_SOURCE]

The book builds offline, so intersphinx cannot download numpy's ``objects.inv``
(and Debian ships no numpy documentation package to copy it from, as
book/_intersphinx/python-3.11.inv is copied from python3.11-doc).  This script
writes a small inventory instead, in Sphinx's documented version-2 format
(four header lines, then zlib-compressed lines ``name domain:role priority uri
dispname``), holding only the numpy objects the package's signatures and the
book's pages refer to.  Each entry's page follows the layout of numpy's own
documentation source (doc/source/reference in github.com/numpy/numpy): an
``autosummary`` with ``:toctree: generated/`` gives
``reference/generated/<name>.html#<name>``; ``numpy.random.Generator`` and
``numpy.random.default_rng`` are documented on reference/random/generator.html;
the ``numpy.typing`` aliases are ``.. data::`` entries of reference/typing.html;
the scalar types are ``autoclass`` entries of reference/arrays.scalars.html.

The URIs are relative to the documentation of the numpy minor version pinned in
requirements.txt (numpy 2.4: https://numpy.org/doc/2.4/, the base set in
_config.yml), so the links show the documentation of the numpy the book runs.

Why this table, and not numpy's own ``objects.inv`` for the pinned version
(https://numpy.org/doc/2.4/objects.inv), committed as python-3.11.inv is: that
file is in nothing the project installs (no Debian package carries numpy's HTML
documentation, no PyPI package ships its inventory), and the machines this
repository is maintained on have no network to download it.  Whoever commits
numpy's file as book/_intersphinx/numpy.inv can delete this script and the four
``test_numpy_inventory_*`` tests of tests/test_api_docs.py; the other tests of
that file (the annotations, the API pages) stay.

To regenerate (after adding a name below, or when the pinned numpy changes):

    python scripts/numpy_inventory.py --check /path/to/numpy   # a numpy git checkout at the pinned tag
    python scripts/numpy_inventory.py

``--check`` reads the checkout's doc/source and numpy/typing sources and fails
if a name is not documented on the page given here.  This table was checked
against numpy's tag v2.4.6.  tests/test_api_docs.py checks the written file.
"""

import argparse
import re
import subprocess
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "book" / "_intersphinx" / "numpy.inv"
VERSION = "2.4"

# (name, Sphinx role, page relative to https://numpy.org/doc/<VERSION>/, numpy source file documenting it).
# The anchor of every entry is the name itself, as Sphinx's Python domain makes it.
GENERATED = "reference/generated/{}.html"
OBJECTS = [
    ("numpy.ndarray", "py:class", GENERATED, "doc/source/reference/arrays.ndarray.rst"),
    ("numpy.dtype", "py:class", GENERATED, "doc/source/reference/arrays.dtypes.rst"),
    ("numpy.float16", "py:class", "reference/arrays.scalars.html", "doc/source/reference/arrays.scalars.rst"),
    ("numpy.float32", "py:class", "reference/arrays.scalars.html", "doc/source/reference/arrays.scalars.rst"),
    ("numpy.float64", "py:class", "reference/arrays.scalars.html", "doc/source/reference/arrays.scalars.rst"),
    ("numpy.random.Generator", "py:class", "reference/random/generator.html",
     "doc/source/reference/random/generator.rst"),
    ("numpy.random.default_rng", "py:function", "reference/random/generator.html",
     "doc/source/reference/random/generator.rst"),
    ("numpy.typing.ArrayLike", "py:data", "reference/typing.html", "numpy/_typing/_add_docstring.py"),
    ("numpy.typing.DTypeLike", "py:data", "reference/typing.html", "numpy/_typing/_add_docstring.py"),
    ("numpy.einsum", "py:function", GENERATED, "doc/source/reference/routines.linalg.rst"),
    ("numpy.tile", "py:function", GENERATED, "doc/source/reference/routines.array-manipulation.rst"),
    ("numpy.repeat", "py:function", GENERATED, "doc/source/reference/routines.array-manipulation.rst"),
    ("numpy.result_type", "py:function", GENERATED, "doc/source/reference/routines.dtype.rst"),
    ("numpy.finfo", "py:class", GENERATED, "doc/source/reference/routines.dtype.rst"),
    ("numpy.linalg.matrix_rank", "py:function", GENERATED, "doc/source/reference/routines.linalg.rst"),
    ("numpy.linalg.svd", "py:function", GENERATED, "doc/source/reference/routines.linalg.rst"),
]


def uri(name, page):
    """The entry's URI relative to the base, with Sphinx's ``$`` shorthand for ``#<name>``."""
    return page.format(name) + "#$"


def inventory_bytes():
    header = (
        "# Sphinx inventory version 2\n"
        "# Project: NumPy\n"
        f"# Version: {VERSION}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    # '-' as display name means "the name itself"; priority 1 is Sphinx's default for an object.
    lines = "".join(f"{name} {role} 1 {uri(name, page)} -\n" for name, role, page, _ in sorted(OBJECTS))
    return header.encode() + zlib.compress(lines.encode(), 9)


def documented_in(name, text):
    """Whether numpy's doc source ``text`` documents ``name`` (the short name after the module)."""
    short = name.split(".")[-1]
    for pattern in (
        rf"^\s+~?{re.escape(short)}\s*$",  # an autosummary entry under currentmodule numpy
        rf"^\s+(linalg\.)?{re.escape(short)}\s*$",
        rf"^\.\. auto(class|function|data):: ({re.escape(name)}|{re.escape(short)})\s*$",
        rf"add_newdoc\('{re.escape(short)}'",
        rf"^\.\. automodule:: {re.escape(name)}\s*$",
    ):
        if re.search(pattern, text, re.MULTILINE):
            return True
    return False


def check(source):
    """Fail unless every name is documented in the file of a numpy checkout that the table names."""
    tag = subprocess.run(["git", "-C", str(source), "describe", "--tags"], capture_output=True, text=True)
    print(f"checking against {source} ({tag.stdout.strip() or 'no git tag'})")
    bad = []
    for name, _, _, path in OBJECTS:
        text = (Path(source) / path).read_text()
        if not documented_in(name, text):
            bad.append(f"{name}: not found in {path}")
    for line in bad:
        print(line)
    return not bad


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="NUMPY_SOURCE", help="a numpy source checkout to check the pages against")
    args = parser.parse_args()
    if args.check:
        return 0 if check(args.check) else 1
    OUTPUT.write_bytes(inventory_bytes())
    print(f"wrote {len(OBJECTS)} entries to {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
