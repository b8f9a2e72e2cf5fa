"""Execute notebooks in place, refreshing their stored outputs.

Usage: python scripts/run_notebooks.py [notebooks/NAME.ipynb ...]

The stored outputs are what nbval compares against on every `make test`, so
they must be produced by the same kernel and pinned packages; run this (via
`make notebooks`, or `make notebook NB=notebooks/NAME.ipynb` for one) after
editing a notebook, and commit the result.  Per-cell execution timestamps are
dropped, so that a refresh changes only what the run changed.
"""

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def strip_timestamps(nb) -> None:
    """Drop the per-cell ``execution`` metadata (timestamps) that nbclient records."""
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def run(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    nb.metadata.pop("widgets", None)
    strip_timestamps(nb)
    nbformat.write(nb, path)
    return elapsed


def main(argv):
    paths = [Path(p) for p in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        print(f"{run(path):7.1f} s  {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
