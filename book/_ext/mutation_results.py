"""Mutation results that say when they are stale (``bench/mutation.json``).

``make mutate`` (scripts/mutate.py) records, for every function of every module of
``attncore`` it measured, a hash of the function's source and the counts of its
mutants (killed, including those that timed out, as mutmut counts them); the
mutants that were not killed are listed one by one.  A function's counts describe
the code whose hash they carry and nothing else: when the source of a module no
longer hashes to what its row recorded (a function edited, added or removed), the
row is *stale*, and the appendix prints "stale" instead of its numbers.  The
check runs at every book build and in tests/test_mutation_results.py, so a row
goes stale by itself when its code changes; ``make mutate`` runs the mutants of
exactly the functions that changed.

The hash is per function, because mutmut names every mutant after the function it
changes (``attncore._vjp.x_ffn_vjp__mutmut_12``): a changed function makes only its
own mutants' verdicts obsolete, so only those are run again.  It is taken over the
function's source text, decorators to last line, as written: mutmut's own hash (of
``ast.dump``) would be the same idea, but the dump differs between Python versions
(3.12 added fields to function nodes, 3.13 omits empty ones), and a test on another
interpreter would call every row stale.  A moved function keeps its hash; an edited
comment or docstring changes it (the doctests are part of the tests mutmut runs).

Beside them, ``make mutate MUTATE_ARGS=--messages`` records per module the mutants of its message
lines (:func:`message_lines`: the ``raise`` statements and what only they read), with the hashes
of the functions that hold those lines; such a row is stale when any of them changes.

In the book, the directive ``mutation-results`` renders the summary (:func:`summary`), and
``mutation-results`` with the argument ``messages`` the table of the message lines
(:func:`message_summary`).
"""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import json
from pathlib import Path

RESULTS = Path("bench") / "mutation.json"
PACKAGE = "attncore"


def function_lines(source: str) -> dict[str, tuple[int, int]]:
    """The first (decorators included) and last line of every function of a module, by name.

    Top-level functions and the methods of classes (nested classes too), the functions mutmut
    mutates, named as Python names them (``Class.method``).
    """
    found = {}

    def visit(body, prefix=""):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[prefix + node.name] = (min([node.lineno] + [d.lineno for d in node.decorator_list]),
                                             node.end_lineno)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(ast.parse(source).body)
    return found


def function_sources(source: str) -> dict[str, str]:
    """The source text of every function of a module (see :func:`function_lines`), by name."""
    lines = source.splitlines()
    return {name: "\n".join(lines[first - 1:last]) for name, (first, last) in function_lines(source).items()}


def function_hashes(source: str) -> dict[str, str]:
    """``{name: hash}`` for every function of a module: sha256 of its source text, 12 hex digits."""
    return {name: hashlib.sha256(text.encode()).hexdigest()[:12] for name, text in function_sources(source).items()}


def modules(root: Path) -> dict[str, Path]:
    """The modules of the package that hold functions, ``{stem: path}``."""
    return {p.stem: p for p in sorted((root / PACKAGE).glob("*.py")) if function_sources(p.read_text())}


def changed_functions(entry: dict | None, source: str) -> list[str]:
    """The functions whose recorded hash differs from the source's: edited, added or removed ones."""
    recorded = {name: f["hash"] for name, f in ((entry or {}).get("functions") or {}).items()}
    now = function_hashes(source)
    return sorted(name for name in set(recorded) | set(now) if recorded.get(name) != now.get(name))


def _span(node: ast.AST) -> set[int]:
    return set(range(node.lineno, node.end_lineno + 1))


