"""Serve the book on localhost and rebuild the page you edit on every save: ``make preview``.

Usage: python scripts/preview.py [--port N] [--no-serve]

Jupyter Book 1 builds without a ``conf.py``; sphinx-autobuild needs one. This script writes
the Sphinx configuration Jupyter Book derives from ``_config.yml`` and ``_toc.yml`` (the
same function ``jupyter-book config sphinx`` and ``jupyter-book build`` call) into
``_build/preview/conf/conf.py``, with the local extensions' folders on ``sys.path`` and the
static folder made absolute (Sphinx reads those against the configuration's folder, not the
book's), then runs sphinx-autobuild on the repository: a first full build (a few minutes,
into ``_build/preview/html``, apart from ``make book``'s ``_build/html``), then, on each save
of a chapter or a notebook, an incremental build of what changed, and the browser reloads
the page.

The preview is for reading while writing: it does not stop on warnings. ``make book`` (and
``make test``) builds strictly (warnings are errors, every reference must resolve). An edit
to ``_config.yml`` or ``_toc.yml`` needs a restart of the preview. ``--no-serve`` only
writes the configuration (the tests use it).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREVIEW = ROOT / "_build" / "preview"
CONF_DIR = PREVIEW / "conf"
HTML = PREVIEW / "html"
# Files and folders under the repository that are never pages: edits there rebuild nothing.
# (attncore/ stays watched: the chapters include its code and the API page documents it.)
IGNORE = ["_build", ".venv", ".git", "tests", "scripts", "bench", "mutants", ".jupyter_cache",
          ".hypothesis", "binder", ".github", ".ci"]
# editors' backup and swap files, caches, and the notebooks' text twins (not pages: `make pair`
# carries a twin's edit into its notebook, which the preview then rebuilds)
# and the files at the top of the repository (none is a page; _config.yml and _toc.yml need a restart)
IGNORE_RE = [r"~$", r"\.swp$", r"/\.#", r"/__pycache__/", r"\.ipynb_checkpoints", r"/notebooks/[^/]+\.md$",
             "^" + re.escape(ROOT.as_posix()) + r"/[^/]+$"]


# The claims ledger's pages are re-read on every build (their evidence can change without
# claims.yml changing), and each of the eight reads and checks the whole ledger again
# (book/_ext/claims_ledger.py): 60 of the 75 s that one edited paragraph cost on a busy
# 2-core machine. In the preview only (make book is unchanged):
# - a ledger page is re-read when claims.yml or the page itself is newer than its last
#   reading, not on every build (an edit to a notebook's evidence shows there after a
#   restart of the preview, or in make book);
# - a rebuild is one process reading one state of the files, so it reads and checks the
#   ledger once, not once per page.
LEDGER_ONCE = """
import os


def setup(app):
    def reread_ledger_pages_only_when_changed(app, env, docnames):
        ledger = os.path.join(app.srcdir, "book", "claims.yml")
        for doc in sorted(getattr(env, "claims_ledger_docs", ())):
            tree = os.path.join(app.doctreedir, doc + ".doctree")
            if doc in docnames and os.path.exists(tree) and os.path.getmtime(tree) > max(
                    os.path.getmtime(ledger), os.path.getmtime(env.doc2path(doc))):
                docnames.remove(doc)

    app.connect("env-before-read-docs", reread_ledger_pages_only_when_changed)

try:
    import claims_ledger as _ledger
except ImportError:  # the extension was renamed or split: the preview is only slower
    _ledger = None
if _ledger is not None and hasattr(_ledger, "load_ledger") and hasattr(_ledger, "ledger_problems"):
    _read, _check, _memo = _ledger.load_ledger, _ledger.ledger_problems, {}

    def _load_once(root):
        key = ("load", str(root))
        if key not in _memo:
            _memo[key] = _read(root)
        return _memo[key]

    def _check_once(root, ledger=None, strength=True):
        key = ("check", str(root), id(ledger), strength)
        if key not in _memo:
            _memo[key] = _check(root, ledger, strength)
        return _memo[key]

    _ledger.load_ledger, _ledger.ledger_problems = _load_once, _check_once
"""


def sphinx_config() -> dict:
    """What Jupyter Book passes to Sphinx for this book (config, toc and local extensions)."""
    import click
    from jupyter_book.cli.main import build
    from jupyter_book.config import get_final_config

    # as `jupyter-book config sphinx` does: the build command's own reading of the book's files
    path_config, source, overrides = click.Context(build).invoke(
        build, path_source=str(ROOT), config=None, toc=None, get_config_only=True)
    config, _ = get_final_config(user_yaml=Path(path_config), sourcedir=Path(source), cli_config=overrides)
    return config


def write_conf() -> Path:
    """``_build/preview/conf/conf.py``: the book's Sphinx configuration, paths made absolute."""
    import yaml

    config = sphinx_config()
    for key in ("html_static_path", "bibtex_bibfiles"):  # read against the configuration's folder
        config[key] = [str((ROOT / p).resolve()) for p in config.get(key, [])]
    local = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8")).get("sphinx", {})
    paths = sorted({str((ROOT / p).resolve()) for p in (local.get("local_extensions") or {}).values()})
    lines = [
        "# Written by scripts/preview.py from _config.yml and _toc.yml (make preview); not committed.",
        "import sys",
        f"sys.path[:0] = {paths!r}",
        *(f"{key} = {config[key]!r}" for key in sorted(config)),
        LEDGER_ONCE,
    ]
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    conf = CONF_DIR / "conf.py"
    conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return conf


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("PREVIEW_PORT", 8000)))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--no-serve", action="store_true", help="only write the configuration")
    args = parser.parse_args(argv)
    conf = write_conf()
    print(f"preview: Sphinx configuration written to {conf.relative_to(ROOT)}")
    if args.no_serve:
        return 0
    print(f"preview: first build of every page (a few minutes), then http://{args.host}:{args.port}/ "
          "reloads on every save; Ctrl+C stops it")
    command = [
        str(Path(sys.executable).with_name("sphinx-autobuild")),
        str(ROOT), str(HTML), "-c", str(CONF_DIR),
        "--host", args.host, "--port", str(args.port),
        *(arg for path in IGNORE for arg in ("--ignore", str(ROOT / path))),
        *(arg for pattern in IGNORE_RE for arg in ("--re-ignore", pattern)),
        # what sphinx-build gets: quiet (warnings still show); one process (the book's extensions
        # do not all allow parallel reading)
        "-q",
    ]
    os.chdir(ROOT)
    os.execv(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
