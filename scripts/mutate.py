"""Mutation testing of attncore (`make mutate`): how strong is the evidence?

Runs mutmut (pinned in requirements-mutate.txt, configured in setup.cfg) over
every module of ``attncore/`` against the package doctests and the unit and
property tests (not the notebooks, not the book build), then writes

- ``bench/mutation.json``: tool and version, machine, run time, per-module
  totals (killed, survived, timeout, equivalent, score) and every surviving
  mutant with ``file:line``, a stable key and the mutation's diff;
- ``bench/mutation.md``: the same as Markdown, included by the appendix page
  ``book/appendix/evidence_strength.md``.

A surviving mutant is either *equivalent* (it computes the same function as
the original on every input the package accepts), explained in the reviewed
file ``bench/mutation_equivalent.yml`` under its stable key, or *open*: a gap
in the tests, to be closed by a test in ``tests/test_strength_<module>.py``.
The score is (killed + timeout) / (total - equivalent).

Usage::

    python scripts/mutate.py                 # full run from scratch (rm -rf mutants/)
    python scripts/mutate.py --report-only   # rewrite the report from mutants/
    python scripts/mutate.py --rerun-survivors   # after adding tests: rerun only the mutants
                                                 # that survived in mutants/ (keeps the full
                                                 # run's time and scores as "before")
    python scripts/mutate.py --max-children 2

Run it under ``nice``: it keeps ``--max-children`` processes busy for the
better part of an hour on a 2-core machine.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "mutation.json"
REPORT = ROOT / "bench" / "mutation.md"
EQUIVALENT = ROOT / "bench" / "mutation_equivalent.yml"
TARGET = 0.98


def machine():
    """The machine as ``bench/run.py`` describes it, so both result files say the same."""
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.machine()


def function_starts(path):
    """First line (decorators included) of every function, keyed as mutmut names them."""
    tree = ast.parse(path.read_text())
    starts = {}

    def visit(body, cls=None):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                key = f"x\u01c1{cls}\u01c1{node.name}" if cls else f"x_{node.name}"
                starts[key] = (first, node.end_lineno)
            elif isinstance(node, ast.ClassDef) and cls is None:
                visit(node.body, node.name)

    visit(tree.body)
    return starts


def locate(diff, source_lines, span):
    """The source line of the first changed line of a function-relative diff.

    mutmut diffs the function alone; the line is found by its text inside the
    function's span, nearest to the position the hunk header gives.
    """
    first, last = span
    removed = None
    offset = 0
    for line in diff.splitlines():
        m = re.match(r"@@ -(\d+)", line)
        if m:
            offset = int(m.group(1)) - 1
            continue
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            removed = line[1:]
            break
        if line.startswith(" "):
            offset += 1
    if removed is None:  # a pure insertion
        return first + offset
    guess = first + offset
    hits = [i + 1 for i in range(first - 1, min(last, len(source_lines)))
            if source_lines[i].strip() == removed.strip()]
    return min(hits, key=lambda i: abs(i - guess)) if hits else guess


def change_of(diff):
    """The mutation as text: removed and added lines, stripped, joined."""
    minus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return " / ".join(minus), " / ".join(plus)


def collect():
    """Every mutant's status from mutants/*.meta, survivors with their diffs."""
    os.chdir(ROOT)
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    entries = (yaml.safe_load(EQUIVALENT.read_text()) if EQUIVALENT.exists() else None) or []
    equivalent = {e["mutant"]: e["why"] for e in entries}
    modules, survivors, seen = {}, [], Counter()
    for meta in sorted((ROOT / "mutants" / "attncore").glob("*.py.meta")):
        rel = Path("attncore") / meta.name[: -len(".meta")]
        data = json.loads(meta.read_text())
        counts = Counter()
        source_lines = (ROOT / rel).read_text().splitlines()
        starts = function_starts(ROOT / rel)
        for name, code in sorted(data["exit_code_by_key"].items(), key=lambda kv: _natural(kv[0])):
            status = status_by_exit_code[code]
            counts["total"] += 1
            if status in ("killed", "timeout"):
                counts[status] += 1
                continue
            if status != "survived":  # not run (or no test covers it): named and counted only
                counts["other"] += 1
                survivors.append({"mutant": name, "status": status, "file": str(rel)})
                continue
            diff = get_diff_for_mutant(name, path=rel)
            func = name.split(".")[-1].split("__mutmut_")[0]
            line = locate(diff, source_lines, starts.get(func, (1, len(source_lines))))
            removed, added = change_of(diff)
            pyname = func[2:] if func.startswith("x_") else func.replace("x\u01c1", "").replace("\u01c1", ".")
            key = f"{rel.stem}.{pyname}: {removed} => {added}"
            seen[key] += 1
            if seen[key] > 1:
                key += f" (#{seen[key]})"
            entry = {"mutant": name, "status": status, "file": str(rel), "line": line,
                     "function": pyname, "key": key, "diff": diff}
            if status == "survived" and key in equivalent:
                entry["status"] = "equivalent"
                entry["why"] = str(equivalent[key]).strip()
            counts[entry["status"] if entry["status"] in ("survived", "equivalent") else "other"] += 1
            survivors.append(entry)
        if not counts["total"]:
            continue
        live = counts["total"] - counts["equivalent"] - counts["other"]  # of the mutants run
        modules[rel.stem] = {
            "total": counts["total"], "killed": counts["killed"], "survived": counts["survived"],
            "timeout": counts["timeout"], "equivalent": counts["equivalent"],
            "not_run": counts["other"],
            "score": (counts["killed"] + counts["timeout"]) / live if live else None,
        }
    stale = sorted(set(equivalent) - set(seen) - {k for k in equivalent if re.search(r" \(#\d+\)$", k)})
    return modules, survivors, stale


