"""Give every notebook the canonical first code cell and the metadata JupyterLab writes.

Usage: make notebook-headers      (every notebook, and its text twin synced)
       python scripts/notebook_header.py [--check] [notebooks/NAME.ipynb ...]

Any ``python`` will do: outside ``.venv`` (where nbformat is missing) the script runs itself
again with ``.venv/bin/python``.

A notebook downloaded from the site, or opened on Colab, runs outside this
repository, where ``attncore`` is not installed.  Its first code cell (the
"setup cell", generated here and nowhere else) installs the package when it is
missing, from the wheel the website publishes next to its pages, and provides
``glue`` (myst-nb's way of putting a value or figure on a chapter page) with a
plain-display fallback where myst-nb is not installed.

What this script does to each notebook (idempotent; re-run it after merging):

- the first code cell becomes the setup cell (inserted before the first code
  cell, or updated in place when it is already there);
- ``from myst_nb import glue`` lines in later cells are removed (the setup
  cell provides ``glue`` everywhere, so the notebook still runs without myst-nb);
- execution counts are renumbered 1, 2, ... over the executed code cells, as a
  fresh run numbers them, so the stored notebook looks as after a refresh;
- consecutive stream outputs of one stream are merged into one, as JupyterLab stores
  them (how the kernel happened to flush its output must not show in the file);
- the kernelspec is the one JupyterLab writes for the ipykernel kernel (so
  opening a notebook does not rewrite it), and per-cell execution timestamps and
  widget state are dropped;
- the recorded Python version (``language_info.version``) is cut to major.minor
  (``3.11``): a run under another 3.11.x patch release changes no line of the file;
- the notebook is paired with its MyST text twin ``notebooks/NAME.md``
  (jupytext ``formats: ipynb,md:myst``), so that either file can be edited and
  ``jupytext --sync`` (``make pair``) carries the edit to the other;
- the file is written as JupyterLab writes it (nbformat: indent 1, sorted keys).

With ``--check`` nothing is written; the exit code is 1 if any notebook would change.
The repository address comes from ``_config.yml`` (``repository.url``), the
package version from ``attncore/__init__.py``: both are set in one place only.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run_in_the_venv() -> None:
    """Run as a script by a python without nbformat: start again with .venv's python."""
    try:
        import nbformat  # noqa: F401
        import yaml  # noqa: F401
    except ModuleNotFoundError as missing:
        venv = ROOT / ".venv"
        if (venv / "bin" / "python").is_file() and Path(sys.prefix).resolve() != venv.resolve():
            os.execv(venv / "bin" / "python", [str(venv / "bin" / "python"), __file__, *sys.argv[1:]])
        raise SystemExit(f"{missing.name} is not installed: run `make notebook-headers`, which creates "
                         ".venv with every pinned package and runs this script in it") from None


if __name__ == "__main__":
    _run_in_the_venv()

import nbformat  # noqa: E402
import yaml  # noqa: E402

SETUP_CELL_ID = "attncore-setup"
# the pairing of every notebook with its text twin (jupytext), both ways
FORMATS = "ipynb,md:myst"
# the kernelspec JupyterLab stores for the ipykernel "python3" kernel
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
GLUE_IMPORT = re.compile(r"^[ \t]*from[ \t]+myst_nb[ \t]+import[ \t]+glue[ \t]*(#.*)?\n?", re.MULTILINE)


def repository_url() -> str:
    """The repository address, from ``_config.yml`` (its only home)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["url"].rstrip("/")


def pages_url(repo: str | None = None) -> str:
    """The GitHub Pages address of the repository ``https://github.com/OWNER/NAME``."""
    match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+)", repo or repository_url())
    if not match:
        raise ValueError(f"repository.url in _config.yml is not a GitHub address: {repo!r}")
    owner, name = match.groups()
    return f"https://{owner.lower()}.github.io/{name}/"


