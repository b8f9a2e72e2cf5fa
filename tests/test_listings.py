"""The code a reader sees is short enough to read against its equation.

Every ``literalinclude`` on a book page is resolved as Sphinx resolves it (``pyobject``, then
``start-at``/``start-after``, then ``end-before``/``end-at``, then ``lines``) and must show at most
20 non-blank lines; so must every fenced code block.  No attncore function has more than 60
lines of code (docstring, blank and comment-only lines excluded), ``attention`` at most 40.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "book" / "appendix").glob("*.md"))
MAX_LISTING, MAX_FUNCTION, MAX_ATTENTION = 20, 60, 40

DIRECTIVE = re.compile(r"^(`{3,}|:{3,})\{literalinclude\}\s+(\S+)\n((?::[\w-]+:.*\n)*)", re.M)
FENCE = re.compile(r"^(`{3,})(python|py|\{code-block\}[^\n]*|\{code\}[^\n]*)\n(.*?)^\1\s*$", re.M | re.S)


def pyobject_lines(source: str, name: str) -> list[str]:
    """The lines of the top-level object (or ``Class.method``) ``name``, from its ``def`` line."""
    tree = ast.parse(source)
    body, node = tree.body, None
    for part in name.split("."):
        node = next(n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
        body = node.body
    return source.splitlines()[node.lineno - 1 : node.end_lineno]


def parse_lines(spec: str, count: int) -> list[int]:
    """Sphinx's ``:lines:`` syntax (``1-3,5,8-``), 1-based, as 0-based indices."""
    picked = []
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        start = int(lo) if lo else 1
        stop = (int(hi) if hi else count) if "-" in part else start
        picked.extend(range(start - 1, stop))
    return picked


def resolve(page: Path, target: str, options: dict[str, str]) -> list[str]:
    """The lines a ``literalinclude`` shows, in the order of Sphinx's LiteralIncludeReader filters."""
    source = (page.parent / target).resolve().read_text(encoding="utf-8")
    lines = pyobject_lines(source, options["pyobject"]) if "pyobject" in options else source.splitlines()
    for key in ("start-at", "start-after"):
        if key in options:
            first = next(i for i, line in enumerate(lines) if options[key] in line)
            lines = lines[first if key == "start-at" else first + 1 :]
    for key in ("end-before", "end-at"):
        if key in options:
            last = next(i for i, line in enumerate(lines) if options[key] in line)
            lines = lines[: last if key == "end-before" else last + 1]
    if "lines" in options:
        lines = [lines[i] for i in parse_lines(options["lines"], len(lines)) if i < len(lines)]
    return lines


def listings(page: Path):
    """``(label, shown lines)`` of every literalinclude and fenced code block of a page."""
    text = page.read_text(encoding="utf-8")
    for match in DIRECTIVE.finditer(text):
        options = dict(re.findall(r"^:([\w-]+):\s*(.*)$", match.group(3), re.M))
        label = f"{match.group(2)} {options.get('pyobject', '')}".strip()
        try:
            yield label, resolve(page, match.group(2), options)
        except (OSError, StopIteration):  # a missing file, object or start/end string
            yield label, None
    for match in FENCE.finditer(text):
        yield f"code block at line {text[: match.start()].count(chr(10)) + 1}", match.group(3).splitlines()


CASES = [(page, label, lines) for page in PAGES for label, lines in listings(page)]


@pytest.mark.parametrize("page, label, lines", CASES, ids=[f"{p.name}:{label}" for p, label, _ in CASES])
def test_every_listing_shows_at_most_20_lines(page, label, lines):
    assert lines is not None, f"{page.name}: {label} does not resolve (file, pyobject, start or end string)"
    shown = [line for line in lines if line.strip()]
    assert 0 < len(shown) <= MAX_LISTING, f"{page.name}: {label} shows {len(shown)} lines:\n" + "\n".join(lines)


def test_the_resolver_follows_sphinx():
    """pyobject, then start-at, then end-before, then lines, on a known function."""
    page = ROOT / "book" / "index.md"
    options = {"pyobject": "softmax", "start-at": "z = as_float_array", "end-before": "return", "lines": "1-2"}
    got = resolve(page, "../attncore/_softmax.py", options)
    assert got[0].strip().startswith("z = as_float_array") and len(got) == 2
    assert parse_lines("1-3,5,7-", 8) == [0, 1, 2, 4, 6, 7]


def code_lines(node: ast.FunctionDef, source: list[str]) -> int:
    """Lines of a function's body after its docstring, without blank and comment-only lines."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return 0
    lines = source[body[0].lineno - 1 : node.end_lineno]
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))


def functions():
    for path in sorted((ROOT / "attncore").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{path.stem}.{node.name}", code_lines(node, source.splitlines())


def test_no_function_exceeds_60_lines_of_code():
    sizes = dict(functions())
    assert len(sizes) > 50
    too_long = {name: size for name, size in sizes.items() if size > MAX_FUNCTION}
    assert not too_long, too_long
    assert sizes["_attention.attention"] <= MAX_ATTENTION, sizes["_attention.attention"]


def test_the_line_count_sees_code_and_skips_docstrings():
    source = 'def f(x):\n    """Doc.\n\n    More.\n    """\n    # a comment\n    y = x\n\n    return y\n'
    node = ast.parse(source).body[0]
    assert code_lines(node, source.splitlines()) == 2
