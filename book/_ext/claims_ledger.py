"""The claims ledger: load and check ``book/claims.yml``, and render it in the book.

The ledger is the course's promise made mechanical.  Every claim the course
makes (or refutes) is an entry with a verdict and the evidence that backs it:

* ``proved``: a symbolic proof runs (sympy in a notebook or a test);
* ``checked``: numeric evidence only;
* ``refuted``: a counterexample runs; the entry carries the ``correction``;
* ``cited``: a published result we cannot rerun here; the entry carries a
  ``reference`` (a key of ``book/references.bib``).

Evidence items are either ``notebooks/<file>.ipynb#<cell-tag>`` (a tagged cell
of a notebook, executed by nbval and by the book build) or a pytest node id
``tests/<file>.py::<test>``.  :func:`ledger_problems` lists everything wrong
with the ledger; the test suite requires that list to be empty, and the book
build refuses to render a ledger that has problems.

In the book, the ``claims-ledger`` directive renders the whole ledger, grouped
by source document with counts per verdict, and every tagged notebook cell gets
a label ``nb-<notebook stem>-<tag>`` so that ledger rows (and chapters) can link
straight to the cell that is the evidence.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path

import yaml

VERDICTS = ("proved", "checked", "refuted", "cited")
REQUIRED = ("id", "source", "claim", "verdict", "evidence")
OPTIONAL = ("correction", "reference", "note")
ID_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
LEDGER = Path("book") / "claims.yml"
BIBFILE = Path("book") / "references.bib"


# ---- loading and checking ---------------------------------------------------

def load_ledger(root: Path) -> dict:
    """Read ``book/claims.yml`` below ``root``: ``{"sources": {...}, "claims": [...]}``."""
    with open(Path(root) / LEDGER, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def bib_keys(root: Path) -> set[str]:
    """The citation keys defined in ``book/references.bib``."""
    text = (Path(root) / BIBFILE).read_text(encoding="utf-8")
    return set(re.findall(r"@\w+\s*\{\s*([^,\s]+)\s*,", text))


def notebook_tags(path: Path) -> set[str]:
    """Every cell tag used in the notebook at ``path``."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return {tag for cell in nb.get("cells", []) for tag in cell.get("metadata", {}).get("tags", [])}


def pytest_names(path: Path) -> set[str]:
    """Test functions and ``Class::method`` names defined at the top of a test file."""
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
    return names


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


def ledger_problems(root: Path, ledger: dict | None = None) -> list[str]:
    """Everything wrong with the ledger below ``root``; an empty list means sound."""
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
        if verdict in ("proved", "checked", "refuted") and not evidence:
            problems.append(f"{where}: a {verdict} claim needs at least one piece of evidence")
        if verdict == "refuted" and not entry.get("correction"):
            problems.append(f"{where}: a refuted claim needs its correction")
        if verdict == "cited" and entry.get("reference") not in keys:
            problems.append(f"{where}: a cited claim needs a reference that is a references.bib key")
        for item in evidence:
            problem = evidence_problem(root, item)
            if problem:
                problems.append(f"{where}: {problem}")
    return problems


def cell_label(notebook: str, tag: str) -> str:
    """The label of a tagged cell: ``nb-<notebook stem>-<tag>``."""
    return f"nb-{Path(notebook).stem}-{tag}".lower().replace("_", "-")


# ---- Sphinx -------------------------------------------------------------------

