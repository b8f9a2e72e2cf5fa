"""Mutation testing of attncore (`make mutate`): run the mutants of the code that changed.

``bench/mutation.json`` holds, for every function of every module it measured, a hash of
the function's source, its number of mutants and how many of them the tests killed, and
lists every mutant that was not killed (survived, equivalent, not run) with its change
(the format and the hash: book/_ext/mutation_results.py).  This script compares those
hashes with the current source and has mutmut (pinned in requirements-mutate.txt,
configured in setup.cfg) run only the mutants of the functions that changed or are new,
against the package doctests and the unit and property tests; then it records their
verdicts under the new hashes.  When nothing changed, nothing runs.

mutmut keeps each verdict it reaches in ``mutants/`` (its cache; ignored by git), keyed by
its own hash of the function, so a run stopped with Ctrl-C loses nothing: the same command
asks mutmut only for the mutants it has no verdict for.  The results file is written when
every mutant asked for has one; ``--report-only`` records a stopped run as it stands (the
mutants it did not reach listed as not run, for ``--not-run`` to finish).

Usage::

    python scripts/mutate.py                        # the changed functions of every module
    python scripts/mutate.py --modules _norms _block    # only these modules' (make mutate MODULES=...)
    python scripts/mutate.py --survivors [MODULE ...]   # after adding tests: rerun the open survivors
    python scripts/mutate.py --not-run [MODULE ...]     # the mutants listed as not run
    python scripts/mutate.py --dry-run              # say what would run, run nothing
    python scripts/mutate.py --messages [--modules M ...]  # all the mutants of the message lines
    python scripts/mutate.py --report-only          # record what mutants/ holds, write the listing

Every call writes ``bench/mutation.md`` (ignored by git): the summary the evidence
appendix shows, then every open survivor with its diff and every equivalent mutant with
its argument.  A survivor is either equivalent (it computes the same function as the
original on every input the package accepts), explained in ``bench/mutation_equivalent.yml``
under its stable key, or open: a gap in the tests, to be closed by a test in
``tests/test_strength_<module>.py``.  The score is killed / (mutants - equivalent - not run);
a mutant whose tests time out counts as killed, as mutmut counts it.

``--messages`` runs, in every function, the mutants whose change lies on lines that only build
an error message (``message_lines`` in book/_ext/mutation_results.py), and records them per module
under ``messages`` (``--survivors`` with it reruns their open survivors).  A survivor there that
rewords the message and keeps every fact the tests check is explained as equivalent; one that
drops a fact is a gap.

Run it under ``nice`` (the Makefile does): mutmut keeps ``--max-children`` processes busy,
about 30 mutants a minute on a quiet 2-core machine, and first runs the whole test suite
once to learn which tests reach which function (a few minutes; cached in mutants/ too).
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import importlib.util
import json
import os
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from mutation_results import (  # noqa: E402
    PACKAGE, RESULTS, changed_functions, function_hashes, function_lines, message_functions, message_lines,
    message_rows, message_summary, module_rows, modules, pct, summary,
)

REPORT = ROOT / "bench" / "mutation.md"
EQUIVALENT = ROOT / "bench" / "mutation_equivalent.yml"
TARGET = 0.95
KILLED = ("killed", "timeout")
UNKILLED = ("survived", "no tests")  # "no tests": no test reaches the mutant, a gap like a survivor
TODAY = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
DEF = ("def ", "async def ")


def machine():
    """The machine as ``bench/run.py`` describes it, so both result files say the same."""
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.machine()


def function_of(mutant: str) -> str:
    """The function a mutant changes, as Python names it: ``attncore._m.xǁCǁf__mutmut_3`` -> ``C.f``."""
    mangled = mutant.partition("__mutmut_")[0]
    if "ǁ" in mangled:  # a method: xǁClassǁname (Class may be Outer.Inner)
        _, cls, name = mangled.split("ǁ")
        return f"{cls}.{name}"
    return mangled.rpartition(".")[2][len("x_"):]


def mutants_of(module: str) -> dict[str, list[str]]:
    """The mutants mutmut makes of the module's current source, by function."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    path = f"{PACKAGE}/{module}.py"
    by_function = {}
    for name in mutate_file_contents(path, (ROOT / path).read_text()).mutant_names:
        by_function.setdefault(function_of(name), []).append(f"{PACKAGE}.{module}.{name}")
    return by_function


