"""Shared fixtures and the hypothesis profiles of the test suite."""

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# CI runs are derandomized so that a red run is reproducible from its log;
# local runs explore new examples every time.
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=60, deadline=None)
# `make check`, the inner loop: the same properties over fewer examples (make test and CI run
# the full profiles above); HYPOTHESIS_PROFILE chooses, as in hypothesis's own docs.
settings.register_profile(
    "fast", max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


ROOT = Path(__file__).resolve().parent.parent


@dataclass
class BookBuild:
    returncode: int
    output: str
    html: Path


@pytest.fixture(scope="session")
def book_build():
    """Build the website once per test session, strictly (scripts/build_book.py).

    The build goes to $BOOK_OUTPUT/_build/html (the repository by default); the
    book-build test asserts that it succeeded, the site tests read what it wrote.
    """
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_book.py")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    output = Path(os.environ.get("BOOK_OUTPUT", ROOT))
    _BUILDS.append(BookBuild(proc.returncode, proc.stdout, output / "_build" / "html"))
    return _BUILDS[-1]


_BUILDS: list[BookBuild] = []


def pytest_terminal_summary(terminalreporter):
    """Report what the book build cost."""
    for build in _BUILDS:
        lines = build.output.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("book build:")), None)
        if start is not None:
            terminalreporter.section("book build")
            for line in lines[start:]:
                if line.startswith("book build:"):
                    terminalreporter.write_line(line)
