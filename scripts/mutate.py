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
    python scripts/mutate.py --continue _attention _probe   # run only the mutants that the
                                                 # results list as not run (a stopped run, or a
                                                 # module never run) and merge them in
    python scripts/mutate.py --max-children 2
    python scripts/mutate.py --modules _norms _block   # run only these modules' mutants
                                                 # (keeps mutants/ and the other modules' results;
                                                 # `make mutate MODULES="_norms _block"`)

Every module's entry in the results records when and how its mutants were last
run (``run``: date, mode, minutes of the mutmut invocation that ran them), so a
report merged from several runs says which numbers are current.

Run it under ``nice``: it keeps ``--max-children`` processes busy for hours on a 2-core
machine (33 mutants a minute for the 1,064 mutants that thousands of tests reach on a quiet
machine, about 3 a minute for the same mutants on a busy one, about 25 a minute on the other
modules on a busy one).
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


def changed_functions(module, rev):
    """Functions of ``attncore/<module>.py`` (named as mutmut names them) whose code differs
    from revision ``rev`` (git), or that are new: their mutants have never been run as they are."""
    def functions(text):
        found = {}

        def visit(body, cls=None):
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    key = f"x\u01c1{cls}\u01c1{node.name}" if cls else f"x_{node.name}"
                    found[key] = ast.dump(node)  # no line numbers: a moved function is unchanged
                elif isinstance(node, ast.ClassDef) and cls is None:
                    visit(node.body, node.name)

        visit(ast.parse(text).body)
        return found

    path = f"attncore/{module}.py"
    old = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, cwd=ROOT)
    before = functions(old.stdout) if old.returncode == 0 else {}
    now = functions((ROOT / path).read_text())
    return sorted(k for k, v in now.items() if before.get(k) != v)


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
    """Every mutant's status from mutants/*.meta, by module; the unkilled ones with their diffs.

    A mutant that no test reaches ("no tests") is a gap like a survivor and is reported as
    one; a mutant that was not run (yet) is only counted.
    """
    os.chdir(ROOT)
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    modules, survivors = {}, []
    for meta in sorted((ROOT / "mutants" / "attncore").glob("*.py.meta")):
        rel = Path("attncore") / meta.name[: -len(".meta")]
        data = json.loads(meta.read_text())
        counts, seen = Counter(), Counter()
        source_lines = (ROOT / rel).read_text().splitlines()
        starts = function_starts(ROOT / rel)
        for name, code in sorted(data["exit_code_by_key"].items(), key=lambda kv: _natural(kv[0])):
            status = status_by_exit_code[code]
            counts["total"] += 1
            if status in ("killed", "timeout"):
                counts[status] += 1
                continue
            if status not in ("survived", "no tests"):  # not run (yet): named and counted only
                counts["not_run"] += 1
                survivors.append({"mutant": name, "status": "not run", "file": str(rel)})
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
            survivors.append({"mutant": name, "status": "survived", "file": str(rel), "line": line,
                              "function": pyname, "key": key, "diff": diff,
                              **({"reached": False} if status == "no tests" else {})})
        if counts["total"]:
            modules[rel.stem] = dict(counts)
    return modules, survivors


def merge_rerun(fresh, fresh_survivors, prev, prev_survivors, renewed=()):
    """One module's results after its survivors were run again, merged with the run before.

    mutmut forgets the results of every mutant whose tests changed, so after a rerun of the
    survivors the mutants that the earlier run killed read "not run".  New tests are only
    added, so what the earlier run killed stays killed: a mutant that is "not run" now keeps
    its earlier status (killed or timed out if the earlier run did not list it; equivalent or
    not run if it did), and a rerun mutant takes its new status.  A mutant of a function in
    ``renewed`` (changed since the earlier run) has no earlier status: not run is not run.
    """
    before = {s["mutant"]: s for s in prev_survivors}
    kept, earlier_kills = [], 0
    for s in fresh_survivors:
        if s["status"] != "not run":
            kept.append(s)
        elif s["mutant"].split("__mutmut_")[0] in renewed:
            kept.append(s)
        elif s["mutant"] in before:
            kept.append(before[s["mutant"]])
        else:
            earlier_kills += 1
    m = dict(fresh)
    timeouts = min(prev.get("timeout", 0), earlier_kills)
    m["timeout"] = fresh.get("timeout", 0) + timeouts
    m["killed"] = fresh.get("killed", 0) + earlier_kills - timeouts
    m["not_run"] = sum(s["status"] == "not run" for s in kept)
    return m, kept


