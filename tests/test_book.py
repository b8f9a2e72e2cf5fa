"""The website builds with zero warnings.

Runs scripts/build_book.py (the same command as `make book`): jupyter-book
with -W (warnings are errors), -n (every reference must resolve) and
--keep-going, executing every notebook (cached when unchanged).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.book
def test_book_builds_without_warnings():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_book.py")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    tail = "\n".join(proc.stdout.splitlines()[-40:])
    assert proc.returncode == 0, tail
    output = Path(os.environ.get("BOOK_OUTPUT", ROOT))
    assert (output / "_build" / "html" / "index.html").is_file()
