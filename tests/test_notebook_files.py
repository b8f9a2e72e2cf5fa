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
    assert not stamped, f"{path.name}: cells {stamped} store execution timestamps; {REFRESH}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_text_twin_is_in_sync(path):
    """Each notebook's MyST text twin (jupytext) says what the notebook's cells say.

    Reviewers read the twin's diff; a twin that lags behind its notebook would
    show them something other than what runs.
    """
    import jupytext

    twin = path.with_suffix(".md")
    # the twin of the notebook in canonical form: a non-canonical notebook (an edited kernelspec,
    # say) fails test_stored_as_jupyterlab_writes_it alone, with its one fix
    notebook = jupytext.read(path)
    notebook_header.normalise(notebook)
    notebook = jupytext.reads(notebook_header.as_jupyterlab_writes(notebook), fmt="ipynb")
    expected = jupytext.writes(notebook, fmt="md:myst")
    fix = f"run `make notebook NB=notebooks/{path.name}`, which syncs the newer of the two files into the other"
    assert twin.is_file(), f"{twin.name} is missing; {fix}"
    assert twin.read_text(encoding="utf-8") == expected, f"{twin.name} and {path.name} disagree; {fix}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_paired_both_ways(path):
    """Both files carry jupytext's pairing, so an edit in either one can be synced to the other."""
    import jupytext

    for twin in (path, path.with_suffix(".md")):
        formats = jupytext.read(twin).metadata.get("jupytext", {}).get("formats")
        assert formats == notebook_header.FORMATS, (
            f"{twin.name} is not paired (jupytext formats {formats!r}); {REFRESH}"
        )


def test_an_edit_in_the_text_twin_reaches_the_notebook(tmp_path):
    """The direction the one-way twins lacked: edit the .md, sync, and the .ipynb has the edit
    with its stored outputs kept (jupytext --sync, as `make pair` and `make notebook` run it)."""
    import os
    import subprocess

    import jupytext

    source = NOTEBOOKS[0]
    for suffix in (".ipynb", ".md"):
        (tmp_path / source.with_suffix(suffix).name).write_bytes(source.with_suffix(suffix).read_bytes())
    notebook, twin = tmp_path / source.name, tmp_path / source.with_suffix(".md").name
    outputs_before = [c.get("outputs") for c in jupytext.read(notebook).cells if c.cell_type == "code"]
    text = twin.read_text(encoding="utf-8")
    edited = text.replace("\n# ", "\n# An edited title: ", 1)
    assert edited != text
    twin.write_text(edited, encoding="utf-8")
    stamp = notebook.stat().st_mtime
    os.utime(twin, (stamp + 10, stamp + 10))  # the twin is the newer file
    jupytext_cli = Path(sys.executable).with_name("jupytext")
    subprocess.run([str(jupytext_cli), "--quiet", "--sync", str(notebook)], check=True, capture_output=True)
    synced = jupytext.read(notebook)
    assert any(c.source.startswith("# An edited title: ") for c in synced.cells if c.cell_type == "markdown")
    assert [c.get("outputs") for c in synced.cells if c.cell_type == "code"] == outputs_before


def test_every_text_twin_has_a_notebook():
    orphans = [p.name for p in (ROOT / "notebooks").glob("*.md") if not p.with_suffix(".ipynb").is_file()]
    assert not orphans, f"text twins without a notebook: {orphans}"


# ---- portable notebooks (scripts/notebook_header.py) ------------------------------------

import ast  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
import notebook_header  # noqa: E402

# The one fix for a notebook's form (setup cell, metadata, layout, pairing): it writes the canonical
# form and syncs the twins, executing nothing (a changed output is nbval's to report, with its fix).
REFRESH = "fix: run `make notebook-headers`, then commit the notebook and its twin"


