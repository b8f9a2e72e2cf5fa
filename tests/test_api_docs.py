"""The public API is annotated, and its numpy names link to numpy's documentation.

* Every function in ``attncore.__all__`` annotates every parameter and its
  return value, and the annotations evaluate (``inspect.signature(...,
  eval_str=True)``), so a misspelt or unimported name fails here.
* book/_intersphinx/numpy.inv is what scripts/numpy_inventory.py writes, it
  parses as a Sphinx inventory, its entries point at the pages of numpy's
  documentation, and every numpy name the annotations use has an entry (else
  the strict book build fails on an unresolved reference).

The built API page is checked in tests/test_site.py.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import typing
from pathlib import Path

import pytest

import attncore

ROOT = Path(__file__).resolve().parent.parent
INVENTORY = ROOT / "book" / "_intersphinx" / "numpy.inv"
BASE = "https://numpy.org/doc/2.4"

FUNCTIONS = [name for name in attncore.__all__ if inspect.isfunction(getattr(attncore, name))]
# Names the annotations spell in short (the aliases of _config.yml and book/_ext/numpy_types.py).
ALIASES = {"ArrayLike": "numpy.typing.ArrayLike", "DTypeLike": "numpy.typing.DTypeLike"}


def _script():
    spec = importlib.util.spec_from_file_location("numpy_inventory", ROOT / "scripts" / "numpy_inventory.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inventory():
    from sphinx.util.inventory import InventoryFile

    with open(INVENTORY, "rb") as stream:
        return InventoryFile.load(stream, BASE, lambda base, uri: f"{base}/{uri}")


def test_all_public_functions_are_listed():
    # Guards the test below against an empty list (a change to how __all__ is read).
    assert len(FUNCTIONS) >= 45
    assert {"attention", "synthesizer_costs", "probe_hidden_states", "linear_attention"} <= set(FUNCTIONS)


def test_every_export_is_documented_on_exactly_one_api_page():
    """The API reference is split by topic (each page under 400 KB): every name of __all__ is on one page,
    and every page is in the table of contents."""
    import re

    import yaml

    import attncore

    pages = sorted((ROOT / "book" / "appendix").glob("api_*.rst"))
    assert len(pages) >= 5
    documented = []
    for page in pages:
        documented += re.findall(r"^\.\. auto(?:function|class|data):: (?:attncore\.)?(\w+)\s*$",
                                 page.read_text(encoding="utf-8"), flags=re.M)
    counts = {name: documented.count(name) for name in attncore.__all__}
    assert all(c == 1 for c in counts.values()), {n: c for n, c in counts.items() if c != 1}
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"book/appendix/(api_\w+)", toc))
    assert listed == {p.stem for p in pages}, (listed, [p.stem for p in pages])
    assert yaml.safe_load(toc)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_public_function_is_fully_annotated(name):
    signature = inspect.signature(getattr(attncore, name))
    missing = [p.name for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty]
    assert not missing, f"attncore.{name}: parameters without a type hint: {missing}"
    assert signature.return_annotation is not inspect.Signature.empty, f"attncore.{name}: no return type hint"
    inspect.signature(getattr(attncore, name), eval_str=True)  # every annotation names something real


def test_public_classes_are_annotated():
    for name in attncore.__all__:
        obj = getattr(attncore, name)
        if inspect.isclass(obj) and hasattr(obj, "_fields"):  # the NamedTuples
            assert set(typing.get_type_hints(obj)) == set(obj._fields), name


def _numpy_names_in_annotations():
    names = set()
    for name in FUNCTIONS + ["BlockParams"]:
        # the annotations as written (strings: every module has `from __future__ import annotations`)
        for text in getattr(attncore, name).__annotations__.values():
            for word in re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", str(text)):
                if word in ALIASES:
                    names.add(ALIASES[word])
                elif word.startswith("np."):
                    names.add("numpy." + word[3:])
    return names


def test_numpy_inventory_is_what_the_script_writes():
    assert INVENTORY.read_bytes() == _script().inventory_bytes(), "run python scripts/numpy_inventory.py"


def test_numpy_inventory_covers_the_annotations():
    entries = {name for kind in _inventory().values() for name in kind}
    used = _numpy_names_in_annotations()
    assert {"numpy.ndarray", "numpy.typing.ArrayLike", "numpy.random.Generator"} <= used
    assert used <= entries, f"add to scripts/numpy_inventory.py: {sorted(used - entries)}"


@pytest.mark.parametrize(("name", "role", "page"), [
    ("numpy.ndarray", "py:class", "reference/generated/numpy.ndarray.html"),
    ("numpy.einsum", "py:function", "reference/generated/numpy.einsum.html"),
    ("numpy.linalg.matrix_rank", "py:function", "reference/generated/numpy.linalg.matrix_rank.html"),
    ("numpy.random.Generator", "py:class", "reference/random/generator.html"),
    ("numpy.random.default_rng", "py:function", "reference/random/generator.html"),
    ("numpy.typing.ArrayLike", "py:data", "reference/typing.html"),
    ("numpy.float64", "py:class", "reference/arrays.scalars.html"),
])
def test_numpy_inventory_entries_resolve_to_numpy_pages(name, role, page):
    inventory = _inventory()
    assert name in inventory.get(role, {}), f"{name} is not a {role} of numpy.inv"
    uri = inventory[role][name][2]
    assert uri == f"{BASE}/{page}#{name}"


def test_numpy_inventory_matches_the_pinned_numpy():
    """The links go to the documentation of the numpy that requirements.txt pins (re-check the pages on a bump)."""
    import yaml

    pinned = re.search(r"^numpy==(\d+\.\d+)\.", (ROOT / "requirements.txt").read_text(), re.MULTILINE).group(1)
    assert _script().VERSION == pinned, "re-check the pages (scripts/numpy_inventory.py --check) and bump VERSION"
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    base, inventory = config["sphinx"]["config"]["intersphinx_mapping"]["numpy"]
    assert (base, inventory) == (f"https://numpy.org/doc/{pinned}", "book/_intersphinx/numpy.inv")
    assert BASE == base
