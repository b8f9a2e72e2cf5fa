"""What a reader of the website sees, checked on the built site.

Two kinds of checks over every HTML page of ``_build/html``:

* static (Python's html.parser, no browser): every internal link and anchor
  resolves, every image has alt text, no page loads a script, style, font or
  image from another host, and every chapter links to its notebooks and back;
* in a real browser (Debian's chromium driven by Playwright, against the site
  served on 127.0.0.1): no console errors, MathJax typesets without errors and
  leaves no raw TeX, every image loads, no request leaves 127.0.0.1, axe-core
  finds no violation of the WCAG 2 A/AA rules (axe-core is pinned in
  package.json; `make setup` installs it with npm), and the search finds the
  chapters.  Without a browser (or axe-core) these tests skip, except when the
  CI environment variable is set, where a missing browser is a failure.
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
from build_pdf import chromium_path  # noqa: E402  (the one place that finds the browser)
pytestmark = pytest.mark.book

# Chromium as root in a container, with no network beyond loopback.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
# Every WCAG 2.0, 2.1 and 2.2 success criterion of levels A and AA that axe-core checks.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
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


AXE_RUN_JS = """
async (tags) => {
  const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}});
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, count: v.nodes.length,
    targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ')),
  }));
}
"""


def axe_available() -> bool:
    if AXE.is_file():
        return True
    message = f"axe-core is not installed ({AXE.relative_to(ROOT)}); `make setup` installs it (npm ci)"
    if os.environ.get("CI"):
        pytest.fail(message + " and CI is set")
    pytest.skip(message)


def test_every_page_renders_cleanly_in_a_browser(site, server, browser):
    axe_available()
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
        page.add_script_tag(path=str(AXE))
        for v in page.evaluate(AXE_RUN_JS, AXE_TAGS):
            problems.append(f"{rel}: axe {v['id']} ({v['impact']}) on {v['count']} elements, e.g. {v['targets']}")
    context.close()
    assert checked == len(pages(site))
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
