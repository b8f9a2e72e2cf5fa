"""Execute notebooks in place, refreshing their stored outputs.

Usage: python scripts/run_notebooks.py [notebooks/NAME.ipynb ...]

The stored outputs are what nbval compares against on every `make test`, so
they must be produced by the same kernel and pinned packages; run this (via
`make notebooks`, or `make notebook NB=notebooks/NAME.ipynb` for one) after
editing a notebook, and commit the result.  Per-cell execution timestamps are
dropped, so that a refresh changes only what the run changed, and the file is
written as JupyterLab writes it (scripts/notebook_header.py).
"""

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from notebook_header import as_jupyterlab_writes, normalise

ROOT = Path(__file__).resolve().parent.parent


def strip_timestamps(nb) -> None:
    """Drop the per-cell ``execution`` metadata (timestamps) that nbclient records."""
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def run(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    normalise(nb)  # the canonical setup cell first, JupyterLab's kernelspec
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    nb.metadata.pop("widgets", None)
    strip_timestamps(nb)
    normalise(nb)
    path.write_text(as_jupyterlab_writes(nb), encoding="utf-8")
    return elapsed


def main(argv):
    paths = [Path(p) for p in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        print(f"{run(path):7.1f} s  {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
