"""Build attncore's wheel from a clean copy of its sources.

Usage: python scripts/build_wheel.py [OUTDIR]   (default: _build/html, next to the website)

The website publishes the wheel next to its pages; every notebook's setup cell
(scripts/notebook_header.py) installs it from there when attncore is missing.
The sources are copied to a temporary directory first, so the build leaves no
build/ or *.egg-info behind in the repository.

Why not ``python -m build``: pypa's build is not among the pinned requirements, and
without ``--no-isolation`` it downloads setuptools into a fresh environment, which
`make book` must not need; ``pip wheel --no-build-isolation`` is the same PEP 517 build
with the pinned setuptools of .venv.
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ["pyproject.toml", "README.md", "LICENSE", "attncore"]


def build_wheel(outdir: Path) -> Path:
    """Build the wheel into ``outdir`` and return its path."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from notebook_header import wheel_name

    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(ROOT / name, src / name)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
             "--no-build-isolation", "-w", str(outdir), str(src)],
            check=True,
        )
    wheel = outdir / wheel_name()
    if not wheel.is_file():
        raise SystemExit(f"expected {wheel} after the build")
    return wheel


if __name__ == "__main__":
    print(build_wheel(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "_build" / "html"))
