"""Rules every stored notebook keeps, checked on its JSON (no execution)."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_execution_timestamps(path):
    """Timestamps change on every run, so a refresh would rewrite cells nobody edited."""
    cells = json.loads(path.read_text())["cells"]
    stamped = [i for i, cell in enumerate(cells) if "execution" in cell.get("metadata", {})]
    assert not stamped, (
        f"{path.name}: cells {stamped} store execution timestamps; refresh with "
        f"`make notebook NB=notebooks/{path.name}`, which drops them"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_text_twin_is_in_sync(path):
    """Each notebook's MyST text twin (jupytext) says what the notebook's cells say.

    Reviewers read the twin's diff; a twin that lags behind its notebook would
    show them something other than what runs.
    """
    import jupytext

    twin = path.with_suffix(".md")
    expected = jupytext.writes(jupytext.read(path), fmt="md:myst")
    assert twin.is_file(), f"{twin.name} is missing; run `make pair`"
    assert twin.read_text(encoding="utf-8") == expected, (
        f"{twin.name} is out of date with {path.name}; run `make pair`"
    )


def test_every_text_twin_has_a_notebook():
    orphans = [p.name for p in (ROOT / "notebooks").glob("*.md") if not p.with_suffix(".ipynb").is_file()]
    assert not orphans, f"text twins without a notebook: {orphans}"
