"""The claims ledger in the book (Sphinx extension): render ``book/claims.yml``.

The ``claims-ledger`` directive renders the ledger, grouped by source document
with counts per verdict (``:sources:`` picks some documents, ``:summary:`` gives
the counts only); ``claims-errata`` renders the rows the errata page lists; the
role ``{claim}`<id>``` puts a verdict marker after a claim in a chapter, linked
to its ledger row; and every tagged notebook cell gets a label
``nb-<notebook stem>-<tag>`` so that ledger rows (and chapters) can link
straight to the cell that is the evidence.

Loading and checking the ledger is :mod:`ledger_checks`, beside this file; the
build refuses to render a ledger with structural problems and leaves the
strength of the evidence to the test suite (tests/test_ledger.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ledger_checks import (
    ERRATA_VERDICTS,
    LEDGER,
    VERDICTS,
    cell_label,
    errata_rows,
    errata_source,
    ledger_problems,
    load_ledger,
)


def setup(app):
    from docutils import nodes
    from docutils.statemachine import StringList
    from docutils.parsers.rst import Directive, directives
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
        """Shared by ``claims-ledger`` (every claim) and ``claims-errata`` (see :func:`errata_rows`)."""

        has_content = False
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
            # Structure only: the strength of the evidence is the test suite's job
            # (tests/test_ledger.py), so a half-merged branch still renders.
            problems = ledger_problems(root, ledger, strength=False)
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
            if claim.get("hypothesis"):
                text += "\n\n**True under the hypothesis.** " + claim["hypothesis"]
            if claim.get("correction"):
                text += "\n\n**Correction.** " + claim["correction"]
            if claim.get("catches"):
                text += "\n\n**The evidence rejects.** " + claim["catches"]
            if claim.get("corrects"):
                text += "\n\n**The source writes.** " + claim["corrects"]["slip"]
                text += "\n\n**Corrected.** " + claim["corrects"]["fix"]
            if claim.get("reference"):
                where = f", {claim['locator'].rstrip('.')}" if claim.get("locator") else ""
                text += f"\n\nReference: {{cite:p}}`{claim['reference']}`{where}."
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

        def select(self, ledger):
            return list(ledger["claims"])

        def group_of(self, claim):
            return claim["source"]

        def run(self):
            env, ledger = self.load()
            claims = self.select(ledger)
            out = self.summary(claims)
            groups = {self.group_of(c) for c in claims}
            order = list(ledger["sources"]) + sorted(groups - set(ledger["sources"]))
            for source in order:
                group = [c for c in claims if self.group_of(c) == source]
                if not group:
                    continue
                info = ledger["sources"].get(source)
                tally = Counter(c["verdict"] for c in group)
                counts_text = ", ".join(f"{tally[v]} {v}" for v in VERDICTS if tally[v])
                if info:
                    out.append(nodes.rubric(text=info["title"]))
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
        """The rows of some source documents (``:sources:``, keys of ``sources:``, or ``published``
        for the rows that rest on a published work), so that the ledger spreads over pages of a
        reasonable size; ``:summary:`` alone gives the counts of the whole ledger."""

        option_spec = {"sources": directives.unchanged, "summary": directives.flag}

        def select(self, ledger):
            wanted = set((self.options.get("sources") or "").split())
            if not wanted:
                return list(ledger["claims"])
            documents = set(ledger["sources"])
            unknown = wanted - documents - {"published"}
            if unknown:
                raise ExtensionError(f"claims-ledger :sources: names no source document: {sorted(unknown)}")
            return [c for c in ledger["claims"]
                    if c["source"] in wanted or ("published" in wanted and c["source"] not in documents)]

        def run(self):
            if "summary" in self.options:
                env, ledger = self.load()
                return self.summary(list(ledger["claims"]))
            return super().run()

    class ClaimsErrata(LedgerDirective):
        labels = False

        def select(self, ledger):
            return errata_rows(ledger)

        def group_of(self, claim):
            return errata_source(claim)

        def summary(self, claims):
            sources = len({errata_source(c) for c in claims})
            counts = Counter(c["verdict"] for c in claims)
            others = sum(1 for c in claims if c["verdict"] not in ERRATA_VERDICTS)
            return [nodes.paragraph(text=(
                f"{len(claims)} corrections from {sources} sources: {counts['refuted']} refuted claims, "
                f"{counts['qualified']} qualified ones and {others} slips corrected under other verdicts."
            ))]

    def always_outdated(app, env, added, changed, removed):
        return sorted(getattr(env, "claims_ledger_docs", set()) - set(removed))

    def purge(app, env, docname):
        getattr(env, "claims_ledger_docs", set()).discard(docname)

    def merge(app, env, docnames, other):
        env.claims_ledger_docs = getattr(env, "claims_ledger_docs", set()) | getattr(other, "claims_ledger_docs", set())


    ledger_cache = {}

    def claim_role(name, rawtext, text, lineno, inliner, options=None, content=None):
        """``{claim}`<id>``` : a compact evidence marker, the claim's verdict linked to its ledger row."""
        if not ledger_cache:
            ledger_cache.update({c["id"]: c for c in load_ledger(Path(inliner.document.settings.env.srcdir))["claims"]})
        claim = ledger_cache.get(text.strip())
        if claim is None:
            msg = inliner.reporter.error(f"{{claim}}: no claim {text.strip()!r} in book/claims.yml", line=lineno)
            return [inliner.problematic(rawtext, rawtext, msg)], [msg]
        verdict = claim["verdict"]
        ref = xref(verdict, f"claim-{claim['id']}")
        return [nodes.superscript("", "", ref, classes=["claim-marker", f"claim-{verdict}"])], []

    app.add_role("claim", claim_role)
    app.connect("env-get-outdated", always_outdated)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    app.add_directive("claims-ledger", ClaimsLedger)
    app.add_directive("claims-errata", ClaimsErrata)
    app.connect("doctree-read", label_tagged_cells)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
