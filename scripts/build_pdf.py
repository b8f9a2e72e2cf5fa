"""The whole course as one PDF: _build/pdf/attention-proved.pdf.

Usage: python scripts/build_pdf.py [--print-only]

Route: Sphinx's single-page HTML (``jupyter-book build --builder singlehtml``: every
chapter, notebook with its stored outputs and figures, appendix and the claims ledger
on one page, MathJax served from the site itself) printed to PDF by Debian's headless
chromium, driven by Playwright -- the browser `make test` already uses for the site
tests. Why not LaTeX: the book's pages use MathJax-only and HTML-only features
(sphinx-proof and sphinx-exercise boxes, notebook HTML outputs, the ledger's tables),
and a TeX Live able to typeset them (texlive-latex-extra, -fonts-extra, -xetex) is
over a gigabyte of Debian packages; chromium is about 250 MB and already installed.

Before printing, the script waits until MathJax has typeset every formula, opens
every dropdown (exercise solutions), hides the navigation, puts each chapter on a
new page and inserts a table of contents (with links); the PDF also gets an outline
(bookmarks) from the headings. Notebooks run from the execution cache that
`make book` fills (_build/.jupyter_cache), so after `make book` this takes a minute
or two; from a fresh clone it executes the notebooks first.

If _build/html exists, the PDF is copied there too (the site links to it).
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(os.environ.get("BOOK_OUTPUT", ROOT)).resolve()
BUILD = OUTPUT / "_build"
PDF_NAME = "attention-proved.pdf"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

PRINT_CSS = """
@page { size: A4; margin: 16mm 14mm 18mm 14mm; }
html, body { background: white !important; }
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-header-article, .bd-footer,
.bd-footer-article, .bd-footer-content, .prev-next-area, .header-article-items,
.headerlink, .copybtn, .skip-link, #pst-back-to-top, .search-button-field,
.bd-search, .sidebar-toggle, .toggle-secondary-sidebar, .theme-switch-button { display: none !important; }
.bd-main, .bd-content, .bd-article-container, .bd-page-width, .bd-container, .bd-container__inner,
.bd-article { max-width: 100% !important; width: 100% !important; margin: 0 !important; padding: 0 !important; }
body { font-size: 10.5pt; }
pre, .highlight pre { white-space: pre-wrap !important; word-break: break-word; font-size: 8.5pt; }
.cell_output img, figure img, img { max-width: 100% !important; page-break-inside: avoid; break-inside: avoid; }
mjx-container[display="true"] { overflow: visible !important; }
table { font-size: 8.5pt; }
.ap-chapter, #ap-print-toc { break-before: page; }
.bd-sidebar-secondary, .bd-toc, nav.bd-links, .page-toc, #jb-print-docs-body { display: none !important; }
#ap-print-toc h1 { font-size: 20pt; }
#ap-print-toc ol { list-style: none; padding-left: 0; }
#ap-print-toc li.l1 { margin-top: 0.5em; font-weight: 600; }
#ap-print-toc li.l2 { padding-left: 1.5em; font-weight: normal; }
#ap-print-toc a { color: black; text-decoration: none; }
"""

# Runs in the page: open dropdowns, start every document on a new page, build the contents.
# The single-page builder marks where each document starts with <span id="document-NAME">,
# followed by the document's top <section>; its heading level says chapter or section.
PREPARE_JS = """
() => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  const docs = Array.from(document.querySelectorAll('span[id^="document-"]'))
    .map(span => span.nextElementSibling)
    .filter(s => s && s.tagName === 'SECTION');
  const heading = s => s.querySelector('h1, h2, h3, h4, h5, h6');
  const levels = docs.map(s => heading(s) ? Number(heading(s).tagName[1]) : 9);
  const top = Math.min(...levels);
  const toc = document.createElement('nav');
  toc.id = 'ap-print-toc';
  toc.innerHTML = '<h1>Contents</h1>';
  const list = document.createElement('ol');
  docs.forEach((s, i) => {
    s.classList.add('ap-chapter');
    const h = heading(s);
    if (!h) return;
    const li = document.createElement('li');
    li.className = levels[i] === top ? 'l1' : 'l2';
    const a = document.createElement('a');
    a.href = '#' + s.id;
    a.textContent = h.textContent.replace(/#$/, '').trim();
    li.appendChild(a);
    list.appendChild(li);
  });
  toc.appendChild(list);
  if (docs.length) {
    const wrapper = docs[0].parentElement;
    wrapper.parentElement.insertBefore(toc, wrapper);
  }
  return docs.length;
}
"""

MATHJAX_DONE_JS = """
async () => {
  if (!window.MathJax) return 'no MathJax on the page';
  if (MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  if (MathJax.typesetPromise) await MathJax.typesetPromise();
  return 'ok';
}
"""


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def pdf_config() -> Path:
    """_config.yml plus the extension the single-page builder needs (scripts/pdf_sphinx.py)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    sphinx = config.setdefault("sphinx", {})
    extensions = sphinx.setdefault("local_extensions", {})
    extensions["pdf_sphinx"] = "scripts"
    # Jupyter Book resolves these paths against the config file's folder: make them absolute
    sphinx["local_extensions"] = {name: str((ROOT / path).resolve()) for name, path in extensions.items()}
    target = BUILD / "pdf" / "_config.yml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return target


def build_singlehtml() -> Path:
    command = [
        str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT),
        "--builder", "singlehtml", "--path-output", str(OUTPUT), "--config", str(pdf_config()),
    ]
    proc = subprocess.run(command, cwd=ROOT, env=dict(os.environ, NO_COLOR="1"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-8000:])
        raise SystemExit(f"the single-page build failed (exit code {proc.returncode})")
    root = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))["root"]
    page = BUILD / "singlehtml" / f"{root}.html"
    if not page.is_file():
        raise SystemExit(f"no {page} after the single-page build")
    # The builder writes the page at the root document's path (book/index.html) but links
    # its styles, scripts (MathJax) and images as if it were at the top: print a copy there.
    index = BUILD / "singlehtml" / "attention-proved.html"
    shutil.copy(page, index)
    return index