def message_mutants(module: str, lines: set[int]) -> list[str]:
    """The module's mutants whose change lies on its message lines (``lines``, from message_lines)."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    path = f"{PACKAGE}/{module}.py"
    source = (ROOT / path).read_text().splitlines()
    mutated = mutate_file_contents(path, "\n".join(source) + "\n")
    code, spans = mutated.code.splitlines(), mutated.line_span_by_function_name
    def_line = {f: next(i for i in range(a, b + 1) if source[i - 1].lstrip().startswith(DEF))
                for f, (a, b) in function_lines("\n".join(source)).items()}

    def text(name):  # a generated function from its def line, its name blanked: only the change differs
        lines = code[spans[name].start - 1:spans[name].end]
        start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith(DEF))
        return [ln.replace(name, "") for ln in lines[start:]]

    found = []
    for name in mutated.mutant_names:
        original = text(name.partition("__mutmut_")[0] + "__mutmut_orig")
        ops = difflib.SequenceMatcher(None, original, text(name), autojunk=False).get_opcodes()
        changed = {def_line[function_of(name)] + i for tag, i1, i2, _, _ in ops if tag != "equal"
                   for i in (range(i1, i2) if i2 > i1 else (i1 - 1, i1))}  # an insertion: the lines either side
        if changed and changed <= lines:
            found.append(f"{PACKAGE}.{module}.{name}")
    return found


def verdicts(module: str) -> dict[str, str]:
    """The verdicts mutmut's cache (mutants/) holds for the module's current code, by mutant."""
    from mutmut.mutation.file_mutation import compute_function_hashes
    from mutmut.stats import status_by_exit_code

    meta = ROOT / "mutants" / PACKAGE / f"{module}.py.meta"
    if not meta.exists():
        return {}
    data = json.loads(meta.read_text())
    now = compute_function_hashes((ROOT / PACKAGE / f"{module}.py").read_text())  # mutmut's own hash
    cached = data.get("hash_by_function_name", {})
    prefix = len(f"{PACKAGE}.{module}.")
    found = {}
    for name, code in data["exit_code_by_key"].items():
        mangled = name.partition("__mutmut_")[0][prefix:]
        if code is not None and cached.get(mangled) == now.get(mangled):
            found[name] = status_by_exit_code[code]
    return found


def listing_entry(mutant: str, status: str, module: str) -> dict:
    """A mutant that was not killed, with its change (a diff of the function) and a stable key."""
    rel = f"{PACKAGE}/{module}.py"
    func = function_of(mutant)
    if status == "not run":
        return {"mutant": mutant, "status": "not run", "file": rel, "function": func}
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    os.chdir(ROOT)
    diff = get_diff_for_mutant(mutant, path=Path(rel))
    minus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:].strip() for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    source = (ROOT / rel).read_text()
    first, last = function_lines(source)[func]
    lines = source.splitlines()
    guess, offset = first, 0  # mutmut diffs the function alone: its hunk header counts from the function's start
    for ln in diff.splitlines():
        if ln.startswith("@@"):
            offset = int(ln.split()[1].lstrip("-").split(",")[0]) - 1
        elif ln.startswith("-") and not ln.startswith("---"):
            guess = first + offset
            break
        elif ln.startswith(" "):
            offset += 1
    hits = [i for i in range(first, last + 1) if minus and lines[i - 1].strip() == minus[0]]
    return {"mutant": mutant, "status": "survived", "file": rel,
            "line": min(hits, key=lambda i: abs(i - guess)) if hits else guess,
            "function": func, "key": f"{module}.{func}: {' / '.join(minus)} => {' / '.join(plus)}",
            "diff": diff, **({"reached": False} if status == "no tests" else {})}


def record(results: dict, module: str, functions: dict[str, list[str]], found: dict[str, str], partial: bool):
    """Enter the verdicts of ``functions`` (each with all its mutants) under their current hashes.

    A function some of whose mutants have no verdict keeps its old entry, unless ``partial``
    (--report-only) and some have one: then those without are listed as not run.
    """
    hashes = function_hashes((ROOT / PACKAGE / f"{module}.py").read_text())
    entry = results["modules"].setdefault(module, {"functions": {}})
    for func, names in functions.items():
        done = sum(n in found for n in names)
        if func in hashes and done < len(names) and not (partial and done):
            continue
        results["mutants"] = [m for m in results["mutants"]
                              if not (m["file"] == f"{PACKAGE}/{module}.py" and m["function"] == func)]
        if func not in hashes:  # removed from the module
            entry["functions"].pop(func, None)
            continue
        status = {n: found.get(n, "not run") for n in names}
        entry["functions"][func] = {"hash": hashes[func], "mutants": len(names),
                                    "killed": sum(s in KILLED for s in status.values()), "measured": TODAY}
        results["mutants"] += [listing_entry(n, s if s in UNKILLED else "not run", module)
                               for n, s in status.items() if s not in KILLED]


def record_messages(results: dict, module: str, names: list[str], found: dict[str, str], partial: bool) -> bool:
    """Enter the verdicts of the module's message mutants, if all have one (or some, with ``partial``),
    under the hashes of the functions that hold its message lines; those not killed are listed."""
    done = sum(n in found for n in names)
    if done < len(names) and not (partial and done):
        return False
    status = {n: found.get(n, "not run") for n in names}
    results["modules"].setdefault(module, {"functions": {}})["messages"] = {
        "functions": message_functions(ROOT)[module], "mutants": len(names),
        "killed": sum(s in KILLED for s in status.values()), "measured": TODAY,
        "survivors": [listing_entry(n, s if s in UNKILLED else "not run", module)
                      for n, s in status.items() if s not in KILLED]}
    return True


def listed(results: dict) -> list[dict]:
    """Every mutant listed: those of the function rows, then those of the message rows."""
    return results["mutants"] + [m for e in results["modules"].values() for m in e.get("messages", {}).get("survivors", [])]


def rerun(results: dict, names: list[str], found: dict[str, str]):
    """Enter the new verdicts of listed mutants run again: a killed one leaves the list."""
    for m in [m for m in results["mutants"] if m["mutant"] in names and m["mutant"] in found]:
        results["mutants"].remove(m)
        module = Path(m["file"]).stem
        if found[m["mutant"]] in KILLED:
            results["modules"][module]["functions"][m["function"]]["killed"] += 1
        else:
            results["mutants"].append(listing_entry(m["mutant"], found[m["mutant"]] if found[m["mutant"]] in UNKILLED
                                                    else "not run", module))


def classify(results: dict) -> list[str]:
    """Mark the survivors explained in bench/mutation_equivalent.yml; return the entries that match none."""
    entries = yaml.safe_load(EQUIVALENT.read_text()) or []
    why = {e["mutant"]: str(e["why"]).strip() for e in entries}
    for m in listed(results):
        if m["status"] in ("survived", "equivalent"):
            m.pop("why", None)
            m["status"] = "equivalent" if m["key"] in why else "survived"
            if m["key"] in why:
                m["why"] = why[m["key"]]
    keys = {m.get("key") for m in listed(results)}
    return sorted(k for k in set(why) - keys if k.split(".")[0] in results["modules"])


def listing(results: dict) -> str:
    """bench/mutation.md: the summary, then every survivor and equivalent mutant with its change."""
    out = [summary(results, ROOT).rstrip(), "", "## Message lines", "", message_summary(results, ROOT).rstrip()]
    messages = listed(results)[len(results["mutants"]):]
    for title, status, mutants in (("Surviving mutants (gaps in the tests)", "survived", results["mutants"]),
                                   ("Equivalent mutants", "equivalent", results["mutants"]),
                                   ("Surviving message mutants", "survived", messages),
                                   ("Message mutants equivalent or reworded", "equivalent", messages)):
        rows = sorted((m for m in mutants if m["status"] == status), key=lambda m: (m["file"], m["line"]))
        for i, m in enumerate(rows):
            if i == 0:
                out += ["", f"## {title}"]
            if i == 0 or m["file"] != rows[i - 1]["file"]:
                out += ["", f"### `{Path(m['file']).stem}` ({sum(x['file'] == m['file'] for x in rows)})"]
            out += ["", f"**`{m['file']}:{m['line']}`** in `{m['function']}` ({m['mutant'].split('.')[-1]}"
                    + ("; no test reaches it" if m.get("reached") is False else "") + ")", ""]
            out += ([m["why"], ""] if m.get("why") else []) + ["```diff", m["diff"], "```"]
    return "\n".join(out) + "\n"


def choose(args, results: dict, wanted: list[str]):
    """What to run: ``plan`` {module: {changed function: its mutants}} or, with --messages, ``messages``
    {module: its message mutants}; ``ask``, the mutants to hand to mutmut."""
    plan, messages, ask = {}, {}, []
    lines = message_lines({m: p.read_text() for m, p in modules(ROOT).items()}) if args.messages else {}
    for module in wanted:
        source = (ROOT / PACKAGE / f"{module}.py").read_text()
        changed = changed_functions(results["modules"].get(module), source)
        if args.messages:
            messages[module] = message_mutants(module, lines[module])
            found = verdicts(module)
            survivors = {m["mutant"] for m in results["modules"].get(module, {}).get("messages", {}).get("survivors", [])
                         if m["status"] == "survived"}
            ask += [n for n in messages[module] if (n in survivors if args.survivors else n not in found)]
            print(f"{module}: {len(messages[module])} mutants on message lines, "
                  f"{len([n for n in ask if f'.{module}.' in n])} to run")
        elif args.survivors or args.not_run:  # listed mutants of unchanged functions, run again whatever mutmut holds
            ask += [m["mutant"] for m in results["mutants"] if m["file"] == f"{PACKAGE}/{module}.py"
                    and m["status"] == ("survived" if args.survivors else "not run") and m["function"] not in changed]
        elif changed:
            by_function = mutants_of(module)
            plan[module] = {f: by_function.get(f, []) for f in changed}
            found = verdicts(module)
            ask += [n for names in plan[module].values() for n in names if n not in found]
            print(f"{module}: {len(changed)} functions new or changed since their results "
                  f"({', '.join(changed[:6])}{', ...' if len(changed) > 6 else ''}), "
                  f"{sum(map(len, plan[module].values()))} mutants, {len([n for n in ask if f'.{module}.' in n])} "
                  "without a verdict in mutants/")
    print(f"mutmut runs {len(ask)} mutants" + ("" if ask or plan or messages else ": the results describe the current code"))
    return plan, messages, ask


def run(ask: list[str], max_children: int) -> float:
    """Have mutmut run ``ask``; the minutes it took."""
    start = time.monotonic()
    # CI=1: the derandomized hypothesis profile of tests/conftest.py, so that a mutant's verdict
    # does not depend on which random examples a run happened to draw
    proc = subprocess.run([str(Path(sys.executable).parent / "mutmut"), "run", "--max-children",
                           str(max_children), *ask], env={**os.environ, "CI": "1"})
    minutes = (time.monotonic() - start) / 60
    if proc.returncode:
        sys.exit(f"mutmut stopped (exit code {proc.returncode}) after {minutes:.1f} minutes; the verdicts it "
                 "reached are kept in mutants/: the same command continues, --report-only records them as they are")
    return minutes


def write(results: dict, path: Path):
    """bench/mutation.json, in a fixed order, and the listing bench/mutation.md."""
    results.update({
        "tool": "mutmut", "version": version("mutmut"),
        "tests": "attncore doctests and tests/, except the test modules setup.cfg [mutmut] leaves out "
                 "(book, site, chapters, ledger, notebook files, portable notebooks, workflow, PDF, API inventory, "
                 "mutation results)",
        "target": TARGET,
        "hash": "per function: sha256 of its source text, decorators to last line, first 12 hex digits "
                "(book/_ext/mutation_results.py)",
    })
    results["modules"] = dict(sorted(results["modules"].items()))
    results["mutants"].sort(key=lambda m: (m["file"], m["function"], int(m["mutant"].rpartition("_")[2])))
    order = ["tool", "version", "machine", "max_children", "tests", "target", "hash", "modules", "mutants"]
    path.write_text(json.dumps({k: results[k] for k in order}, indent=1, ensure_ascii=False) + "\n")
    REPORT.write_text(listing(results))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modules", nargs="+", metavar="MODULE", help="only these modules (e.g. _attention)")
    ap.add_argument("--messages", action="store_true", help="the mutants of the message lines, in every function")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--survivors", action="store_true", help="rerun the open survivors (after adding tests)")
    mode.add_argument("--not-run", action="store_true", help="run the mutants listed as not run")
    mode.add_argument("--report-only", action="store_true", help="run nothing; record what mutants/ holds")
    mode.add_argument("--dry-run", action="store_true", help="say what would run, run nothing")
    ap.add_argument("--max-children", type=int, default=2)
    args = ap.parse_args()
    os.chdir(ROOT)
    path = ROOT / RESULTS
    results = json.loads(path.read_text()) if path.exists() else {"modules": {}, "mutants": []}
    wanted = args.modules or list(modules(ROOT))
    unknown = sorted(set(wanted) - set(modules(ROOT)))
    if unknown:
        sys.exit(f"--modules: no module {unknown} in {PACKAGE}/ (modules: {' '.join(modules(ROOT))})")
    plan, messages, ask = choose(args, results, wanted)
    if args.dry_run:
        return
    minutes = run(ask, args.max_children) if ask and not args.report_only else None

    for module, functions in plan.items():
        record(results, module, functions, verdicts(module), partial=args.report_only)
    unfinished = [m for m, names in messages.items()
                  if not record_messages(results, m, names, verdicts(m), partial=args.report_only or args.survivors)]
    if (args.survivors or args.not_run) and not args.messages:
        found = {}
        for module in {Path(m["file"]).stem for m in results["mutants"] if m["mutant"] in ask}:
            found.update(verdicts(module))
        rerun(results, ask, found)
    stale_entries = classify(results)
    if (minutes is not None and not args.messages) or "machine" not in results:  # the machine of the function rows
        results.update({"machine": machine(), "max_children": args.max_children})
    write(results, path)

    rows = [(r, r["module"], r["module"] in plan) for r in module_rows(results, ROOT)]
    rows += [(r, f"{r['module']} messages", True) for r in message_rows(results, ROOT) if r["module"] in messages]
    for row, label, ran in rows:
        verdict = "" if not ran or row["state"] != "current" else (
            "  PASS" if row["score"] is not None and row["score"] >= TARGET else f"  FAIL (target {TARGET:.0%})")
        print(f"{label:14s} {row['state']:12s} {pct(row.get('score')) if row['state'] == 'current' else '':>7s}"
              + (f"  {row['not_run']} not run" if row.get("not_run") else "") + verdict)
    if unfinished:
        print(f"message mutants without a verdict (not recorded): {' '.join(unfinished)}")
    if minutes is not None:
        print(f"mutmut ran for {minutes:.1f} minutes")
    for key in stale_entries:
        print(f"warning: {EQUIVALENT.name} explains a mutant that does not survive: {key}")
    print(f"wrote {RESULTS} and {REPORT.relative_to(ROOT)} (the per-mutant listing; not committed)")


if __name__ == "__main__":
    main()
