"""The website builds with zero warnings, and what a reader sees, checked on the built site.

The book is built once per session (the fixture ``book_build``): strictly, its API page
linking to numpy, the evidence appendix showing the mutation results, the footer the
edition's year, the claims ledger's pages as the ledger says.  Then two kinds of checks
over every HTML page of ``_build/html``:

* static (Python's html.parser, no browser): every internal link and anchor
  resolves, every image has alt text, no page loads a script, style, font or
  image from another host, and every chapter links to its notebooks and back;
* in a real browser (Debian's chromium driven by Playwright, against the site
  served on 127.0.0.1): no console errors, MathJax typesets without errors and
  leaves no raw TeX, every image loads, no request leaves 127.0.0.1, axe-core
  finds no violation of the WCAG 2 A/AA rules (axe-core as shipped inside the
  PyPI package axe-playwright-python, pinned in requirements.txt), and the search
  finds the chapters.  Without a browser these tests skip, except when the CI
  environment variable is set, where a missing browser is a failure.
"""

from __future__ import annotations

import functools
import http.server
import os
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent

sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))  # the claims ledger extension, for the built ledger pages
from build_pdf import chromium_path  # noqa: E402  (the one place that finds the browser)
pytestmark = pytest.mark.book

# Chromium as root in a container, with no network beyond loopback.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# Every WCAG 2.0, 2.1 and 2.2 success criterion of levels A and AA that axe-core checks.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
AXE_OPTIONS = {"runOnly": {"type": "tag", "values": AXE_TAGS}, "resultTypes": ["violations"]}
SEARCH_EXPECTATIONS = {
    "permutation": "book/permutation_symmetry.html",
    "RoPE": "book/transformer_fundamentals.html",
}


# ---- the built site ----------------------------------------------------------