def classify(modules, survivors):
    """Mark the survivors explained in bench/mutation_equivalent.yml; count and score each module.

    Returns the explanations that match no survivor (stale entries, to be removed by hand).
    """
    entries = (yaml.safe_load(EQUIVALENT.read_text()) if EQUIVALENT.exists() else None) or []
    equivalent = {e["mutant"]: str(e["why"]).strip() for e in entries}
    for s in survivors:
        if s["status"] in ("survived", "equivalent"):
            s.pop("why", None)
            s["status"] = "equivalent" if s["key"] in equivalent else "survived"
            if s["status"] == "equivalent":
                s["why"] = equivalent[s["key"]]
    for name, m in modules.items():
        mine = [s for s in survivors if Path(s["file"]).stem == name]
        for k in ("total", "killed", "timeout", "not_run"):
            m.setdefault(k, 0)
        m["survived"] = sum(s["status"] == "survived" for s in mine)
        m["equivalent"] = sum(s["status"] == "equivalent" for s in mine)
        live = m["total"] - m["equivalent"] - m["not_run"]  # the non-equivalent mutants run
        m["score"] = (m["killed"] + m["timeout"]) / live if live else None
    keys = {s.get("key") for s in survivors}
    # only entries of the modules measured can be stale
    return sorted(k for k in set(equivalent) - keys if k.split(".")[0] in modules)


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
    def key(run):
        return (run["date"], run["mode"], run["minutes"])

    def chain(run):  # the runs a module's numbers come from: first run, continuation, survivors' reruns
        out = chain(run["first"]) if run.get("first") else []
        return out + [run] + ([run["continued"]] if run.get("continued") else [])

    runs = sorted({key(x) for m in r["modules"].values() for x in chain(m["run"])})
    out = [
        f"Measured with {r['tool']} {r['version']} on {r['machine']['cpu']} ({r['machine']['cores']} cores, "
        f"Python {r['machine']['python']}), {r['max_children']} worker processes under `nice`, on a machine "
        "shared with other work (so the times are upper bounds). The modules' mutants were last run as follows "
        "(the column *run* of the table says which run each module's numbers come from):",
        "",
    ]
    for i, (date, mode, minutes) in enumerate(runs, 1):
        names = [f"`{k}`" for k, m in r["modules"].items()
                 if (date, mode, minutes) in [key(x) for x in chain(m["run"])]]
        out.append(f"{i}. {date}: {MODES[mode]}, {'time not measured' if minutes is None else f'{minutes:.0f} minute' + ('' if round(minutes) == 1 else 's')}"
                   f" ({', '.join(names)}).")
    missing = sorted(set(p.stem for p in (ROOT / "attncore").glob("_*.py") if not p.stem.startswith("__")) - set(r["modules"]))
    if missing:
        out += ["", "Not measured in these results (no run of their mutants is recorded yet): "
                + ", ".join(f"`{m}`" for m in missing) + "."]
    out += [
        "",
        f"**Score: {pct(t['score'])}** of the {t['total'] - t['equivalent'] - t['not_run']} non-equivalent "
        f"mutants {'run ' if t['not_run'] else ''}killed "
        f"(target {100 * TARGET:.0f}%); {t['survived']} survive, {t['equivalent']} are equivalent"
        + (f"; **{t['not_run']} were not run** (the score is over the mutants that were run)" if t["not_run"] else "")
        + ". A *timeout* (the tests of a mutant ran past mutmut's CPU-time limit, 30 times their measured time "
        "plus 30 seconds) counts as killed, as mutmut counts it.",
        "",
    ]
    before = any(m.get("before") is not None for m in r["modules"].values())
    if before:
        out += ["The column *before* is a module's score in the run of all its mutants, before its survivors were "
                "run again against the tests written for them (`tests/test_strength_*.py`).", ""]
    head = ("| module | run | mutants | killed | timeout | survived | equivalent |"
            + (" before |" if before else "") + " score |")
    out += [head, "| --- |" + " ---: |" * (head.count("|") - 2)]
    for name, m in list(r["modules"].items()) + [("all", t)]:
        label = ("**all**" if name == "all" else f"`{name}`") + (f" (partial: {m['not_run']} not run)" if m["not_run"] else "")
        run = "" if name == "all" else ", ".join(
            dict.fromkeys(str(1 + runs.index(key(x))) for x in chain(m["run"])))
        out.append(f"| {label} | {run} | {m['total']} | {m['killed']} | {m['timeout']} | {m['survived']} "
                   f"| {m['equivalent']} |" + (f" {pct(m.get('before'))} |" if before else "") + f" {pct(m['score'])} |")
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
                    + ("; no test reaches it" if s.get("reached") is False else "") + ")", ""]
            if s.get("why"):
                out += [s["why"], ""]
            out += ["```diff", s["diff"], "```", ""]
    return "\n".join(out).rstrip() + "\n"


