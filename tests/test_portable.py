"""A notebook downloaded from the site runs outside the repository.

The slow test builds attncore's wheel, creates a fresh virtual environment with
only the notebook requirements (binder/requirements.txt, plus the Jupyter kernel
and runner a reader has), copies one notebook into an empty directory, points
its setup cell at the local wheel instead of the website, and executes it there:
the setup cell must install attncore, and every cell must run.
"""

import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import notebook_header  # noqa: E402
from build_wheel import build_wheel  # noqa: E402

# one notebook that uses attncore, sympy, matplotlib (a figure) and mpmath's neighbours
NOTEBOOK = ROOT / "notebooks" / "01b_lookup_softmax.ipynb"
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)$")


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line.strip())
        if match:
            found[match.group(1).lower().replace("_", "-")] = match.group(2)
    return found


def test_binder_requirements_agree_with_the_lock():
    """Binder and the portable test get the same versions as `make test` (requirements.txt)."""
    binder, lock = pins(ROOT / "binder" / "requirements.txt"), pins(ROOT / "requirements.txt")
    assert binder, "binder/requirements.txt pins nothing"
    differ = {name: (v, lock.get(name)) for name, v in binder.items() if lock.get(name) != v}
    assert not differ, f"binder/requirements.txt disagrees with requirements.txt: {differ}"
    assert os.access(ROOT / "binder" / "postBuild", os.X_OK), "binder/postBuild must be executable"


RUNNER = """\
import sys
import nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, kernel_name="portable", allow_errors=False).execute()
print("executed", sum(c.cell_type == "code" for c in nb.cells), "code cells")
"""


def test_downloaded_notebook_runs_in_a_fresh_environment(tmp_path):
    start = time.perf_counter()
    wheel = build_wheel(tmp_path / "dist")
    # PEP 561: the marker that tells a type checker to read attncore's annotations
    assert "attncore/py.typed" in zipfile.ZipFile(wheel).namelist(), "pyproject.toml: package-data py.typed"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The reader's machine: Python, pip, a Jupyter kernel and runner, the notebook requirements.
    # No attncore, no editable install, no repository on the path.
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(ROOT / "binder" / "requirements.txt"),
         "ipykernel", "nbclient", "-c", str(ROOT / "requirements.txt")],
        check=True,
    )
    subprocess.run([str(python), "-m", "ipykernel", "install", "--prefix", str(venv), "--name", "portable"],
                   check=True, stdout=subprocess.DEVNULL)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH")}
    env["PATH"] = os.pathsep.join(
        [str(venv / "bin")] + [p for p in env.get("PATH", "").split(os.pathsep) if str(ROOT) not in p]
    )
    work = tmp_path / "download"
    work.mkdir()
    missing = subprocess.run([str(python), "-c", "import attncore"], cwd=work, env=env, capture_output=True)
    assert missing.returncode != 0, "attncore is importable before the setup cell ran: the test proves nothing"

    nb = nbformat.read(NOTEBOOK, as_version=4)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert setup.source == notebook_header.setup_cell_source()
    for cell in nb.cells:  # a download carries the stored outputs; the run replaces them
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    target = work / NOTEBOOK.name
    (tmp_path / "run.py").write_text(RUNNER)

    # The website cannot be reached (here: a wheel address that does not exist): the setup
    # cell itself stops, saying what failed and what to do, not a later cell's import.
    published = setup.source
    setup.source = published.replace(notebook_header.wheel_url(), (tmp_path / "nowhere.whl").as_uri())
    nbformat.write(nb, target)
    proc = subprocess.run([str(python), str(tmp_path / "run.py"), str(target)], cwd=work, env=env,
                          capture_output=True, text=True)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said[-3000:]
    assert "installing it from the course website failed" in said and "make wheel" in said, said[-3000:]
    assert "No module named" not in said, "a later cell failed instead of the setup cell: " + said[-3000:]

    setup.source = published.replace(notebook_header.wheel_url(), wheel.as_uri())
    assert wheel.as_uri() in setup.source
    nbformat.write(nb, target)
    proc = subprocess.run([str(python), str(tmp_path / "run.py"), str(target)], cwd=work, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    where = subprocess.run([str(python), "-c", "import attncore; print(attncore.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert str(venv) in where and str(ROOT) not in where, where
    print(f"portable notebook test: {time.perf_counter() - start:.1f} s")
