"""The claims ledger's checks: load ``book/claims.yml`` and list what is wrong with it.

The ledger is the course's promise made mechanical.  Every claim the course
makes (or refutes) is an entry with a verdict and the evidence that backs it:

* ``proved``: a symbolic proof runs for symbolic sizes: at least one evidence
  cell carries the extra tag ``symbolic``, uses sympy, declares an integer size
  symbol and asserts the general statement;
* ``checked``: numeric evidence; the entry names in ``catches`` the wrong
  variant or false statement that the evidence rejects;
* ``qualified``: true only under a hypothesis the source left out; the entry
  carries the ``hypothesis``;
* ``refuted``: wrong; a counterexample runs and the entry carries the
  ``correction``;
* ``cited``: a published result we cannot rerun here; the entry carries a
  ``reference`` (a key of ``book/references.bib``) and a ``locator`` (the
  table, section or sentence of that work it rests on).

A row of any verdict may carry ``corrects:``, a mapping with ``slip`` (what the
source writes) and ``fix`` (what is right instead): a typo, a garbled formula,
a misattribution, a reused letter.  When the row's ``source`` is a published
work and the slip is a source document's, ``of`` names that document; the
errata page lists the row under it.  The errata page lists every ``refuted`` and
``qualified`` row and every row with ``corrects:`` (:func:`errata_rows`), so a
correction made under a ``checked``, ``proved`` or ``cited`` row is listed too;
:func:`unmarked_corrections` finds rows whose text describes a slip of the
source but that carry no ``corrects:``, and :func:`overcorrections` the listed rows whose note
says the source is right in its own setting.

Evidence items are either ``notebooks/<file>.ipynb#<cell-tag>`` (a tagged cell
of a notebook, executed by nbval and by the book build) or a pytest node id
``tests/<file>.py::<test>``.  Every tagged notebook cell named as evidence must
assert what it shows: its syntax tree (IPython magics and shell lines removed)
holds at least one ``assert`` and no assert that cannot fail (a constant, a
comparison of an expression with itself, ``np.allclose(a, a)`` and the like).

:func:`ledger_problems` lists everything wrong with the ledger; the test suite
requires that list to be empty.  The book build refuses to render a ledger with
structural problems (missing keys or evidence); evidence-strength problems
(:func:`strength_problems`) are enforced by the test suite.

This module holds no Sphinx code: the tests import it as it is, and the
extension ``claims_ledger`` renders what it loads.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path

import yaml

VERDICTS = ("proved", "checked", "qualified", "refuted", "cited")
REQUIRED = ("id", "source", "claim", "verdict", "evidence")
OPTIONAL = ("correction", "hypothesis", "catches", "reference", "locator", "note", "corrects")
ERRATA_VERDICTS = ("refuted", "qualified")
# The structure of one claim, checked with jsonschema (types and the shape of ``corrects:``);
# missing and unknown keys, verdict fields and evidence are checked by hand below, with
# messages that name the claim.
_TEXT = {"type": "string", "minLength": 1, "pattern": r"\S"}
CLAIM_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "source": {"type": "string"},
        "claim": _TEXT,
        "verdict": {"enum": list(VERDICTS)},
        "evidence": {"type": ["array", "null"], "items": {"type": "string"}},
        **{key: _TEXT for key in ("correction", "hypothesis", "catches", "reference", "locator", "note")},
        "corrects": {
            "type": "object",
            "required": ["slip", "fix"],
            "additionalProperties": False,
            "properties": {"slip": _TEXT, "fix": _TEXT, "of": {"type": "string"}},
        },
    },
}
# Words with which a row's text says that the source got something wrong: such a row
# must be on the errata page, so it is refuted or qualified or carries ``corrects:``.
CORRECTION_WORDS = re.compile(
    r"\b(typo|misprint|slip|garbl(?:e|es|ed|ing)|misattribut\w*|misstat\w*|misquot\w*|overstat\w*|"
    r"the wrong way round|should (?:be|read)|"
    r"(?:the )?(?:post|notes|document|article|paper|source)(?:'s)? (?:writes?|wrote|calls?|credits?)|"
    r"(?:is|are) (?:wrong|false|swapped|exchanged)|it is the identity|the opposite of the notes|"
    r"(?:corrects|beyond) the reach of)\b",
    re.I,
)
# Words with which a row says that the source is right in its own setting: such a row
# states where that setting ends and is not an erratum (refuted, qualified or ``corrects:``).
# Besides "right", the ways of granting it: "correct as a layer", "a notation convention",
# "the hypothesis its own notation implies", "the post's value is the right one".
RIGHT_WORDS = re.compile(
    r"\b(right in (?:its|their) own setting|"
    r"(?:the )?(?:post|notes|document|article|source)"
    r"(?:'s (?:statement|claim|bound|sentence|words|value|formula|result|reading))? "
    r"(?:is|are) right(?! only)|(?:states?|says?) (?:it|this|so) correctly|"
    r"correct as (?:a|an|written|stated|it stands)|"
    r"(?:a|an|merely a|only a|just a) (?:notation(?:al)?|naming) convention|"
    r"(?:its|their) own notation (?:implies|presupposes)|"
    r"(?:is|are) the right (?:one|ones|value|answer))\b",
    re.I,
)
# the fields of a listed row in which such words are looked for
RIGHT_FIELDS = ("note", "hypothesis", "corrects.slip", "corrects.fix")
# Words about how the book was made, which have no place in a row a reader sees.
PROCESS_WORDS = re.compile(
    r"\b(regraded|re-checked|earlier version|an earlier \d+-draw|issue \d+|mirrored|after review|kept as|review pass|"
    r"proof-read|this row (?:said|was)|the course mirrors|helper|reviewer)\b",
    re.I,
)
# The file names of the source documents: readers cannot open them, the book cites the public origin.
SOURCE_FILE = re.compile(r"\d{3}_[0-9a-f]{16}(?:\.txt)?")
# the field each verdict requires, and what the problem message calls it
VERDICT_FIELDS = {
    "checked": ("catches", "needs 'catches:', the wrong variant or false statement its evidence rejects"),
    "qualified": ("hypothesis", "needs 'hypothesis:', the hypothesis the source left out"),
    "refuted": ("correction", "needs its correction"),
    "cited": ("locator", "needs 'locator:', the table, section or sentence of the reference it rests on"),
}
SYMBOLIC_TAG = "symbolic"
# calls that compare their first two arguments
COMPARING_CALLS = {
    "allclose", "isclose", "array_equal", "array_equiv", "equal",
    "assert_allclose", "assert_array_equal", "assert_array_almost_equal", "assert_equal",
}
ID_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
LEDGER = Path("book") / "claims.yml"
BIBFILE = Path("book") / "references.bib"


# ---- loading and checking ---------------------------------------------------

def load_ledger(root: Path) -> dict:
    """Read ``book/claims.yml`` below ``root``: ``{"sources": {...}, "claims": [...]}``."""
    with open(Path(root) / LEDGER, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def bib_keys(root: Path) -> set[str]:
    """The citation keys defined in ``book/references.bib``, read by pybtex (the parser
    sphinxcontrib-bibtex itself uses, so the ledger and the bibliography agree on the keys)."""
    from pybtex.database import parse_file

    return set(parse_file(str(Path(root) / BIBFILE), bib_format="bibtex").entries.keys())


@functools.lru_cache(maxsize=256)
def _read_json(path: Path, stamp: tuple[int, int]) -> dict:
    """The notebook at ``path`` as parsed JSON; ``stamp`` (mtime, size) makes an edited file a new key.
    The checks read every notebook many times, and this cache makes them several times faster."""
    return json.loads(path.read_text(encoding="utf-8"))


def read_notebook(path: Path) -> dict:
    """The notebook at ``path`` as parsed JSON (cached while the file is unchanged; do not modify it)."""
    stat = Path(path).stat()
    return _read_json(Path(path).resolve(), (stat.st_mtime_ns, stat.st_size))


def notebook_tags(path: Path) -> set[str]:
    """Every cell tag used in the notebook at ``path``."""
    nb = read_notebook(path)
    return {tag for cell in nb.get("cells", []) for tag in cell.get("metadata", {}).get("tags", [])}


# ---- what a tagged cell proves ------------------------------------------------

def notebook_cells(path: Path) -> list[dict]:
    """The cells of the notebook at ``path``, each with its source as one string."""
    nb = read_notebook(path)
    cells = []
    for cell in nb.get("cells", []):
        source = cell.get("source", "")
        cells.append({**cell, "source": "".join(source) if isinstance(source, list) else source})
    return cells


def python_source(source: str) -> str:
    """A cell's source with IPython-only lines (``%magic``, ``%%cell``, ``!shell``) made ``pass``."""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            line = line[: len(line) - len(stripped)] + "pass"
        lines.append(line)
    return "\n".join(lines)