def setup(app):
    from docutils import nodes
    from docutils.statemachine import StringList
    from docutils.parsers.rst import Directive
    from sphinx import addnodes
    from sphinx.errors import ExtensionError

    def std_label(env, label, docname, node_id, title):
        std = env.get_domain("std")
        std.anonlabels[label] = (docname, node_id)
        std.labels[label] = (docname, node_id, title)

    def label_tagged_cells(app, doctree):
        """Give every tagged notebook cell an id and a label ``nb-<stem>-<tag>``."""
        docname = app.env.docname
        if not docname.startswith("notebooks/"):
            return
        for node in doctree.findall(nodes.container):
            if "cell" not in node.get("classes", []):
                continue
            for cls in node["classes"]:
                if cls.startswith("tag_"):
                    label = cell_label(docname, cls[len("tag_"):])
                    node["ids"].append(label)
                    std_label(app.env, label, docname, label, f"cell {cls[len('tag_'):]}")

    def xref(text, target, reftype="ref"):
        ref = addnodes.pending_xref(
            "", refdomain="std", reftype=reftype, reftarget=target,
            refexplicit=True, refwarn=True,
        )
        ref += nodes.inline(text, text)
        return ref

    def table(header, rows, widths):
        tgroup = nodes.tgroup(cols=len(header))
        for w in widths:
            tgroup += nodes.colspec(colwidth=w)
        thead = nodes.thead()
        thead += nodes.row("", *[nodes.entry("", nodes.paragraph(text=h)) for h in header])
        tbody = nodes.tbody()
        for cells in rows:
            row = nodes.row()
            for cell in cells:
                entry = nodes.entry()
                entry += cell if isinstance(cell, nodes.Node) else nodes.paragraph(text=str(cell))
                row += entry
            tbody += row
        tgroup += thead
        tgroup += tbody
        tab = nodes.table(classes=["claims-ledger"])
        tab += tgroup
        return tab

    class LedgerDirective(Directive):
        """Shared by ``claims-ledger`` (every claim) and ``claims-errata`` (refuted ones)."""

        has_content = False
        verdicts = VERDICTS
        labels = True  # only the full ledger owns the claim-<id> labels

        def md(self, text):
            """Parse ``text`` as MyST (math, roles, citations) into a container."""
            box = nodes.container()
            self.state.nested_parse(StringList(text.splitlines()), self.content_offset, box)
            return box

        def load(self):
            env = self.state.document.settings.env
            root = Path(env.srcdir)
            env.note_dependency(str(root / LEDGER))
            # The evidence (notebooks, tests) can change without claims.yml changing:
            # pages that render the ledger are re-read on every build.
            if not hasattr(env, "claims_ledger_docs"):
                env.claims_ledger_docs = set()
            env.claims_ledger_docs.add(env.docname)
            ledger = load_ledger(root)
            problems = ledger_problems(root, ledger)
            if problems:
                raise ExtensionError("claims.yml has problems:\n" + "\n".join(problems))
            return env, ledger

        def claim_cell(self, env, claim):
            """The claim's id, text, correction or reference, and its evidence."""
            repo = (env.config.html_theme_options or {}).get("repository_url", "")
            label = f"claim-{claim['id']}"
            ident = nodes.paragraph(ids=[label] if self.labels else [])
            ident += nodes.literal(text=claim["id"])
            if self.labels:
                std_label(env, label, env.docname, label, claim["id"])
            else:
                ident += nodes.Text(" (")
                ident += xref("ledger row", label)
                ident += nodes.Text(")")
            text = claim["claim"]
            if claim.get("correction"):
                text += "\n\n**Correction.** " + claim["correction"]
            if claim.get("reference"):
                text += f"\n\nReference: {{cite:p}}`{claim['reference']}`."
            if claim.get("note"):
                text += "\n\n" + claim["note"]
            cell = nodes.container()
            cell += ident
            cell += self.md(text)
            evidence = nodes.bullet_list(classes=["claim-evidence"])
            for item in claim.get("evidence") or []:
                para = nodes.paragraph()
                if "#" in item:
                    nb, _, tag = item.partition("#")
                    para += xref(f"{tag} ({Path(nb).stem})", cell_label(nb, tag))
                else:
                    file = item.partition("::")[0]
                    uri = f"{repo}/blob/main/{file}" if repo else file
                    para += nodes.reference(item, item, refuri=uri)
                evidence += nodes.list_item("", para)
            if len(evidence):
                cell += nodes.paragraph(text="Evidence:")
                cell += evidence
            return cell

        def run(self):
            env, ledger = self.load()
            claims = [c for c in ledger["claims"] if c["verdict"] in self.verdicts]
            out = self.summary(claims)
            order = list(ledger["sources"]) + sorted({c["source"] for c in claims} - set(ledger["sources"]))
            for source in order:
                group = [c for c in claims if c["source"] == source]
                if not group:
                    continue
                info = ledger["sources"].get(source)
                tally = Counter(c["verdict"] for c in group)
                counts_text = ", ".join(f"{tally[v]} {v}" for v in VERDICTS if tally[v])
                if info:
                    out.append(nodes.rubric(text=f"{info['title']} ({source})"))
                    chapter = (
                        f"chapter: {{doc}}`/{info['chapter']}`" if info.get("chapter")
                        else "its chapter is not written yet"
                    )
                    out.append(self.md(f"{counts_text}. Source: {{cite:p}}`{info['reference']}`; {chapter}."))
                else:
                    out.append(nodes.rubric(text=f"Published results: {source}"))
                    out.append(self.md(f"{counts_text}. Source: {{cite:p}}`{source}`."))
                rows = [[self.claim_cell(env, c), c["verdict"]] for c in group]
                out.append(table(["claim and evidence", "verdict"], rows, [9, 1]))
            return out

        def summary(self, claims):
            counts = Counter(c["verdict"] for c in claims)
            return [
                nodes.paragraph(text=f"{len(claims)} claims in all."),
                table(["verdict", "claims"], [[v, counts.get(v, 0)] for v in VERDICTS], [3, 1]),
            ]

    class ClaimsLedger(LedgerDirective):
        pass

    class ClaimsErrata(LedgerDirective):
        verdicts = ("refuted",)
        labels = False

        def summary(self, claims):
            sources = len({c["source"] for c in claims})
            return [nodes.paragraph(text=f"{len(claims)} refuted claims from {sources} sources.")]

    def always_outdated(app, env, added, changed, removed):
        return sorted(getattr(env, "claims_ledger_docs", set()) - set(removed))

    def purge(app, env, docname):
        getattr(env, "claims_ledger_docs", set()).discard(docname)

    def merge(app, env, docnames, other):
        env.claims_ledger_docs = getattr(env, "claims_ledger_docs", set()) | getattr(other, "claims_ledger_docs", set())

    app.connect("env-get-outdated", always_outdated)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    app.add_directive("claims-ledger", ClaimsLedger)
    app.add_directive("claims-errata", ClaimsErrata)
    app.connect("doctree-read", label_tagged_cells)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
