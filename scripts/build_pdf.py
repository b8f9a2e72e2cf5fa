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
new page, and inserts a title page (title, edition, authors, licence, address) and a
table of contents (with links, and with each entry's heading as typeset, math
included); the PDF also gets an outline (bookmarks) from the headings. Chromium
cannot number the contents' pages itself, so the book is printed twice: the first
print says on which page each contents link lands (its link annotation's
destination), the numbers are written into the contents, and the second print is
the PDF. The notebooks are not executed: the book shows their stored outputs.

If _build/html exists, the PDF is copied there too (the site links to it).

The whole run takes minutes (about ten on a busy 2-core machine): it says which step it is
on when the step starts and, while a step lasts, every 20 seconds (``Progress``).
"""

import contextlib
import os
import shutil
import subprocess
import sys
import threading
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
#ap-print-toc { break-after: page; }
.bd-sidebar-secondary, .bd-toc, nav.bd-links, .page-toc, #jb-print-docs-body { display: none !important; }
#ap-print-toc .ap-toc-heading { font-size: 20pt; font-weight: 700; margin-bottom: 0.8em; }
#ap-print-toc ol { list-style: none; padding-left: 0; }
#ap-print-toc li.l1 { margin-top: 0.5em; font-weight: 600; }
#ap-print-toc li.l2 { padding-left: 1.5em; font-weight: normal; }
#ap-print-toc a { color: black; text-decoration: none; }
#ap-print-toc li { display: flex; align-items: baseline; }
#ap-print-toc li a { flex: 0 1 auto; }
#ap-print-toc li .ap-dots { flex: 1 1 auto; border-bottom: 1px dotted #999; margin: 0 0.4em; min-width: 1em; }
#ap-print-toc li .ap-page { flex: 0 0 auto; font-variant-numeric: tabular-nums; }
#ap-print-toc a .headerlink, #ap-print-toc a .caption-number { display: none !important; }
#ap-title-page { break-after: page; text-align: center; padding-top: 28%; }
#ap-title-page .ap-title { font-size: 34pt; font-weight: 700; margin: 0 0 0.3em 0; }
#ap-title-page .ap-subtitle { font-size: 15pt; margin: 0 0 3em 0; }
#ap-title-page p { margin: 0.4em 0; }
"""

# Runs in the page: open dropdowns, start every document on a new page, build the contents.
# The single-page builder marks where each document starts with <span id="document-NAME">,
# followed by the document's top <section>; its heading level says chapter or section.
PREPARE_JS = """
(front) => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  // each document's top <section>, remembered with its <span id="document-NAME">: the span's id
  // is unique, while a section's id is its title's slug, which two documents may share
  const spans = new Map();
  const docs = Array.from(document.querySelectorAll('span[id^="document-"]'))
    .map(span => { const s = span.nextElementSibling; if (s) spans.set(s, span.id); return s; })
    .filter(s => s && s.tagName === 'SECTION');
  const heading = s => s.querySelector('h1, h2, h3, h4, h5, h6');
  const levels = docs.map(s => heading(s) ? Number(heading(s).tagName[1]) : 9);
  const top = Math.min(...levels);
  const title = document.createElement('section');
  title.id = 'ap-title-page';
  title.innerHTML = front;
  const toc = document.createElement('nav');
  toc.id = 'ap-print-toc';
  // not <h1>: the theme's print styles hide a page's extra h1 (the contents lost their heading)
  toc.innerHTML = '<div class="ap-toc-heading" role="heading" aria-level="1">Contents</div>';
  const list = document.createElement('ol');
  docs.forEach((s, i) => {
    s.classList.add('ap-chapter');
    const h = heading(s);
    if (!h) return;
    const li = document.createElement('li');
    li.className = levels[i] === top ? 'l1' : 'l2';
    const a = document.createElement('a');
    // the target sits inside the section, after its page break (the span before it would land on
    // the previous page), with an id of its own
    const target = document.createElement('a');
    target.id = 'ap-' + spans.get(s);
    s.prepend(target);
    a.href = '#' + target.id;
    // the heading as typeset (MathJax's output included), not its text, which loses the math
    a.innerHTML = h.innerHTML;
    a.querySelectorAll('.headerlink').forEach(e => e.remove());
    li.appendChild(a);
    li.insertAdjacentHTML('beforeend', '<span class="ap-dots"></span><span class="ap-page"></span>');
    list.appendChild(li);
  });
  toc.appendChild(list);
  // before everything, the root page's own text included: title page, then contents
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  article.prepend(toc);
  article.prepend(title);
  return list.children.length;
}
"""