def print_pdf(index: Path, target: Path) -> int:
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        raise SystemExit("no chromium on this machine: apt-get install chromium (make pdf prints with it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        page.goto(index.as_uri(), wait_until="load", timeout=300_000)
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                               timeout=120_000)
        status = page.evaluate(MATHJAX_DONE_JS)
        if status != "ok":
            raise SystemExit(f"math was not typeset: {status}")
        page.add_style_tag(content=PRINT_CSS)
        chapters = page.evaluate(PREPARE_JS)
        page.emulate_media(media="print")
        page.pdf(
            path=str(target), format="A4", print_background=True, outline=True, tagged=True,
            display_header_footer=True,
            header_template="<span></span>",
            footer_template=(
                '<div style="font-size:8pt;width:100%;text-align:center;color:#555">'
                'Attention, Proved &middot; <span class="pageNumber"></span> / <span class="totalPages"></span></div>'
            ),
            margin={"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"},
        )
        browser.close()
    return chapters


def main(argv) -> int:
    start = time.perf_counter()
    # --print-only: reprint the last single-page build (while working on the print styles)
    index = BUILD / "singlehtml" / "attention-proved.html" if "--print-only" in argv else build_singlehtml()
    built = time.perf_counter()
    target = BUILD / "pdf" / PDF_NAME
    documents = print_pdf(index, target)
    html = BUILD / "html"
    if html.is_dir():
        shutil.copy(target, html / PDF_NAME)
    print(f"pdf: {target} ({target.stat().st_size / 1e6:.1f} MB, {documents} documents); "
          f"single-page build {built - start:.0f} s, printing {time.perf_counter() - built:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
