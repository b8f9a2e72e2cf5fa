"""Hooks for the notebooks under nbval (here at the root so that they apply to notebooks/).

The unit tests' fixtures live in tests/conftest.py.
"""

import difflib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


# ---- notebooks under nbval ----------------------------------------------------------------

def _is_nbval_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and hasattr(item, "cell_num")


# ---- one pytest run on every core (make test) ---------------------------------------------

#: The file that builds the book once (tests/conftest.py's session fixture) and checks what it wrote.
BOOK_FILE = "test_site.py"


def pytest_collection_modifyitems(items):
    """Compare stored figures, and put the book build first for the run on every core.

    nbval skips PNG outputs unless told otherwise. Figures are made byte for byte
    reproducible (fixed matplotlib metadata and the Agg renderer, see notebooks' stored
    PNGs), so an edited cell that leaves a stale figure below it fails here. Cells tagged
    ``nbval-ignore-output`` (timings) are still not compared.

    ``pytest -n auto --dist loadfile --no-loadscope-reorder`` (make test) gives each worker
    whole files in collection order (a notebook's cells share one kernel, in order). The book
    build and the site checks are the longest file (about five minutes on one core): first,
    the other workers run everything else beside it.
    """
    for item in items:
        if _is_nbval_cell(item):
            item.parent.skip_compare = tuple(k for k in item.parent.skip_compare if k != "image/png")
    items.sort(key=lambda item: Path(str(item.fspath)).name != BOOK_FILE)  # stable: the order within


#: The nbval cell being run, while it runs (its output comparison asks pytest for the diff).
_RUNNING_CELL = []

#: What the diff of a failing cell means, said above it.
DIFF_LEGEND = ("'-' lines: the output stored in the notebook file; "
               "'+' lines: the output of this run")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _RUNNING_CELL.append(_is_nbval_cell(item))
    try:
        yield
    finally:
        _RUNNING_CELL.pop()


def pytest_assertrepr_compare(config, op, left, right):
    """nbval compares ``stored == this run`` and shows pytest's diff, whose '-' and '+' name
    neither side; inside a notebook cell the diff is a unified diff with both sides labelled."""
    if not (_RUNNING_CELL and _RUNNING_CELL[-1] and op == "=="):
        return None
    stored, fresh = (v if isinstance(v, str) else repr(v) for v in (left, right))
    diff = difflib.unified_diff(stored.splitlines(), fresh.splitlines(),
                                "stored in the notebook file", "this run", lineterm="", n=2)
    return ["the stored output and this run's output differ", DIFF_LEGEND, *diff]


def reader_location(item) -> str:
    """Where the failing cell is, as a reader sees it in JupyterLab, and how to refresh it."""
    path = Path(str(item.fspath))
    try:
        rel = path.relative_to(ROOT).as_posix()
    except ValueError:
        rel = str(path)
    cells = getattr(item.parent, "nb", None)
    cells = cells.cells if cells is not None else []
    position = next((i for i, c in enumerate(cells) if c is item.cell), None)
    count = item.cell.get("execution_count") or item.cell_num + 1
    first_line = next((line for line in item.cell.source.splitlines() if line.strip()), "")
    where = f"cell {position + 1} from the top, counting markdown cells; " if position is not None else ""
    return (
        f"{rel}: the cell shown as [{count}] in JupyterLab ({where}code cell {item.cell_num + 1}; "
        f"it begins: {first_line[:80]!r}).\n"
        f"If you changed this notebook (or the code it calls) on purpose, refresh its stored outputs "
        f"and commit them:\n    make notebook NB={rel}\n"
        f"(nbval below counts code cells from 0: its 'Cell {item.cell_num}' is this cell; "
        f"in its diff, {DIFF_LEGEND}.)"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when == "call" and _is_nbval_cell(item):
        report.longrepr = f"{reader_location(item)}\n\n{report.longrepr}"
