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
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import notebook_header  # noqa: E402

pytestmark = pytest.mark.book
OUTPUT = Path(os.environ.get("BOOK_OUTPUT", ROOT)).resolve()
PDF = OUTPUT / "_build" / "pdf" / "attention-proved.pdf"
RAW_TEX = re.compile(r"\\(frac|sqrt|mathrm|mathbf|begin|end|sum|top|cdot|left|right)\b|\$\$|\\\(|\\\[")


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
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_pdf.py")], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-5000:]
    print(proc.stdout.strip().splitlines()[-1])
    from pypdf import PdfReader

    reader = PdfReader(str(PDF))
    pages = [page.extract_text() or "" for page in reader.pages]
    images = sum(len(page.images) for page in reader.pages)
    return reader, pages, images


def test_pdf_has_plausibly_many_pages(pdf):
    _, pages, _ = pdf
    documents = len(toc_files())
    assert len(pages) >= 3 * documents, f"{len(pages)} pages for {documents} documents"
    assert sum(len(t) for t in pages) > 200_000, "too little text: pages are missing or blank"


def test_pdf_math_is_typeset(pdf):
    _, pages, _ = pdf
    raw = [(i + 1, m.group(0)) for i, text in enumerate(pages) for m in RAW_TEX.finditer(text)]
    # code cells legitimately print sympy's LaTeX only through display(Math(...)), which
    # MathJax typesets; any raw TeX left in the text is math that was not typeset
    assert not raw, f"raw TeX on pages (page, text): {raw[:20]}"


def test_pdf_has_every_figure(pdf):
    _, _, images = pdf
    assert images >= stored_figures(), f"{images} images in the PDF, {stored_figures()} figures in the notebooks"


def test_pdf_has_contents_and_every_chapter(pdf):
    reader, pages, _ = pdf
    text = "\n".join(pages)
    assert "Contents" in pages[0] + pages[1] + pages[2]
    assert reader.outline, "the PDF has no outline (bookmarks)"
    for title in ["Claims ledger", "Transformer fundamentals", "Synthesizer"]:
        assert title.lower() in text.lower(), f"{title!r} is not in the PDF"


def test_site_links_to_the_published_pdf():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    footer = config["html"]["extra_footer"]
    href = re.search(r'href="([^"]+)"', footer).group(1)
    assert href == notebook_header.pages_url() + PDF.name, href