def package_version() -> str:
    """attncore's version, read from the one place it is written: ``__version__`` in its ``__init__``."""
    tree = ast.parse((ROOT / "attncore" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]:
            return ast.literal_eval(node.value)
    raise ValueError("attncore/__init__.py sets no __version__")


def wheel_name() -> str:
    """The file name of attncore's wheel (pure Python, so one wheel fits every platform)."""
    return f"attncore-{package_version()}-py3-none-any.whl"


def wheel_url() -> str:
    """Where the website publishes the wheel: next to its pages."""
    return pages_url() + wheel_name()


def setup_cell_source(wheel: str | None = None) -> str:
    """The canonical first code cell; ``wheel`` replaces the published wheel's address (tests)."""
    wheel = wheel or wheel_url()
    return f'''\
# Setup: installs attncore, this course's package, when it is missing (Colab, a download).
import importlib.util
if importlib.util.find_spec("attncore") is None:
    %pip install --quiet "attncore[notebooks] @ {wheel}"
    importlib.invalidate_caches()
    if importlib.util.find_spec("attncore") is None:
        raise ModuleNotFoundError(
            "attncore is not installed, and installing it from the course website failed "
            "(no network, or the site is not published; pip's message is above).\\n"
            "Instead, in a clone of the course ({repository_url()}), run `make wheel`; then here\\n"
            "    %pip install '/PATH/TO/THE/CLONE/_build/html/{wheel_name()}[notebooks]'\\n"
            "and restart the kernel.")
try:
    from myst_nb import glue  # puts a value or a figure on a chapter page of the book
except ModuleNotFoundError:  # outside the book's toolchain, glue just shows it
    def glue(name, variable, display=True):
        if display:
            from IPython.display import display as show
            show(variable)'''


def setup_cell():
    """The setup cell, folded: the book shows a "show code" toggle, JupyterLab a collapsed input."""
    cell = nbformat.v4.new_code_cell(setup_cell_source())
    cell.id = SETUP_CELL_ID
    cell.metadata = {"tags": ["hide-input"], "jupyter": {"source_hidden": True}}
    return cell


def is_setup_cell(cell) -> bool:
    return cell.get("id") == SETUP_CELL_ID or (
        cell.cell_type == "code" and cell.source.startswith("# Setup: installs attncore")
    )


def merge_streams(outputs: list) -> list:
    """Consecutive ``stream`` outputs of the same stream (stdout/stderr), merged."""
    merged = []
    for output in outputs:
        last = merged[-1] if merged else None
        if (output.get("output_type") == "stream" and last is not None
                and last.get("output_type") == "stream" and last.get("name") == output.get("name")):
            last["text"] = "".join(last["text"]) + "".join(output["text"])
        else:
            merged.append(output)
    return merged


def normalise(nb) -> None:
    """Apply every rule of the module docstring to the notebook ``nb`` in place."""
    executed = any(c.cell_type == "code" and c.get("execution_count") for c in nb.cells)
    nb.cells = [c for c in nb.cells if not is_setup_cell(c)]
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    nb.cells.insert(first_code, setup_cell())
    count = 0
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        if cell.id != SETUP_CELL_ID:
            cell.source = GLUE_IMPORT.sub("", cell.source)
        cell.outputs = merge_streams(cell.outputs)
        if executed:
            count += 1
            cell.execution_count = count
            for output in cell.outputs:
                if output.output_type == "execute_result":
                    output.execution_count = count
        else:
            cell.execution_count = None
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    language = nb.metadata.get("language_info", {})
    if "version" in language:
        language["version"] = ".".join(str(language["version"]).split(".")[:2])
    nb.metadata.setdefault("jupytext", {})["formats"] = FORMATS
    nb.metadata.pop("widgets", None)


def as_jupyterlab_writes(nb) -> str:
    """The file's text as JupyterLab saves it (it calls nbformat.writes the same way)."""
    text = nbformat.writes(nb, version=nbformat.NO_CONVERT)
    return text if text.endswith("\n") else text + "\n"


def process(path: Path, check: bool) -> bool:
    """Normalise one notebook; True if its file changed (or, with ``check``, would change)."""
    old = path.read_text(encoding="utf-8")
    nb = nbformat.reads(old, as_version=4)
    normalise(nb)
    new = as_jupyterlab_writes(nb)
    if new != old and not check:
        path.write_text(new, encoding="utf-8")
    return new != old


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    changed = [p for p in paths if process(p, check)]
    for path in changed:
        print(("would change: " if check else "normalised: ") + str(path))
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
