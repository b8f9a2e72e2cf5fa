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