MODES = {"full": "all mutants of the package, from scratch", "modules": "all mutants of the modules named",
         "rerun": "the previous survivors of the modules named, run again against the current tests",
         "imported": "carried over from an earlier results file",
         "continued": "an earlier stopped run of these modules, continued over the mutants that it "
                      "had not reached"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report-only", action="store_true", help="do not run mutmut; report on mutants/")
    ap.add_argument("--modules", nargs="+", metavar="MODULE", default=None,
                    help="run only these modules' mutants (e.g. _attention) and merge their results "
                         "into bench/mutation.json, keeping the other modules' results")
    ap.add_argument("--rerun-survivors", nargs="*", metavar="MODULE", default=None,
                    help="rerun only the mutants that survived the last run (after adding tests), "
                         "in the given modules (all by default)")
    ap.add_argument("--continue", dest="resume", nargs="+", metavar="MODULE", default=None,
                    help="run only the mutants of these modules that bench/mutation.json lists as not "
                         "run (all of a module it does not list) and merge them into its results")
    ap.add_argument("--changed-since", metavar="REV", default=None,
                    help="with --rerun-survivors: also run every mutant of the functions whose code "
                         "changed since git revision REV (the commit the earlier results were measured "
                         "at), whose earlier results no longer apply")
    ap.add_argument("--skip-changed", nargs="+", metavar="FUNCTION", default=(),
                    help="with --changed-since: changed functions (as mutmut names them, e.g. x_attention) "
                         "whose mutants are not run now; they count as not run, not with their old verdicts")
    ap.add_argument("--no-run", action="store_true",
                    help="with --modules, --continue or --rerun-survivors: do not start mutmut, merge the "
                         "results that a stopped run of the same kind left in mutants/")
    ap.add_argument("--minutes", type=float, default=None,
                    help="with --no-run: the minutes the stopped run ran, recorded with its results")
    ap.add_argument("--max-children", type=int, default=2)
    args = ap.parse_args()
    os.chdir(ROOT)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    prev_modules = {k: v for k, v in previous.get("modules", {}).items() if "run" in v}
    mutmut = [str(Path(sys.executable).parent / "mutmut"), "run", "--max-children", str(args.max_children)]
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    renewed = set()  # functions changed since the earlier results (--changed-since)
    if args.rerun_survivors is not None:
        mode, touched = "rerun", set(args.rerun_survivors or prev_modules)
        names = [s["mutant"] for s in previous.get("survivors", [])
                 if Path(s["file"]).stem in touched and s["status"] == "survived"]
        if args.changed_since:
            for module in sorted(touched):
                changed = changed_functions(module, args.changed_since)
                print(f"{module}: functions changed since {args.changed_since}: {', '.join(changed) or 'none'}")
                names += [f"attncore.{module}.{f}__mutmut_*" for f in changed if f not in args.skip_changed]
                renewed |= {f"attncore.{module}.{f}" for f in changed}
            # a skipped changed function's earlier survivors are numbered as in the old code: not run either
            names = [n for n in names if not (n.split("__mutmut_")[0] in renewed
                                              and n.split("__mutmut_")[0].split(".")[-1] in args.skip_changed)]
        touched = {n.split(".")[1] for n in names}  # a module without survivors keeps its run
    elif args.resume:
        mode, touched = "continued", set(args.resume)
        names = [s["mutant"] for s in previous.get("survivors", [])
                 if Path(s["file"]).stem in touched and s["status"] == "not run"]
        names += [f"attncore.{m}.*" for m in sorted(touched - set(prev_modules))]
    elif args.modules:
        mode, touched = "modules", set(args.modules)
        names = [f"attncore.{m}.*" for m in sorted(touched)]
    elif not args.report_only:
        mode, touched, names = "full", None, []
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    else:
        mode, touched, names = None, set(), []
    minutes = args.minutes if args.no_run else None
    if mode and (names or mode == "full") and not args.no_run:
        start = time.monotonic()
        # CI=1: the derandomized hypothesis profile of tests/conftest.py, so that a mutant's verdict
        # does not depend on which random examples a run happened to draw
        proc = subprocess.run(mutmut + names, stdout=subprocess.DEVNULL, env={**os.environ, "CI": "1"})
        minutes = (time.monotonic() - start) / 60
        if proc.returncode:
            sys.exit(f"mutmut run failed with exit code {proc.returncode}")
    fresh, fresh_survivors = collect() if (ROOT / "mutants").exists() else ({}, [])
    if touched is None:
        touched = set(fresh)
    modules, survivors = {}, []
    for name in sorted(set(fresh) | set(prev_modules)):
        if name in touched and name in fresh:
            m = fresh[name]
            m["run"] = {"date": now, "mode": mode, "minutes": minutes}
            if mode == "continued" and name in prev_modules:
                # the mutants run now take their new status; the rest keep the earlier run's
                m["run"] = {**m["run"], "first": prev_modules[name]["run"]}
                if prev_modules[name].get("before") is not None:
                    m["before"] = prev_modules[name]["before"]
                mine = [s for s in fresh_survivors if Path(s["file"]).stem == name]
                theirs = [s for s in previous.get("survivors", []) if Path(s["file"]).stem == name]
                m, kept = merge_rerun(m, mine, prev_modules[name], theirs)
                modules[name] = m
                survivors += kept
                continue
            if mode == "continued":
                m["run"]["mode"] = "modules"  # a module not run before: all its mutants, from scratch
            if mode == "rerun":
                m["run"] = {**m["run"], "first": prev_modules.get(name, {}).get("run")}
                m["before"] = prev_modules.get(name, {}).get("before", prev_modules.get(name, {}).get("score"))
                mine = [s for s in fresh_survivors if Path(s["file"]).stem == name]
                theirs = [s for s in previous.get("survivors", []) if Path(s["file"]).stem == name]
                m, kept = merge_rerun(m, mine, prev_modules.get(name, {}), theirs, renewed)
                modules[name] = m
                survivors += kept
                continue
        elif mode is None and name in fresh and fresh[name]["total"] > fresh[name].get("not_run", 0):
            # --report-only: mutants/ holds results for this module; keep the run they came from
            prev = prev_modules.get(name, {})
            m = {**fresh[name], "run": prev.get("run", {"date": now, "mode": "modules", "minutes": None})}
            if prev.get("before") is not None:
                m["before"] = prev["before"]
        elif name in prev_modules:
            modules[name] = prev_modules[name]
            survivors += [s for s in previous["survivors"] if Path(s["file"]).stem == name]
            continue
        else:
            continue
        modules[name] = m
        survivors += [s for s in fresh_survivors if Path(s["file"]).stem == name]
    stale = classify(modules, survivors)
    r = {
        "tool": "mutmut", "version": version("mutmut"), "date": now,
        "machine": machine(), "max_children": args.max_children,
        "tests": "attncore doctests and tests/, except the test modules setup.cfg [mutmut] leaves out "
                 "(book, site, chapters, ledger, notebook files, portable notebooks, workflow, PDF, API inventory)",
        "target": TARGET, "totals": totals(modules), "modules": modules, "survivors": survivors,
    }
    RESULTS.write_text(json.dumps(r, indent=1) + "\n")
    REPORT.write_text(markdown(r))
    t = r["totals"]
    for name, m in modules.items():
        print(f"{name:14s} {m['total']:5d} mutants  killed {m['killed'] + m['timeout']:5d}  "
              f"survived {m['survived']:4d}  equivalent {m['equivalent']:3d}  not run {m['not_run']:4d}  "
              f"score {pct(m['score']):>6s}  ({m['run']['mode']} {m['run']['date']})")
    print(f"{'all':14s} {t['total']:5d} mutants  score {pct(t['score'])}  "
          f"({'PASS' if t['score'] is not None and t['score'] >= TARGET else 'FAIL'}: target {100 * TARGET:.0f}%)")
    if minutes is not None:
        print(f"mutmut ran for {minutes:.1f} minutes")
    for key in stale:
        print(f"warning: {EQUIVALENT.name} explains a mutant that does not survive: {key}")
    print(f"wrote {RESULTS.relative_to(ROOT)} and {REPORT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