@functools.lru_cache(maxsize=4096)
def parse_cell(source: str) -> ast.Module | None:
    """The syntax tree of a code cell, or None when it is not Python (cached: do not modify it)."""
    try:
        return ast.parse(python_source(source))
    except SyntaxError:
        return None


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a, annotate_fields=False) == ast.dump(b, annotate_fields=False)


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def tautology(test: ast.AST) -> str | None:
    """Why the assert condition ``test`` cannot fail, or None when it can.

    Caught: a constant or a literal that is always true (``True``, ``1``, a
    non-empty tuple such as ``(x, "message")``, an f-string); a comparison
    of an expression with itself (``a == a``, ``x <= x``); a comparing call with
    identical arguments (``np.allclose(a, a)``, ``np.array_equal(b, b)``);
    ``all``/``any``/``np.all`` of such a thing; ``and`` of tautologies, ``or``
    with one; ``not`` of a false constant.
    """
    if isinstance(test, ast.Constant):
        return f"asserts the constant {test.value!r}" if test.value else None
    if isinstance(test, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
        items = test.keys if isinstance(test, ast.Dict) else test.elts
        return "asserts a non-empty literal, which is always true" if items else None
    if isinstance(test, (ast.JoinedStr, ast.Lambda)):
        return "asserts a string or function, which is always true"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = test.operand
        if isinstance(inner, ast.Constant) and not inner.value:
            return f"asserts not {inner.value!r}"
        return None
    if isinstance(test, ast.BoolOp):
        reasons = [tautology(v) for v in test.values]
        if isinstance(test.op, ast.And) and all(reasons):
            return reasons[0]
        if isinstance(test.op, ast.Or) and any(reasons):
            return next(r for r in reasons if r)
        return None
    if isinstance(test, ast.Compare):
        operands = [test.left, *test.comparators]
        for op, a, b in zip(test.ops, operands, operands[1:]):
            if _same(a, b) and not isinstance(op, (ast.NotEq, ast.Lt, ast.Gt, ast.IsNot, ast.NotIn)):
                return f"compares {ast.unparse(a)} with itself"
        return None
    name = _call_name(test)
    if name in COMPARING_CALLS and len(test.args) >= 2 and _same(test.args[0], test.args[1]):
        return f"{name} of {ast.unparse(test.args[0])} with itself"
    if name in ("all", "any", "bool") and len(test.args) == 1 and not test.keywords:
        return tautology(test.args[0])
    return None


def assert_problems(source: str) -> list[str]:
    """Why a code cell is no check: it does not parse, has no assert, or asserts a tautology."""
    tree = parse_cell(source)
    if tree is None:
        return ["does not parse as Python"]
    asserts = [node for node in ast.walk(tree) if isinstance(node, ast.Assert)]
    if not asserts:
        return ["has no assert (a printed False would not fail)"]
    problems = []
    for node in asserts:
        reason = tautology(node.test)
        if reason:
            problems.append(f"has an assert that cannot fail, line {node.lineno}: {reason}")
    return problems


@functools.lru_cache(maxsize=4096)  # the trees come from parse_cell's cache: one walk per cell
def _sympy_names(tree: ast.AST) -> frozenset[str]:
    """Names bound to the sympy module or to things imported from it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sympy" or alias.name.startswith("sympy."):
                    names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sympy":
            names.update(alias.asname or alias.name for alias in node.names)
    return frozenset(names)


@functools.lru_cache(maxsize=4096)  # the trees come from parse_cell's cache: one walk per cell
def _integer_symbols(tree: ast.AST) -> tuple[bool, frozenset[str]]:
    """Whether the code creates a sympy symbol declared integer, and the names it binds them to."""
    found, names = False, set()

    def declares_integer(call):
        return (
            _call_name(call) in ("Symbol", "symbols", "Dummy", "Idx", "var")
            and any(
                kw.arg == "integer" and isinstance(kw.value, ast.Constant) and kw.value.value is True
                for kw in call.keywords
            )
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and declares_integer(node):
            found = True
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            value = node.value
            if not any(isinstance(n, ast.Call) and declares_integer(n) for n in ast.walk(value or ast.Pass())):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
    return found, frozenset(names)


def symbolic_problem(cells: list[dict], index: int) -> str | None:
    """Why code cell ``index`` is no symbolic proof, or None when it is one.

    A symbolic proof uses sympy and works with a size symbol declared integer
    (``sp.Symbol("n", integer=True, positive=True)``, ``symbols(..., integer=True)``),
    created in the cell itself or in an earlier cell of the same notebook and used
    in this one, and it asserts (non-tautologically) what it proves.
    """
    tree = parse_cell(cells[index]["source"])
    if tree is None:
        return "does not parse as Python"
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    sympy_names, earlier_symbols, own = set(), set(), _integer_symbols(tree)
    for cell in cells[: index + 1]:
        if cell.get("cell_type") != "code":
            continue
        other = parse_cell(cell["source"])
        if other is None:
            continue
        sympy_names |= _sympy_names(other)
        if cell is not cells[index]:
            earlier_symbols |= _integer_symbols(other)[1]
    if not (used & sympy_names):
        return "does not use sympy"
    if not (own[0] or used & earlier_symbols):
        return "uses no size symbol declared integer (sympy Symbol/symbols with integer=True)"
    problems = assert_problems(cells[index]["source"])
    return problems[0] if problems else None


def tagged_cells(path: Path, tag: str) -> list[tuple[int, dict]]:
    """The ``(index, cell)`` pairs of the cells tagged ``tag`` in the notebook at ``path``."""
    cells = notebook_cells(path)
    return [(i, c) for i, c in enumerate(cells) if tag in c.get("metadata", {}).get("tags", [])]


def strength_problems(root: Path, entry: dict) -> list[str]:
    """Why the evidence of one ledger entry could not fail, or is no general proof.

    Every tagged cell named as evidence must assert (see :func:`assert_problems`);
    a ``proved`` entry must name at least one cell tagged ``symbolic`` that passes
    :func:`symbolic_problem`.  Items that do not exist are reported by
    :func:`evidence_problem`, not here.
    """
    root = Path(root)
    problems, symbolic_ok, symbolic_seen = [], False, []
    for item in entry.get("evidence") or []:
        if not isinstance(item, str) or "::" in item or "#" not in item:
            continue
        file, _, tag = item.partition("#")
        path = root / file
        if not path.is_file():
            continue
        cells = notebook_cells(path)
        for index, cell in enumerate(cells):
            tags = cell.get("metadata", {}).get("tags", [])
            if tag not in tags or cell.get("cell_type") != "code":
                continue
            for problem in assert_problems(cell["source"]):
                problems.append(f"evidence cell {item} {problem}")
            if SYMBOLIC_TAG in tags:
                symbolic_seen.append(item)
                problem = symbolic_problem(cells, index)
                if problem:
                    problems.append(f"symbolic cell {item} {problem}")
                else:
                    symbolic_ok = True
    if entry.get("verdict") == "proved" and not symbolic_ok:
        if symbolic_seen:
            problems.append("a proved claim needs a valid symbolic proof cell (see above)")
        else:
            problems.append(
                f"a proved claim needs an evidence cell tagged {SYMBOLIC_TAG!r}: "
                "sympy over a size symbol declared integer, with an assert"
            )
    return problems


def pytest_names(path: Path) -> frozenset[str]:
    """Test functions and ``Class::method`` names defined at the top of a test file."""
    stat = Path(path).stat()
    return _pytest_names(Path(path).resolve(), (stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=256)
def _pytest_names(path: Path, stamp: tuple[int, int]) -> frozenset[str]:
    """:func:`pytest_names` of the file at ``path`` as it is at ``stamp`` (mtime, size)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            names.update(
                f"{node.name}::{item.name}" for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            )
    return frozenset(names)


def evidence_problem(root: Path, item: str) -> str | None:
    """Why the evidence ``item`` does not exist, or None when it does."""
    if not isinstance(item, str):
        return f"evidence must be a string, got {item!r}"
    if "::" in item:
        file, _, node = item.partition("::")
        path = Path(root) / file
        if not (file.startswith("tests/") and file.endswith(".py")):
            return f"pytest evidence must name a file under tests/: {item}"
        if not path.is_file():
            return f"no such test file: {file}"
        name = node.split("[", 1)[0]  # a parametrised id keeps the function name
        if name not in pytest_names(path):
            return f"no test {name!r} in {file}"
        return None
    if "#" in item:
        file, _, tag = item.partition("#")
        path = Path(root) / file
        if not (file.startswith("notebooks/") and file.endswith(".ipynb")):
            return f"notebook evidence must name a notebook under notebooks/: {item}"
        if not path.is_file():
            return f"no such notebook: {file}"
        if tag not in notebook_tags(path):
            return f"no cell tagged {tag!r} in {file}"
        return None
    return f"evidence must be 'notebooks/<nb>.ipynb#<tag>' or 'tests/<file>.py::<test>': {item}"


def ledger_problems(root: Path, ledger: dict | None = None, strength: bool = True) -> list[str]:
    """Everything wrong with the ledger below ``root``; an empty list means sound.

    With ``strength=False`` only the structure is checked (keys, verdict fields,
    that every piece of evidence exists), not :func:`strength_problems`.
    """
    root = Path(root)
    ledger = load_ledger(root) if ledger is None else ledger
    problems = []
    if not isinstance(ledger, dict) or set(ledger) != {"sources", "claims"}:
        return ["claims.yml must be a mapping with exactly the keys 'sources' and 'claims'"]
    sources = ledger["sources"] or {}
    keys = bib_keys(root)
    for name, info in sources.items():
        for field in ("title", "reference"):
            if not (isinstance(info, dict) and info.get(field)):
                problems.append(f"source {name}: missing {field!r}")
        chapter = info.get("chapter") if isinstance(info, dict) else None
        if chapter and not any((root / f"{chapter}{ext}").is_file() for ext in (".md", ".ipynb")):
            problems.append(f"source {name}: chapter {chapter!r} is not a page of the book")
        if isinstance(info, dict) and info.get("reference") and info["reference"] not in keys:
            problems.append(f"source {name}: reference {info['reference']!r} is not in references.bib")
    seen = set()
    for n, entry in enumerate(ledger["claims"] or []):
        where = f"claim {entry.get('id', f'#{n}')!s}" if isinstance(entry, dict) else f"claim #{n}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be a mapping")
            continue
        missing = [k for k in REQUIRED if k not in entry]
        unknown = [k for k in entry if k not in REQUIRED + OPTIONAL]
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}")
        if unknown:
            problems.append(f"{where}: unknown keys {', '.join(unknown)}")
        cid = entry.get("id")
        if not (isinstance(cid, str) and ID_PATTERN.match(cid)):
            problems.append(f"{where}: id must be lower-case words joined by '-'")
        elif cid in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(cid)
        source = entry.get("source")
        if source not in sources and source not in keys:
            problems.append(f"{where}: source {source!r} is neither a listed document nor a references.bib key")
        verdict = entry.get("verdict")
        if verdict not in VERDICTS:
            problems.append(f"{where}: verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        evidence = entry.get("evidence") or []
        if not isinstance(evidence, list):
            problems.append(f"{where}: evidence must be a list")
            evidence = []
        if verdict in ("proved", "checked", "qualified", "refuted") and not evidence:
            problems.append(f"{where}: a {verdict} claim needs at least one piece of evidence")
        if verdict in VERDICT_FIELDS:
            field, message = VERDICT_FIELDS[verdict]
            value = entry.get(field)
            if not (isinstance(value, str) and value.strip()):
                problems.append(f"{where}: a {verdict} claim {message}")
        for field, owner in (("correction", "refuted"), ("hypothesis", "qualified"), ("catches", "checked")):
            if field in entry and verdict != owner:
                problems.append(f"{where}: '{field}:' belongs to {owner} claims only, not {verdict}")
        problems.extend(f"{where}: {p}" for p in schema_problems(entry))
        corrects = entry.get("corrects")
        if isinstance(corrects, dict) and "of" in corrects and corrects["of"] not in sources:
            problems.append(f"{where}: corrects.of {corrects['of']!r} is not a listed source document")
        if verdict == "cited" and entry.get("reference") not in keys:
            problems.append(f"{where}: a cited claim needs a reference that is a references.bib key")
        missing_evidence = False
        for item in evidence:
            problem = evidence_problem(root, item)
            if problem:
                missing_evidence = True
                problems.append(f"{where}: {problem}")
        if strength and not missing_evidence:
            problems.extend(f"{where}: {p}" for p in strength_problems(root, entry))
    return problems


def schema_problems(entry: dict) -> list[str]:
    """Type errors of one claim against :data:`CLAIM_SCHEMA` (empty when jsonschema is absent)."""
    try:
        import jsonschema
    except ImportError:  # the hand-written checks still run
        return []
    validator = jsonschema.Draft202012Validator(CLAIM_SCHEMA)
    problems = []
    for error in sorted(validator.iter_errors(entry), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path) or "entry"
        problems.append(f"{where}: {error.message}")
    return problems


def errata_source(entry: dict) -> str:
    """The document whose slip a row corrects: ``corrects.of`` when given, else the row's source."""
    return (entry.get("corrects") or {}).get("of") or entry["source"]


def errata_rows(ledger: dict) -> list[dict]:
    """The rows the errata page lists: refuted and qualified ones, and every row with ``corrects:``."""
    return [c for c in ledger["claims"] if c.get("verdict") in ERRATA_VERDICTS or c.get("corrects")]


READER_FIELDS = ("claim", "hypothesis", "correction", "catches", "locator", "note")


def _reader_text(entry: dict) -> list[tuple[str, str]]:
    fields = [(f, entry.get(f)) for f in READER_FIELDS]
    fields += [(f"corrects.{k}", v) for k, v in (entry.get("corrects") or {}).items() if k in ("slip", "fix")]
    return [(f, v) for f, v in fields if isinstance(v, str)]


def _first_words(entry: dict, words: re.Pattern, fields=None) -> tuple[str, str] | None:
    """The first ``(field, matched words)`` that ``words`` finds in the entry's reader text (only in
    ``fields`` when given), or None."""
    for field, text in _reader_text(entry):
        match = (fields is None or field in fields) and words.search(" ".join(text.split()))
        if match:
            return field, match.group(0)
    return None


def unmarked_corrections(ledger: dict) -> list[str]:
    """Rows whose text describes a slip of the source but that the errata page would not list."""
    listed = {c["id"] for c in errata_rows(ledger)}
    hits = [(e["id"], _first_words(e, CORRECTION_WORDS)) for e in ledger["claims"] if e["id"] not in listed]
    return [f"{cid}: its {hit[0]} says {hit[1]!r} but it has no 'corrects:'" for cid, hit in hits if hit]


def overcorrections(ledger: dict) -> list[str]:
    """Rows on the errata page whose note, hypothesis or correction says the source is right in its
    own setting (the fields ``RIGHT_FIELDS``)."""
    hits = [(e["id"], _first_words(e, RIGHT_WORDS, RIGHT_FIELDS)) for e in errata_rows(ledger)]
    return [f"{cid}: its {hit[0]} says {hit[1]!r} but the errata page lists it" for cid, hit in hits if hit]


def reader_text_problems(ledger: dict) -> list[str]:
    """Process talk and source file names in the text the ledger and errata pages render."""
    problems = []
    for entry in ledger["claims"]:
        for field, text in _reader_text(entry):
            text = " ".join(text.split())
            for pattern, what in ((PROCESS_WORDS, "process talk"), (SOURCE_FILE, "a source file name")):
                match = pattern.search(text)
                if match:
                    problems.append(f"{entry['id']}: its {field} has {what}: {match.group(0)!r}")
    for name, info in (ledger.get("sources") or {}).items():
        for field in ("title",):
            if SOURCE_FILE.search(str(info.get(field, ""))):
                problems.append(f"source {name}: its {field} has a source file name")
    return problems


def cell_label(notebook: str, tag: str) -> str:
    """The label of a tagged cell: ``nb-<notebook stem>-<tag>``."""
    return f"nb-{Path(notebook).stem}-{tag}".lower().replace("_", "-")