def message_lines(sources: dict[str, str]) -> dict[str, set[int]]:
    """The lines of each module that build an error message, from ``{module: source}`` of the package.

    A line builds a message when it lies in a ``raise`` statement; in an assignment inside a function
    whose names are read only on such lines (``what = ...`` before ``raise ValueError(f"...{what}")``);
    or in a top-level function every use of which in the package is on such lines (a helper that
    formats messages, such as ``_checks.describe``).
    """
    trees = {m: ast.parse(s) for m, s in sources.items()}
    lines = {(m, i) for m, t in trees.items() for n in ast.walk(t) if isinstance(n, ast.Raise) for i in _span(n)}
    reads = {}  # name -> where it is read: (module, line)
    for m, tree in trees.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                reads.setdefault(n.id, set()).add((m, n.lineno))
    candidates = []  # (the lines of a definition, where what it defines is read)
    for m, tree in trees.items():
        candidates += [({(m, i) for i in _span(f)}, reads[f.name]) for f in tree.body
                       if isinstance(f, ast.FunctionDef) and f.name in reads]
        for f in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            local = [n for n in ast.walk(f) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
            candidates += [({(m, i) for i in _span(a)}, {(m, n.lineno) for n in local if n.id in {t.id for t in a.targets}})
                           for a in ast.walk(f) if isinstance(a, ast.Assign)
                           and all(isinstance(t, ast.Name) for t in a.targets)]
    while True:  # a definition read only by message lines is one; repeat until nothing joins
        new = {line for defined, used in candidates if used and used <= lines for line in defined} - lines
        if not new:
            return {m: {i for k, i in lines if k == m} for m in sources}
        lines |= new


def message_functions(root: Path) -> dict[str, dict[str, str]]:
    """``{module: {function: hash}}`` for the functions that hold message lines (:func:`message_lines`)."""
    sources = {m: p.read_text() for m, p in modules(root).items()}
    lines = message_lines(sources)
    return {m: {f: function_hashes(s)[f] for f, (a, b) in function_lines(s).items() if lines[m] & set(range(a, b + 1))}
            for m, s in sources.items()}


def module_rows(results: dict, root: Path) -> list[dict]:
    """One row per module of the package: its counts, score and state (current, stale or not measured)."""
    rows = []
    mutants = results.get("mutants", [])
    for name, path in modules(root).items():
        entry = results.get("modules", {}).get(name)
        row = {"module": name}
        if not entry:
            rows.append({**row, "state": "not measured"})
            rows[-1]["changed"] = sorted(function_hashes(path.read_text()))
            continue
        functions = entry["functions"].values()
        mine = [m for m in mutants if m["file"] == f"{PACKAGE}/{name}.py"]
        row.update(
            total=sum(f["mutants"] for f in functions),
            killed=sum(f["killed"] for f in functions),
            **{key: sum(m["status"] == status for m in mine)
               for key, status in (("survived", "survived"), ("equivalent", "equivalent"), ("not_run", "not run"))},
            measured=sorted({f["measured"] for f in functions if f["mutants"]}),
            changed=changed_functions(entry, path.read_text()),
        )
        row["state"] = "stale" if row["changed"] else "current"
        run = row["total"] - row["equivalent"] - row["not_run"]
        row["score"] = row["killed"] / run if run else None
        rows.append(row)
    return rows


def pct(score: float | None) -> str:
    return "–" if score is None else f"{100 * score:.1f}%"


def summary(results: dict, root: Path) -> str:
    """The results as a Markdown fragment: the score over the current rows, and a row per module."""
    rows = module_rows(results, root)
    current = [r for r in rows if r["state"] == "current"]
    t = {k: sum(r[k] for r in current) for k in ("total", "killed", "survived", "equivalent", "not_run")}
    run = t["total"] - t["equivalent"] - t["not_run"]
    machine = results.get("machine", {})
    out = [
        f"Measured with {results.get('tool', 'mutmut')} {results.get('version', '')} on {machine.get('cpu', '?')} "
        f"({machine.get('cores', '?')} cores, Python {machine.get('python', '?')}), "
        f"{results.get('max_children', 2)} worker processes under `nice`.",
        "",
        f"**Score: {pct(t['killed'] / run if run else None)}** of the {run} non-equivalent mutants run in the "
        f"{len(current)} modules whose results describe their current code (target {100 * results['target']:.0f}%); "
        f"{t['survived']} survive, {t['equivalent']} are equivalent"
        + (f", {t['not_run']} were not run" if t["not_run"] else "")
        + ". A mutant whose tests ran past mutmut's time limit counts as killed, as mutmut counts it.",
        "",
        "| module | measured | mutants | killed | survived | equivalent | not run | score |",
        "| --- | --- |" + " ---: |" * 6,
    ]
    for r in rows:
        label = f"`{r['module']}`"
        if r["state"] == "not measured":
            out.append(f"| {label} | not measured | | | | | | – |")
        elif r["state"] == "stale":
            out.append(f"| {label} | {', '.join(r['measured'])} | | | | | | stale |")
        else:
            out.append(f"| {label} | {', '.join(r['measured'])} | {r['total']} | {r['killed']} | {r['survived']} "
                       f"| {r['equivalent']} | {r['not_run']} | {pct(r['score'])} |")
    out.append(f"| **current** | | {t['total']} | {t['killed']} | {t['survived']} | {t['equivalent']} "
               f"| {t['not_run']} | {pct(t['killed'] / run if run else None)} |")
    stale = [r for r in rows if r["state"] == "stale"]
    if stale:
        out += ["", "*Stale* rows count the mutants of code that has changed since; `make mutate` runs the mutants "
                "of the changed functions again: " + "; ".join(
                    f"`{r['module']}`, {len(r['changed'])} of {len(function_hashes((root / PACKAGE / (r['module'] + '.py')).read_text()))}"
                    " functions (" + ", ".join(f"`{f}`" for f in r["changed"][:6])
                    + (", ..." if len(r["changed"]) > 6 else "") + ")" for r in stale) + "."]
    return "\n".join(out) + "\n"


def message_rows(results: dict, root: Path) -> list[dict]:
    """One row per module with message lines or message results: counts, score, state.

    A row is *stale* when the functions holding the module's message lines, or their hashes, are
    no longer those it recorded (a message edited, added or removed, or its function changed).
    """
    covered = message_functions(root)
    recorded = {m: e["messages"] for m, e in results.get("modules", {}).items() if e.get("messages")}
    rows = []
    for name in sorted({m for m, f in covered.items() if f} | set(recorded)):
        entry = recorded.get(name)
        if not entry:
            rows.append({"module": name, "state": "not measured"})
            continue
        row = {"module": name, "measured": entry["measured"], "total": entry["mutants"], "killed": entry["killed"],
               **{s.replace(" ", "_"): sum(m["status"] == s for m in entry["survivors"])
                  for s in ("survived", "equivalent", "not run")},
               "state": "current" if entry["functions"] == covered.get(name) else "stale"}
        run = row["total"] - row["equivalent"] - row["not_run"]
        rows.append({**row, "score": row["killed"] / run if run else None})
    return rows


def message_summary(results: dict, root: Path) -> str:
    """The message-line results as a Markdown table, a row per module (:func:`message_rows`)."""
    rows = message_rows(results, root)
    current = [r for r in rows if r["state"] == "current"]
    keys = ("total", "killed", "survived", "equivalent", "not_run")
    t = {k: sum(r[k] for r in current) for k in keys}
    run = t["total"] - t["equivalent"] - t["not_run"]
    out = ["| module | measured | message mutants | killed | survived | equivalent | not run | score |",
           "| --- | --- |" + " ---: |" * 6]
    for r in rows:
        if r["state"] != "current":
            out.append(f"| `{r['module']}` | {r.get('measured', 'not measured')} |" + " |" * 5
                       + f" {'stale' if r['state'] == 'stale' else '–'} |")
        else:
            out.append(f"| `{r['module']}` | {r['measured']} | " + " | ".join(str(r[k]) for k in keys)
                       + f" | {pct(r['score'])} |")
    out.append("| **current** | | " + " | ".join(str(t[k]) for k in keys) + f" | {pct(t['killed'] / run if run else None)} |")
    return "\n".join(out) + "\n"


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")


# ---- Sphinx -------------------------------------------------------------------

def setup(app):
    from docutils import nodes
    from docutils.parsers.rst import Directive
    from docutils.statemachine import StringList

    class MutationResults(Directive):
        """The summary of ``bench/mutation.json`` against the package's current code."""

        has_content = False
        optional_arguments = 1  # "messages": the table of the message lines (message_summary)

        def run(self):
            env = self.state.document.settings.env
            root = Path(env.srcdir)
            env.note_dependency(str(root / RESULTS))
            for path in modules(root).values():  # a changed module re-renders its row as stale
                env.note_dependency(str(path))
            render = message_summary if self.arguments == ["messages"] else summary
            text = render(json.loads((root / RESULTS).read_text()), root)
            box = nodes.container()
            self.state.nested_parse(StringList(text.splitlines()), self.content_offset, box)
            return box.children

    app.add_directive("mutation-results", MutationResults)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