# After the first print: the page numbers, in the order of the contents' entries.
NUMBER_TOC_JS = """
(numbers) => {
  const pages = document.querySelectorAll('#ap-print-toc .ap-page');
  pages.forEach((span, i) => { span.textContent = numbers[i] ?? ''; });
  return pages.length;
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


HEARTBEAT_S = 20


@contextlib.contextmanager
def step(what: str):
    """Say that ``what`` starts, then every HEARTBEAT_S seconds that it is still going, then its time."""
    start = time.perf_counter()
    done = threading.Event()

    def beat():
        while not done.wait(HEARTBEAT_S):
            print(f"pdf: ... still {what} ({time.perf_counter() - start:.0f} s)", flush=True)

    print(f"pdf: {what}", flush=True)
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        print(f"pdf: {what}: done in {time.perf_counter() - start:.0f} s", flush=True)


def front_matter() -> str:
    """The title page's HTML: title, edition, authors, licence and address, from the one
    place each is written (_config.yml, attncore.__version__, CHANGELOG.md)."""
    import html
    import re

    sys.path.insert(0, str(ROOT / "scripts"))
    from notebook_header import package_version, pages_url

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    version = package_version()
    dated = re.search(rf"^## {re.escape(version)} - (\d{{4}}-\d{{2}}-\d{{2}})$",
                      (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    edition = f"Edition {version}" + (f", {dated.group(1)}" if dated else "")
    return (
        f'<div class="ap-title" role="heading" aria-level="1">{html.escape(config["title"])}</div>'
        '<p class="ap-subtitle">The mathematics of transformer attention, with executable proofs</p>'
        f"<p>{html.escape(config['author'])}</p>"
        f"<p>{html.escape(edition)}</p>"
        "<p>Text and figures CC BY 4.0, code MIT</p>"
        f"<p>{html.escape(pages_url())}</p>"
    )


def contents_pages(pdf: Path, entries: int) -> list[int | None]:
    """Where the first ``entries`` internal links of the PDF (the contents') land: 1-based pages."""
    from pypdf import PdfReader

    reader = PdfReader(str(pdf))
    named = reader.named_destinations
    numbers = []
    for page in reader.pages:
        # top to bottom, as the contents read (the file's order of annotations is not the page's)
        annots = [a.get_object() for a in page.get("/Annots") or []]
        annots.sort(key=lambda a: (-float(a["/Rect"][3]), float(a["/Rect"][0])) if "/Rect" in a else (0, 0))
        for annot in annots:
            if annot.get("/Subtype") != "/Link" or "/URI" in (annot.get("/A") or {}):
                continue
            dest = annot.get("/Dest") or (annot.get("/A") or {}).get("/D")
            if dest is None:
                continue
            if not isinstance(dest, list):  # a named destination
                dest = named.get(str(dest))
                target = dest.page if dest is not None else None
            else:
                target = dest[0]
            numbers.append(None if target is None else reader.get_page_number(target.get_object()) + 1)
            if len(numbers) == entries:
                return numbers
    return numbers


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
    with step("building every page as one HTML page (jupyter-book, singlehtml builder)"):
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
        with step("opening the page in chromium and typesetting its math (MathJax)"):
            page.goto(index.as_uri(), wait_until="load", timeout=300_000)
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                   timeout=120_000)
            status = page.evaluate(MATHJAX_DONE_JS)
        if status != "ok":
            raise SystemExit(f"math was not typeset: {status}")
        page.add_style_tag(content=PRINT_CSS)
        entries = page.evaluate(PREPARE_JS, front_matter())
        page.emulate_media(media="print")
        options = dict(
            path=str(target), format="A4", print_background=True, outline=True, tagged=True,
            display_header_footer=True,
            header_template="<span></span>",
            footer_template=(
                '<div style="font-size:8pt;width:100%;text-align:center;color:#555">'
                'Attention, Proved &middot; <span class="pageNumber"></span> / <span class="totalPages"></span></div>'
            ),
            margin={"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"},
        )
        with step("first print, to learn on which page each chapter starts"):
            page.pdf(**options)
            numbers = contents_pages(target, entries)
        if len(numbers) != entries or None in numbers or numbers != sorted(numbers):
            raise SystemExit(f"the contents' {entries} links landed on pages {numbers[:10]}...: cannot number them")
        page.evaluate(NUMBER_TOC_JS, numbers)
        with step(f"second print, with the page numbers in the contents ({entries} entries)"):
            page.pdf(**options)
        chapters = entries
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
