"""Build the website strictly and report what the build cost.

Usage: python scripts/build_book.py

Runs ``jupyter-book build`` with warnings as errors (-W), nitpicky references
(-n) and --keep-going (so every warning is listed, not only the first), then
prints how long each notebook took to execute (from the execution cache in
_build/.jupyter_cache) and where index.html is.  Exits non-zero if the build
failed or printed any warning.  ``make book`` and the test suite both call it.
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# BOOK_OUTPUT (default: the repository) lets two builds run side by side: the
# website goes to $BOOK_OUTPUT/_build/html, the execution cache beside it.
OUTPUT = Path(os.environ.get("BOOK_OUTPUT", ROOT)).resolve()
BUILD = OUTPUT / "_build"
SPHINX_WARNING = re.compile(r"(^|: )(WARNING|ERROR|CRITICAL): ")


def notebook_times():
    """``{notebook path: seconds}`` for every notebook in the execution cache."""
    try:
        from jupyter_cache import get_cache
    except ImportError:
        return {}
    cache_dir = BUILD / ".jupyter_cache"
    if not cache_dir.exists():
        return {}
    cache = get_cache(str(cache_dir))
    times = {}
    for record in cache.list_project_records():
        cached = cache.get_cached_project_nb(record.uri)
        if cached is not None:
            seconds = cached.data.get("execution_seconds")
            if seconds is not None:
                times[Path(record.uri).relative_to(ROOT).as_posix()] = seconds
    return times


def main():
    command = [
        str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT),
        "--warningiserror", "--nitpick", "--keep-going", "--path-output", str(OUTPUT),
    ]
    start = time.perf_counter()
    env = dict(os.environ, NO_COLOR="1")  # plain text, so warnings can be matched
    proc = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    elapsed = time.perf_counter() - start
    sys.stdout.write(proc.stdout)
    # Sphinx's own format ("file:line: WARNING: ..."); kernel chatter such as
    # "[IPKernelApp] WARNING | ..." goes to the terminal, not into the book.
    warnings = [line for line in proc.stdout.splitlines() if SPHINX_WARNING.search(line)]
    print(f"\nbook build: {elapsed:.1f} s, exit code {proc.returncode}, {len(warnings)} warning or error lines")
    times = notebook_times()
    if times:
        print("notebook execution times (from the execution cache):")
        for path, seconds in sorted(times.items()):
            print(f"  {seconds:7.2f} s  {path}")
    if proc.returncode != 0 or warnings:
        for line in warnings:
            print("  " + line)
        return 1
    print(f"The book is at file://{BUILD / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