def code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_is_the_canonical_setup_cell(path):
    """A downloaded notebook (or a Colab session) installs attncore in its first cell."""
    first = "".join(code_cells(path)[0]["source"])
    assert first == notebook_header.setup_cell_source(), (
        f"{path.name}: the first code cell is not the canonical setup cell; {REFRESH}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_as_jupyterlab_writes_it(path):
    """Opening the notebook in JupyterLab and saving it must not change the file."""
    assert not notebook_header.process(path, check=True), (
        f"{path.name}: kernelspec, Python version, execution counts, glue imports or JSON layout are not "
        f"canonical; {REFRESH}"
    )


def test_setup_cell_installs_from_the_one_repository_address():
    source = notebook_header.setup_cell_source()
    assert notebook_header.wheel_url() in source
    assert notebook_header.wheel_url().startswith(notebook_header.pages_url(notebook_header.repository_url()))
    assert source.splitlines()[0].startswith("# Setup: ")  # one line says what the cell does
    # The address appears in _config.yml and nowhere else in the tracked sources.
    repo = notebook_header.repository_url()
    owner_name = repo.removeprefix("https://github.com/")
    offenders = [
        str(p.relative_to(ROOT)) for p in [*ROOT.glob("*.md"), *ROOT.glob("*.yml"), *ROOT.glob("binder/*"),
                                           *ROOT.glob(".github/workflows/*"), *ROOT.glob("scripts/*.py")]
        if p.is_file() and p.name != "_config.yml" and owner_name in p.read_text(encoding="utf-8")
    ]
    assert not offenders, f"the repository address is written outside _config.yml in {offenders}"


def is_global_ignore(node: ast.AST) -> bool:
    """``warnings.filterwarnings("ignore")`` or ``simplefilter("ignore")`` with no category/message."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))):
        return False
    name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
    if name not in ("filterwarnings", "simplefilter") or not node.args:
        return False
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and first.value == "ignore"):
        return False
    narrowing = {"category", "message", "module"}
    return len(node.args) == 1 and not narrowing & {k.arg for k in node.keywords}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_silences_all_warnings(path):
    """A warning is evidence; silence only the one you have explained, by category or message."""
    offenders = []
    for k, cell in enumerate(code_cells(path), start=1):
        source = "\n".join(
            line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
            for line in "".join(cell["source"]).splitlines()
        )
        if any(is_global_ignore(n) for n in ast.walk(ast.parse(source))):
            offenders.append(f"code cell {k}")
    assert not offenders, f"{path.name}: {offenders} ignore every warning; filter a category or message instead"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_link_in_first_markdown_cell(path):
    """The first cell links to its chapter by a relative .md path: a page link on the site,
    and a file link that JupyterLab (served from the repository root by `make lab`) and Binder open."""
    cells = json.loads(path.read_text())["cells"]
    first = "".join(cells[0]["source"])
    assert cells[0]["cell_type"] == "markdown", f"{path.name}: the first cell is not markdown"
    links = re.findall(r"\]\((\.\./book/[^)#\s]+\.md)(#[^)]*)?\)", first)
    assert links, f"{path.name}: the first cell has no link of the form [chapter](../book/NAME.md)"
    for target, _ in links:
        assert (path.parent / target).resolve().is_file(), f"{path.name}: {target} does not exist"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_glue_comes_from_the_setup_cell(path):
    """myst-nb is the book's toolchain, not the reader's: only the setup cell imports it
    (with a fallback), so a downloaded notebook that glues figures still runs."""
    later = code_cells(path)[1:]
    offenders = [k for k, cell in enumerate(later, start=2) if "myst_nb" in "".join(cell["source"])]
    assert not offenders, (
        f"{path.name}: code cells {offenders} use myst_nb directly; use the setup cell's `glue` "
        f"({REFRESH.split(' (')[0]} removes `from myst_nb import glue` lines)"
    )


# ---- cells a reader can follow ------------------------------------------------------------
# A notebook page is read, not only run: each code cell does one thing (a computation, or
# the assert that checks it) and the prose around it says what it shows. The thresholds are
# QuantEcon- and d2l-like (their lectures: median code cells of 2 to 6 lines and more prose
# than code); the setup cell, which scripts/notebook_header.py writes, is not counted.

MAX_MEDIAN_CELL_LINES = 8
MAX_CELL_LINES = 30
MIN_PROSE_PER_CODE_WORD = 1.0
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def cell_style(path):
    """(median and largest non-blank lines per code cell, prose words per code word)."""
    import statistics

    cells = json.loads(path.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"][1:]
    prose = [c for c in cells if c["cell_type"] == "markdown"]
    lines = [sum(1 for line in "".join(c["source"]).splitlines() if line.strip()) for c in code]
    code_words = sum(len(WORD.findall("".join(c["source"]))) for c in code)
    prose_words = sum(len(WORD.findall("".join(c["source"]))) for c in prose)
    return statistics.median(lines), max(lines), prose_words / max(code_words, 1)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_are_small_and_explained(path):
    median, largest, ratio = cell_style(path)
    assert median <= MAX_MEDIAN_CELL_LINES, (
        f"{path.name}: the median code cell has {median} non-blank lines (at most "
        f"{MAX_MEDIAN_CELL_LINES}); split cells so each does one thing, with a sentence before it"
    )
    assert largest <= MAX_CELL_LINES, (
        f"{path.name}: a code cell has {largest} non-blank lines (at most {MAX_CELL_LINES}); split it"
    )
    assert ratio >= MIN_PROSE_PER_CODE_WORD, (
        f"{path.name}: {ratio:.2f} words of prose per word of code (at least "
        f"{MIN_PROSE_PER_CODE_WORD}); say before each cell what it shows and why"
    )


def test_stored_timings_of_04d_come_from_a_quiet_run():
    """Notebook 4d says its timing cells store the outputs of a run on a quiet machine.

    On a quiet machine the row-blocked softmax is never much slower than forming the whole matrix
    (it does the same work in smaller pieces), and both grow like n^2 between 1024 and 4096; a run
    disturbed by other work breaks one or the other (a stored run once had the blocked variant 2x
    slower than the full one at n = 4096, and a fitted exponent of 2.31).
    """
    nb = json.loads((ROOT / "notebooks" / "04d_cost.ipynb").read_text())
    printed = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                      for o in c.get("outputs", []) if o.get("output_type") == "stream")
    rows = {int(m[1]): (float(m[2]), float(m[3])) for m in re.finditer(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s", printed, re.M)}
    assert {1024, 2048, 4096} <= set(rows), printed
    for n in (1024, 2048, 4096):
        full, blocked = rows[n]
        assert blocked <= 1.3 * full, (n, full, blocked)
    exponents = dict(re.findall(r"^(softmax|blocked): time ~ n\^([\d.]+)", printed, re.M))
    assert set(exponents) == {"softmax", "blocked"}, printed
    assert all(1.6 <= float(p) <= 2.4 for p in exponents.values()), exponents


def test_an_nbval_diff_labels_the_stored_output_and_this_run():
    """A failing cell's diff says which side is the notebook file's and which this run's: nbval
    asks pytest for the diff of ``stored == this run`` (the root conftest answers inside a cell)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    assert root_conftest.pytest_assertrepr_compare(None, "==", "a\nSTORED\nc", "a\nfresh\nc") is None
    root_conftest._RUNNING_CELL.append(True)  # as while an nbval cell runs
    lines = root_conftest.pytest_assertrepr_compare(None, "==", "a\nSTORED\nc", "a\nfresh\nc")
    assert "--- stored in the notebook file" in lines and "+++ this run" in lines
    assert "-STORED" in lines and "+fresh" in lines
    assert any("'-' lines" in line and "stored" in line and "'+' lines" in line for line in lines)
