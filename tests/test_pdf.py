"""`make pdf`: the whole course in one PDF, read back as text.

The PDF is built once per session (scripts/build_pdf.py, into $BOOK_OUTPUT/_build/pdf;
the notebooks come from the execution cache the book build fills). Its pages are
converted to text with pypdf; the tests fail on raw TeX (math MathJax did not
typeset), on missing figures, on a missing chapter and on an implausibly small page count.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import notebook_header  # noqa: E402

# Building and reading back a 500-page PDF takes minutes: `make pdf` builds it and runs this
# module (ATTNCORE_PDF=built: the PDF is already there; ATTNCORE_PDF=1 builds it in the fixture);
# `make test` leaves it out so it stays a quick loop, and CI runs both.
pytestmark = [
    pytest.mark.book,
    pytest.mark.skipif(not os.environ.get("ATTNCORE_PDF"), reason="the PDF is built and checked by `make pdf`"),
]
OUTPUT = Path(os.environ.get("BOOK_OUTPUT", ROOT)).resolve()
PDF = OUTPUT / "_build" / "pdf" / "attention-proved.pdf"
# Math delimiters MathJax consumes when it typesets: any left in the text is untypeset math.
DELIMITERS = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$")
# TeX commands; code listings legitimately contain them (docstrings' :math:, matplotlib
# labels in strings), so they count only on a line that is not code.
TEX_COMMAND = re.compile(
    r"(?<!\\)\\(frac|sqrt|mathrm|mathbf|mathbb|operatorname|begin|end|sum|prod|top|cdot|"
    r"alpha|beta|theta|omega|lambda|infty|dots|ldots|le|ge|in|to)\b"
)
CODE_LINE = re.compile(r"[\"'=]|:math:|\.\. math|^\s{4}")


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    return files


def stored_figures() -> int:
    """PNG outputs stored in the notebooks, each of which must reach the PDF."""
    count = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            for output in cell.get("outputs", []):
                count += "image/png" in output.get("data", {})
    return count


@pytest.fixture(scope="module")
def pdf():
    if not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        message = "no chromium on this machine (apt-get install chromium); make pdf prints with it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    if os.environ.get("ATTNCORE_PDF") != "built" or not PDF.is_file():
        # `make pdf` builds the PDF first, printing its progress (ATTNCORE_PDF=built), then runs this
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_pdf.py")], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.returncode == 0, proc.stdout[-5000:]
        print(proc.stdout.strip().splitlines()[-1])
    from pypdf import PdfReader

    reader = PdfReader(str(PDF))
    pages = []
    for number, page in enumerate(reader.pages, start=1):
        pages.append(page.extract_text() or "")
        if number % 100 == 0:  # make pdf shows this (pytest -s): minutes on a busy machine
            print(f"pdf: read {number} of {len(reader.pages)} pages back as text", flush=True)
    images = sum(count_images(page) for page in reader.pages)
    return reader, pages, images


def count_images(page) -> int:
    """Image XObjects drawn on the page (read from its resources, not decoded)."""
    resources = page.get("/Resources")
    xobjects = resources.get_object().get("/XObject") if resources is not None else None
    if xobjects is None:
        return 0
    xobjects = xobjects.get_object()
    return sum(xobjects[name].get_object().get("/Subtype") == "/Image" for name in xobjects)


def test_pdf_has_plausibly_many_pages(pdf):
    _, pages, _ = pdf
    documents = len(toc_files())
    assert len(pages) >= 3 * documents, f"{len(pages)} pages for {documents} documents"
    assert sum(len(t) for t in pages) > 200_000, "too little text: pages are missing or blank"


def raw_tex(pages: list[str]) -> list[tuple[int, str]]:
    """(page number, line) for every line of the PDF's text that shows untypeset TeX."""
    found = []
    for number, text in enumerate(pages, start=1):
        for line in text.splitlines():
            if DELIMITERS.search(line) or (TEX_COMMAND.search(line) and not CODE_LINE.search(line)):
                found.append((number, line.strip()[:120]))
    return found


def test_raw_tex_detector():
    """The detector sees untypeset math in prose and leaves code listings alone."""
    assert raw_tex(["Notebook: why the scores are divided by \\sqrt{D}: the variance"])
    assert raw_tex(["where \\(x \\in \\mathbb{R}^n\\) is"]) and raw_tex(["$$a^2$$"])
    assert not raw_tex(['labels = {True: r"scores / $\\sqrt{D}$"}', "the variance of q·k is D"])