def _natural(name):
    head, _, num = name.rpartition("__mutmut_")
    return (head, int(num) if num.isdigit() else 0)


def pct(score):
    return "–" if score is None else f"{100 * score:.1f}%"


def totals(modules):
    t = Counter()
    for m in modules.values():
        for k in ("total", "killed", "survived", "timeout", "equivalent", "not_run"):
            t[k] += m[k]
    live = t["total"] - t["equivalent"] - t["not_run"]
    return {**t, "score": (t["killed"] + t["timeout"]) / live if live else None}


def markdown(r):
    """The results as a Markdown fragment for the appendix (no top-level heading)."""
    t = r["totals"]
    out = [
        f"Measured {r['date']}"
        + (" (**partial run**: only " + ", ".join(r["partial"]) + ")" if r.get("partial") else "")
        + f" with {r['tool']} {r['version']} on {r['machine']['cpu']} ({r['machine']['cores']} cores, "
        f"Python {r['machine']['python']}), {r['max_children']} worker processes under `nice`: "
        + (f"{r['seconds'] / 60:.0f} minutes" if r["seconds"] else "time not measured")
        + (f" for the first run, which reached {r['before']['totals']['total'] - r['before']['totals']['not_run']} "
           f"of the {t['total']} mutants" + (" before it was stopped." if r["before"]["totals"]["not_run"] else ".")
           if r.get("before") else "")
        + ("" if r.get("before") else f" for the {t['total'] - t['not_run']} mutants run, of {t['total']}."
           if t["not_run"] else f" for {t['total']} mutants."),
        "",
        f"**Score: {pct(t['score'])}** of the {t['total'] - t['equivalent'] - t['not_run']} non-equivalent "
        f"mutants {'run ' if t['not_run'] else ''}killed "
        f"(target {100 * TARGET:.0f}%); {t['survived']} survive, {t['equivalent']} are equivalent"
        + (f"; **{t['not_run']} were not run** (the run was stopped before them; the score is over the mutants "
           "that were run, and the modules concerned are marked *partial*)" if t["not_run"] else "") + ".",
        "",
    ]
    if r.get("resumed"):
        out += [f"The stopped run was then continued (a plain `mutmut run`, against all the tests including "
                f"the new ones) for {r['resumed']['seconds'] / 60:.0f} more minutes, which ran "
                f"{r['resumed']['mutants']} more mutants.", ""]
    b = r.get("before")
    if b:
        out += [f"The column *before* is the score of the first run (reported {b['date']}), before the tests of "
                "`tests/test_strength_*.py` were written (and before any survivor was marked equivalent); "
                "the surviving mutants"
                + (" of " + ", ".join(f"`{m}`" for m in r["rerun_modules"]) if r.get("rerun_modules")
                   and set(r["rerun_modules"]) != set(r["modules"]) else "")
                + " were then run again against the new tests"
                + (f" (the last such rerun took {r['rerun_seconds'] / 60:.0f} minutes)" if r.get("rerun_seconds") else "")
                + ("; the other modules' survivors were not run again, so their counts are those of the first run."
                   if r.get("rerun_modules") and set(r["rerun_modules"]) != set(r["modules"]) else "."), ""]
    head = "| module | mutants | killed | timeout | survived | equivalent |" + (" before |" if b else "") + " score |"
    out += [head, "| --- |" + " ---: |" * (head.count("|") - 2)]
    for name, m in list(r["modules"].items()) + [("all", t)]:
        label = ("**all**" if name == "all" else f"`{name}`") + (f" (partial: {m['not_run']} not run)" if m["not_run"] else "")
        prev = (b["totals"]["score"] if name == "all" else b["modules"].get(name)) if b else None
        out.append(f"| {label} | {m['total']} | {m['killed']} | {m['timeout']} | {m['survived']} "
                   f"| {m['equivalent']} |" + (f" {pct(prev)} |" if b else "") + f" {pct(m['score'])} |")
    for title, status in (("Surviving mutants (gaps in the tests)", "survived"),
                          ("Equivalent mutants", "equivalent")):
        rows = [s for s in r["survivors"] if s["status"] == status]
        if not rows:
            continue
        out += ["", f"## {title}", ""]
        module = None
        for s in rows:
            if s["file"] != module:
                module = s["file"]
                count = sum(1 for x in rows if x["file"] == module)
                out += [f"### `{Path(module).stem}` ({count})", ""]
            out += [f"**`{s['file']}:{s['line']}`** in `{s['function']}` ({s['mutant'].split('.')[-1]}"
                    + ("" if status else f", {s['status']}") + ")", ""]
            if s.get("why"):
                out += [s["why"], ""]
            out += ["```diff", s["diff"], "```", ""]
    return "\n".join(out).rstrip() + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report-only", action="store_true", help="do not run mutmut; report on mutants/")
    ap.add_argument("--rerun-survivors", nargs="*", metavar="MODULE", default=None,
                    help="rerun only the mutants that survived the last run (after adding tests), "
                         "in the given modules (all by default)")
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--partial", nargs="*", default=None,
                    help="mark the results as partial, covering these modules only")
    args = ap.parse_args()
    os.chdir(ROOT)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    seconds, rerun_seconds, before = None, None, previous.get("before")
    mutmut = [str(Path(sys.executable).parent / "mutmut"), "run", "--max-children", str(args.max_children)]
    rerun_modules = previous.get("rerun_modules") if args.report_only else None
    if args.rerun_survivors is not None:
        rerun_modules = args.rerun_survivors or sorted(previous["modules"])
        # every mutant of those modules that was not killed: survivors, and any not run yet
        names = [s["mutant"] for s in previous.get("survivors", []) if Path(s["file"]).stem in rerun_modules]
        seconds = previous.get("seconds")
        before = before or {"date": previous["date"], "totals": previous["totals"],
                            "modules": {k: v["score"] for k, v in previous["modules"].items()}}
        start = time.monotonic()
        proc = subprocess.run(mutmut + names, stdout=subprocess.DEVNULL) if names else None
        rerun_seconds = time.monotonic() - start
        if proc and proc.returncode:
            sys.exit(f"mutmut run failed with exit code {proc.returncode}")
    elif not args.report_only:
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
        start = time.monotonic()
        proc = subprocess.run(mutmut, stdout=subprocess.DEVNULL)
        seconds = time.monotonic() - start
        before = None
        if proc.returncode:
            sys.exit(f"mutmut run failed with exit code {proc.returncode}")
    else:
        seconds, rerun_seconds = previous.get("seconds"), previous.get("rerun_seconds")
    modules, survivors, stale = collect()
    r = {
        "tool": "mutmut", "version": version("mutmut"),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(), "max_children": args.max_children, "seconds": seconds,
        "rerun_seconds": rerun_seconds, "rerun_modules": rerun_modules, "before": before,
        # a stopped run continued with a plain `mutmut run` (recorded by hand: seconds, mutants)
        "resumed": previous.get("resumed"),
        "tests": "attncore doctests and tests/ except test_site, test_book, test_chapters, test_ledger "
                 "(setup.cfg [mutmut])",
        "partial": args.partial, "target": TARGET,
        "totals": totals(modules), "modules": modules, "survivors": survivors,
    }
    RESULTS.write_text(json.dumps(r, indent=1) + "\n")
    REPORT.write_text(markdown(r))
    t = r["totals"]
    for name, m in modules.items():
        print(f"{name:14s} {m['total']:5d} mutants  killed {m['killed'] + m['timeout']:5d}  "
              f"survived {m['survived']:4d}  equivalent {m['equivalent']:3d}  score {pct(m['score']):>6s}")
    print(f"{'all':14s} {t['total']:5d} mutants  score {pct(t['score'])}  "
          f"({'PASS' if t['score'] is not None and t['score'] >= TARGET else 'FAIL'}: target {100 * TARGET:.0f}%)")
    if seconds:
        print(f"mutmut ran for {seconds / 60:.1f} minutes")
    for key in stale:
        print(f"warning: {EQUIVALENT.name} explains a mutant that no longer survives: {key}")
    print(f"wrote {RESULTS.relative_to(ROOT)} and {REPORT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
