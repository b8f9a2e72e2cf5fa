"""Build the website strictly: ``make book`` and the test suite both call this.

Usage: python scripts/build_book.py

Runs ``jupyter-book build`` with warnings as errors (-W), nitpicky references
(-n) and --keep-going (every warning is listed, not only the first; the exit
code is still non-zero when there was one).  The notebooks are not executed:
the book shows their stored outputs, which nbval checks in `make test`.
BOOK_OUTPUT (default: the repository) lets two builds run side by side: the
website goes to $BOOK_OUTPUT/_build/html.

Why a script and not one Makefile line: the test suite's book fixture runs this same
file, so `make book` and `make test` build with identical flags, and the build's time
and the address of the result are printed in one place.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(os.environ.get("BOOK_OUTPUT", ROOT)).resolve()


def main():
    command = [
        str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT),
        "--warningiserror", "--nitpick", "--keep-going", "--path-output", str(OUTPUT),
    ]
    start = time.perf_counter()
    returncode = subprocess.run(command, cwd=ROOT, env=dict(os.environ, NO_COLOR="1")).returncode
    print(f"\nbook build: {time.perf_counter() - start:.1f} s, exit code {returncode}")
    if returncode == 0:
        print(f"The book is at file://{OUTPUT / '_build' / 'html' / 'index.html'}")
    return returncode


if __name__ == "__main__":
    sys.exit(main())