def test_pdf_math_is_typeset(pdf):
    _, pages, _ = pdf
    raw = raw_tex(pages)
    assert not raw, f"untypeset TeX in the PDF (page, line): {raw[:20]}"


def test_pdf_has_every_figure(pdf):
    _, _, images = pdf
    assert images >= stored_figures(), f"{images} images in the PDF, {stored_figures()} figures in the notebooks"


def chapter_titles() -> list[str]:
    """The first heading of every Markdown page of the book (chapters and appendices)."""
    titles = []
    for name in toc_files()[1:]:  # the root page is the title page, not a chapter
        path = ROOT / f"{name}.md"
        if path.is_file():
            heading = next((line for line in path.read_text().splitlines() if line.startswith("# ")), None)
            if heading and "$" not in heading:
                titles.append(heading[2:].replace("`", "").strip())
    return titles


def plain(text: str) -> str:
    """The PDF's text as the sources write it: NFKC undoes the typographic ligatures (the "fi" of
    "infinite"), and Sphinx's smart quotes (the "’" of "Transformer’s") become ASCII again."""
    return unicodedata.normalize("NFKC", text).translate(str.maketrans("‘’“”", "''\"\""))


def test_pdf_has_contents_and_every_chapter(pdf):
    reader, pages, _ = pdf
    squash = lambda text: re.sub(r"\s+", " ", plain(text)).lower()  # noqa: E731
    titles = chapter_titles()
    assert len(titles) >= 5, titles
    # the table of contents: one of the first pages lists every chapter and appendix
    contents = squash(" ".join(pages[:10]))  # the contents may run over several pages
    assert all(squash(t) in contents for t in titles), (
        f"no table of contents listing {[t for t in titles if squash(t) not in contents]} on the first pages"
    )
    assert reader.outline, "the PDF has no outline (bookmarks)"
    text = squash("\n".join(pages))
    missing = [t for t in titles if text.count(squash(t)) < 2]  # in the contents and as a heading
    assert not missing, f"chapters missing from the PDF: {missing}"


def test_pdf_opens_with_a_title_page(pdf):
    """Page 1 is the title page: the book's title, its edition (attncore's version) and authors."""
    _, pages, _ = pdf
    first = re.sub(r"\s+", " ", pages[0])
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    for expected in (config["title"], f"Edition {notebook_header.package_version()}", config["author"]):
        assert expected in first, f"{expected!r} not on page 1: {first[:300]!r}"


def test_pdf_contents_have_a_heading_and_true_page_numbers(pdf):
    """The contents say "Contents" and give each chapter's page, and the chapter is on that page;
    an entry whose heading holds math keeps it (the notebook 'divided by sqrt(d_k)')."""
    reader, pages, _ = pdf

    def squash(text):  # a heading wrapped after a hyphen joins again
        return re.sub(r"-\s+", "-", re.sub(r"\s+", " ", plain(text))).strip().lower()

    start = next(i for i, page in enumerate(pages[:4]) if squash(page).startswith("contents"))
    contents = squash(" ".join(pages[start:start + 8]))
    checked = 0
    for title in chapter_titles():
        found = re.search(re.escape(squash(title)) + r"\s*(\d+)\b", contents)
        assert found, f"no page number after {title!r} in the contents"
        number = int(found.group(1))
        assert start + 1 < number <= len(pages), (title, number)
        assert squash(title) in squash(pages[number - 1]), f"{title!r} is not on page {number}, as the contents say"
        checked += 1
    assert checked >= 5
    # MathJax draws its glyphs in Type 3 fonts, which pypdf's text leaves out ("divided by 56"):
    # an entry whose heading holds math must bring such a font to the contents' page
    fonts = reader.pages[start]["/Resources"].get_object().get("/Font") or {}
    subtypes = {font.get_object().get("/Subtype") for font in fonts.get_object().values()}
    assert "/Type3" in subtypes, f"no typeset math on the contents page (fonts {subtypes}): a heading lost its math"


def test_site_links_to_the_published_pdf():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    footer = config["html"]["extra_footer"]
    href = re.search(r'href="([^"]+)"', footer).group(1)
    assert href == notebook_header.pages_url() + PDF.name, href