class PageParser(HTMLParser):
    """Collects ids, links and resources of one HTML page."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.resources, self.images = set(), [], [], []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "name" in a:
            self.ids.add(a["name"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "img":
            self.images.append(a)
            self.resources.append(a.get("src", ""))
        if tag == "script" and a.get("src"):
            self.resources.append(a["src"])
        if tag == "link" and a.get("rel") and set(a["rel"].split()) & {"stylesheet", "preload", "icon"}:
            self.resources.append(a.get("href", ""))
        if tag in ("source", "iframe", "embed") and a.get("src"):
            self.resources.append(a["src"])


def pages(html: Path) -> list[Path]:
    """Every HTML page a reader can reach (not Sphinx's copies of sources or assets)."""
    return sorted(
        p for p in html.rglob("*.html")
        if not p.relative_to(html).parts[0].startswith(("_static", "_sources", "_images"))
    )


@functools.lru_cache(maxsize=None)
def parse(path: Path) -> PageParser:
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def site(book_build):
    if book_build.returncode != 0:
        pytest.fail("the book did not build; see test_book_builds_without_warnings")
    return book_build.html


# ---- the build -----------------------------------------------------------------
# The session fixture ``book_build`` (tests/conftest.py) runs scripts/build_book.py, the same
# command as `make book`: jupyter-book with -W (warnings are errors), -n (every reference must
# resolve) and --keep-going, showing the notebooks' stored outputs (nbval checks them; the build
# does not execute the notebooks).

def test_book_builds_without_warnings(book_build):
    tail = "\n".join(book_build.output.splitlines()[-40:])
    assert book_build.returncode == 0, tail
    assert (book_build.html / "index.html").is_file()


def test_api_signatures_link_to_numpy(book_build):
    """The type hints of the API page link to numpy's documentation (book/_intersphinx/numpy.inv).

    Every signature of a public function that names a numpy type (``ArrayLike``,
    ``np.ndarray``, ``np.random.Generator``, ...) holds a link into
    https://numpy.org/doc/2.4/; the numpy names in the docstrings' prose
    (``:func:`numpy.einsum```) link there too.
    """
    import re

    import attncore

    assert book_build.returncode == 0
    page = "\n".join(p.read_text() for p in sorted((book_build.html / "book" / "appendix").glob("api*.html")))
    signatures = dict(re.findall(r'<dt class="sig sig-object py" id="attncore\.(\w+)">(.*?)</dt>', page, re.S))
    numpy_typed = [
        name for name in attncore.__all__
        if callable(getattr(attncore, name)) and re.search(
            r"\b(ArrayLike|DTypeLike|np\.)", " ".join(map(str, getattr(attncore, name).__annotations__.values())))
    ]
    assert len(numpy_typed) >= 45
    unlinked = [name for name in numpy_typed if "https://numpy.org/doc/2.4/" not in signatures.get(name, "")]
    assert not unlinked, f"signatures without a numpy link: {unlinked}"
    for target in ("reference/generated/numpy.einsum.html#numpy.einsum",
                   "reference/typing.html#numpy.typing.ArrayLike",
                   "reference/random/generator.html#numpy.random.Generator"):
        assert f'href="https://numpy.org/doc/2.4/{target}"' in page, target


def test_evidence_page_shows_the_mutation_results(book_build):
    """The appendix "How strong is the evidence" renders bench/mutation.json (the directive
    mutation-results): the score, the table of modules, not a code block holding the directive (a
    stray code fence left over from an edit once swallowed the whole Results section)."""
    import json
    import re
    from pathlib import Path

    assert book_build.returncode == 0
    page = (book_build.html / "book" / "appendix" / "evidence_strength.html").read_text()
    assert "{mutation-results}" not in page and "mutation-results" not in page
    results = json.loads((Path(__file__).resolve().parent.parent / "bench" / "mutation.json").read_text())
    assert re.search(r"<strong>Score: [\d.]+%</strong>", page)
    rows = re.findall(r"<td[^>]*><p><code[^>]*><span class=\"pre\">(_\w+)</span></code>", page)
    assert set(results["modules"]) <= set(rows), sorted(set(results["modules"]) - set(rows))


def test_footer_shows_the_editions_copyright_year(book_build):
    """Sphinx replaces the copyright year by SOURCE_DATE_EPOCH's (the Makefile fixes it for
    reproducible files): the footer must show _config.yml's year, not 1970 (epoch 0)."""
    import re
    from pathlib import Path

    import yaml

    assert book_build.returncode == 0
    year = str(yaml.safe_load((Path(__file__).parent.parent / "_config.yml").read_text())["copyright"])
    footer = re.search(r"(?:©|&copy;|&#169;)\s*Copyright\s*(\d{4})", (book_build.html / "book" / "index.html").read_text())
    assert footer, "no copyright line in the footer of book/index.html"
    assert footer.group(1) == year, f"the footer says {footer.group(1)}, _config.yml says {year}"


# ---- static checks of every page -----------------------------------------------

def is_external(url: str) -> bool:
    return bool(urlparse(url).scheme in ("http", "https") or url.startswith("//"))


def test_every_internal_link_and_anchor_resolves(site):
    """Every link between the site's own pages reaches an existing file and anchor.

    Kept by hand rather than run through a link checker (LinkChecker, lychee): the check is
    offline and internal only (the site must work from a file:// copy), anchors are the point
    (Sphinx renames them silently), and it reads the pages this module parses anyway, in
    fifteen lines; external links are left to the reader's browser, as no CI here has network.
    """
    broken = []
    for page in pages(site):
        for href in parse(page).links:
            if is_external(href) or href.startswith(("mailto:", "javascript:")):
                continue
            target, anchor = urldefrag(urljoin(page.as_uri(), href))
            path = Path(unquote(urlparse(target).path))
            if path.is_dir():
                path = path / "index.html"
            if not path.exists():
                broken.append(f"{page.relative_to(site)}: {href} (no such file)")
            elif anchor and path.suffix == ".html" and unquote(anchor) not in parse(path).ids:
                broken.append(f"{page.relative_to(site)}: {href} (no such anchor)")
    assert not broken, "\n".join(broken[:50])


def test_no_page_loads_anything_from_another_host(site):
    offenders = [
        f"{page.relative_to(site)}: {src}"
        for page in pages(site) for src in parse(page).resources if is_external(src)
    ]
    assert not offenders, "\n".join(offenders[:50])


MAX_PAGE_BYTES = 400_000


def test_no_page_is_heavier_than_400_kb(site):
    """A page a reader opens loads in reasonable time on a slow connection: no HTML page above
    400 KB (the API reference is split by topic to stay below)."""
    heavy = {str(page.relative_to(site)): page.stat().st_size for page in pages(site)
             if page.stat().st_size > MAX_PAGE_BYTES}
    assert not heavy, heavy


def test_every_image_has_alt_text(site):
    missing = [
        f"{page.relative_to(site)}: {img.get('src')}"
        for page in pages(site) for img in parse(page).images if not (img.get("alt") or "").strip()
    ]
    assert not missing, "\n".join(missing)


def toc_chapters():
    """(chapter, [notebooks]) for every chapter of _toc.yml that has notebook sections."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    for part in toc["parts"]:
        for chapter in part["chapters"]:
            notebooks = [s["file"] for s in chapter.get("sections", []) if s["file"].startswith("notebooks/")]
            if notebooks:
                yield chapter["file"], notebooks


def test_chapters_and_notebooks_link_both_ways(site):
    missing = []
    for chapter, notebooks in toc_chapters():
        for nb in notebooks:
            # Links inside the page's content: the navigation sidebar links everything,
            # so look for a link in the article body only.
            if not links_to_in_article(site, chapter, nb):
                missing.append(f"{chapter} does not link to {nb}")
            if not links_to_in_article(site, nb, chapter):
                missing.append(f"{nb} does not link back to {chapter}")
    assert not missing, "\n".join(missing)


class ArticleLinks(HTMLParser):
    """The links inside <article>, where the page's own content is."""

    def __init__(self):
        super().__init__()
        self.depth, self.links = 0, []

    def handle_starttag(self, tag, attrs):
        if tag == "article":
            self.depth += 1
        elif tag == "a" and self.depth and dict(attrs).get("href"):
            self.links.append(dict(attrs)["href"])

    def handle_endtag(self, tag):
        if tag == "article":
            self.depth -= 1


def links_to_in_article(site: Path, page: str, target: str) -> bool:
    source = site / f"{page}.html"
    parser = ArticleLinks()
    parser.feed(source.read_text(encoding="utf-8"))
    wanted = site / f"{target}.html"
    return any(
        Path(unquote(urlparse(urldefrag(urljoin(source.as_uri(), href))[0]).path)) == wanted
        for href in parser.links if not is_external(href)
    )



# ---- the claims ledger as built ---------------------------------------------------


def test_built_pages_name_no_source_file(site):
    """Readers never see the file names of the source documents' copies."""
    from ledger_checks import SOURCE_FILE

    found = [f"{p.relative_to(site)}: {m.group(0)}" for p in site.rglob("*.html")
             for m in SOURCE_FILE.finditer(p.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_built_errata_page_lists_every_row(site):
    """Every correction of the ledger is on the errata page, linked to its row."""
    import re

    from ledger_checks import errata_rows, errata_source, load_ledger

    rows = errata_rows(load_ledger(ROOT))
    text = (site / "book" / "appendix" / "errata.html").read_text(encoding="utf-8")
    linked = set(re.findall(r'href="claims_\w+\.html#claim-([\w-]+)"', text))
    missing = [c["id"] for c in rows if c["id"] not in linked]
    assert not missing, missing
    sources = {errata_source(c) for c in rows}
    assert f"{len(rows)} corrections from {len(sources)} sources" in text

# ---- in a real browser ---------------------------------------------------------

def is_redirect(path: Path) -> bool:
    return 'http-equiv="Refresh"' in path.read_text(encoding="utf-8")[:2000]


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    executable = chromium_path()
    if executable is None:
        message = "no chromium on this machine (apt-get install chromium); the browser checks need it"
        if os.environ.get("CI"):
            pytest.fail(message + " and CI is set")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield b
        b.close()


# Runs in the page once MathJax has finished: what a reader would see go wrong.
PAGE_REPORT_JS = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  // The whole page, navigation included: a title with math shows up raw in the sidebars.
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => n.parentElement.closest('pre, code, script, style, mjx-container, .MathJax')
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const raw = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent;
    if (/\\$\\$|\\\\\\(|\\\\\\)|\\\\\\[|\\\\\\]|\\\\begin\\{|\\\\frac|\\\\mathrm/.test(t)) raw.push(t.trim().slice(0, 80));
  }
  const images = Array.from(document.images).map((img) => ({
    src: img.getAttribute('src'), ok: img.complete && img.naturalWidth > 0, alt: img.alt,
  }));
  return {
    mathjax: !!window.MathJax,
    math: document.querySelectorAll('mjx-container').length,
    merror: document.querySelectorAll('mjx-merror, .MathJax_Error').length,
    raw: raw,
    images: images,
  };
}
"""


def axe_violations(page, context=None) -> list[str]:
    """axe-core's WCAG 2 A/AA violations in the open page (or the part ``context`` selects), one
    line each (axe-playwright-python injects the axe-core it ships and runs it with AXE_OPTIONS)."""
    from axe_playwright_python.sync_playwright import Axe

    result = Axe().run(page, options=AXE_OPTIONS) if context is None else Axe().run(page, context=context, options=AXE_OPTIONS)
    return [
        f"axe {v['id']} ({v['impact']}) on {len(v['nodes'])} elements, "
        f"e.g. {[' '.join(map(str, n['target'])) for n in v['nodes'][:3]]}"
        for v in result.response["violations"]
    ]


# Code cells are styled by one theme on every notebook page, and axe's colour-contrast rule over
# their highlighted tokens is most of its time (12 s of a 12 s check of notebook 3b, 3.5 s
# without them). The first page with code cells is checked whole; the others without their cells,
# whose images, math and errors PAGE_REPORT_JS still checks on every page.
WITHOUT_CELLS = {"exclude": [[".cell"]]}


def test_the_accessibility_check_finds_violations(browser):
    """The axe check is evidence only if it can fail: a page with an image without alt text,
    an unlabelled button and no lang attribute gives one violation of each rule."""
    page = browser.new_page()
    page.set_content('<html><head><title>t</title></head><body><main>'
                     '<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw="><button></button></main></body></html>')
    found = " ".join(axe_violations(page))
    page.close()
    for rule in ("image-alt", "button-name", "html-has-lang"):
        assert f"axe {rule} " in found, found


def test_every_page_renders_cleanly_in_a_browser(site, server, browser):
    context = browser.new_context()
    leaving, problems, checked = [], [], 0

    def route(r):
        host = urlparse(r.request.url).hostname
        if host in ("127.0.0.1", None) or r.request.url.startswith("data:"):
            r.continue_()
        else:
            leaving.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    cells_checked_whole = None  # the first page with code cells
    for path in pages(site):
        rel = path.relative_to(site).as_posix()
        errors.clear()
        page.goto(server + rel, wait_until="load")
        if is_redirect(path):  # the root index.html forwards to book/index.html
            page.wait_for_url(lambda url, rel=rel: url != server + rel)
            page.wait_for_load_state("load")
        report = page.evaluate(PAGE_REPORT_JS)
        checked += 1
        if errors:
            problems.append(f"{rel}: console errors {errors[:3]}")
        if report["merror"]:
            problems.append(f"{rel}: {report['merror']} MathJax errors")
        if report["raw"]:
            problems.append(f"{rel}: raw TeX left in text: {report['raw'][:3]}")
        for img in report["images"]:
            if not img["ok"]:
                problems.append(f"{rel}: image did not load: {img['src']}")
            if not (img["alt"] or "").strip():
                problems.append(f"{rel}: image without alt text: {img['src']}")
        has_cells = page.locator(".cell").count() > 0
        whole = has_cells and cells_checked_whole is None
        cells_checked_whole = rel if whole else cells_checked_whole
        problems.extend(f"{rel}: {v}" for v in axe_violations(page, WITHOUT_CELLS if has_cells and not whole else None))
    context.close()
    assert checked == len(pages(site))
    assert cells_checked_whole, "no page with code cells was checked whole"
    assert not leaving, f"requests left 127.0.0.1: {sorted(set(leaving))[:10]}"
    assert not problems, "\n".join(problems[:50])


def test_math_is_typeset_by_the_local_mathjax(site, server, browser):
    page = browser.new_page()
    page.goto(server + "book/how_this_book_proves.html", wait_until="load")
    report = page.evaluate(PAGE_REPORT_JS)
    src = page.evaluate("() => Array.from(document.scripts).map(s => s.src).filter(s => /mathjax/i.test(s))")
    page.close()
    assert report["mathjax"] and report["math"] > 5
    assert src and all(s.startswith(server) for s in src)


@pytest.mark.parametrize("term", sorted(SEARCH_EXPECTATIONS))
def test_search_finds_the_chapter(site, server, browser, term):
    expected = SEARCH_EXPECTATIONS[term]
    if not (site / expected).exists():
        pytest.skip(f"{expected} is not written yet")
    page = browser.new_page()
    page.goto(server + f"search.html?q={term}", wait_until="load")
    page.wait_for_function("() => document.querySelectorAll('#search-results li, ul.search li').length > 0", timeout=20000)
    hits = page.evaluate("() => Array.from(document.querySelectorAll('#search-results li a, ul.search li a')).map(a => a.href)")
    page.close()
    assert any(expected in h for h in hits), hits[:10]


def test_screenshots_for_review(site, server, browser):
    """Landing page and a chapter page, saved under _build/screenshots (not committed)."""
    out = site.parent / "screenshots"
    out.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    for name, rel in [("landing", "book/index.html"), ("chapter", "book/how_this_book_proves.html")]:
        page.goto(server + rel, wait_until="load")
        page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
        page.screenshot(path=str(out / f"{name}.png"), full_page=False)
        assert (out / f"{name}.png").stat().st_size > 10_000
    page.close()
