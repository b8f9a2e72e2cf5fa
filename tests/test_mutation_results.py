"""Mutation results keep themselves: a row counts the code it measured, or says "stale".

bench/mutation.json records a hash of each function's source with its mutants' counts
(book/_ext/mutation_results.py).  These tests recompute the hashes from the current source
by their own route and check that the appendix's table (the Markdown the directive
``mutation-results`` renders) prints "stale" instead of numbers for exactly the modules whose
code changed, that a change to one function makes its row stale, and that the rows that
describe their current code hold the score target.
"""

import ast
import hashlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from mutation_results import (  # noqa: E402
    changed_functions, function_hashes, message_functions, message_lines, message_rows, message_summary, module_rows, modules,
    summary,
)

RESULTS = json.loads((ROOT / "bench" / "mutation.json").read_text())


def table(markdown: str) -> dict[str, list[str]]:
    """The cells of each module's row of the summary table, by module."""
    rows = {}
    for line in markdown.splitlines():
        match = re.match(r"\| `(\w+)` \|(.*)\|$", line)
        if match:
            rows[match.group(1)] = [c.strip() for c in match.group(2).split("|")]
    return rows


def hashes_by_hand(source: str) -> dict[str, str]:
    """An independent route to the recorded hashes: the lines of each top-level def and each
    method (from its first decorator, by ast's positions), sha256, 12 hex digits."""
    lines = source.splitlines()
    defs = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            defs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            defs.update({f"{node.name}.{m.name}": m for m in node.body if isinstance(m, ast.FunctionDef)})
    return {name: hashlib.sha256("\n".join(lines[(n.decorator_list or [n])[0].lineno - 1:n.end_lineno])
                                 .encode()).hexdigest()[:12] for name, n in defs.items()}


def test_the_hash_is_per_function_and_survives_a_move():
    source = "def f(x):\n    return x + 1\n\n\nclass C:\n    @staticmethod\n    def m(x):\n        return 2 * x\n"
    hashes = function_hashes(source)
    assert set(hashes) == {"f", "C.m"}
    assert hashes == hashes_by_hand(source)
    assert function_hashes("import os\n\n\n" + source) == hashes, "a function that only moved is unchanged"
    edited = function_hashes(source.replace("x + 1", "x - 1"))
    assert edited["f"] != hashes["f"] and edited["C.m"] == hashes["C.m"], "only the edited function changes"
    assert function_hashes(source.replace("@staticmethod", "@classmethod"))["C.m"] != hashes["C.m"]


def test_hashes_agree_with_an_independent_route_on_the_package():
    for module, path in modules(ROOT).items():
        source = path.read_text()
        assert function_hashes(source) == hashes_by_hand(source), module


@pytest.mark.parametrize("edit", ["body", "new function", "removed function"])
def test_a_changed_function_makes_its_row_stale(tmp_path, edit):
    """Results recorded from a module's code as it is give a number; after an edit, "stale"."""
    source = (ROOT / "attncore" / "_permutations.py").read_text()
    (tmp_path / "attncore").mkdir()
    module = tmp_path / "attncore" / "_permutations.py"
    module.write_text(source)
    name = next(iter(function_hashes(source)))
    functions = {f: {"hash": h, "mutants": 20, "killed": 19, "measured": "2026-01-01"}
                 for f, h in function_hashes(source).items()}
    results = {"target": 0.95, "modules": {"_permutations": {"functions": functions}},
               "mutants": [{"mutant": f"attncore._permutations.x_{name}__mutmut_7", "status": "equivalent",
                            "file": "attncore/_permutations.py", "function": name}]}
    assert table(summary(results, tmp_path))["_permutations"][-1] == f"{100 * 76 / 79:.1f}%"  # 4 x 19 of 4 x 20 - 1
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = source.splitlines()
    if edit == "body":
        lines.insert(node.end_lineno - 1, lines[node.end_lineno - 1].replace(lines[node.end_lineno - 1].strip(),
                                                                              "pass"))
    elif edit == "new function":
        lines += ["", "", "def helper(x):", "    return x"]
    else:
        del lines[min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1:node.end_lineno]
    module.write_text("\n".join(lines) + "\n")
    changed = changed_functions(results["modules"]["_permutations"], module.read_text())
    assert changed == [{"body": name, "new function": "helper", "removed function": name}[edit]]
    cells = table(summary(results, tmp_path))["_permutations"]
    assert cells[-1] == "stale" and not any(re.search(r"\d", c) for c in cells[1:]), cells


def test_the_appendix_says_stale_for_exactly_the_changed_modules():
    rows = table(summary(RESULTS, ROOT))
    assert set(rows) == set(modules(ROOT))
    for module, path in modules(ROOT).items():
        entry = RESULTS["modules"].get(module)
        cells = rows[module]
        if entry is None:
            assert cells[0] == "not measured", (module, cells)
            continue
        recorded = {name: f["hash"] for name, f in entry["functions"].items()}
        if recorded != hashes_by_hand(path.read_text()):
            assert cells[-1] == "stale" and not any(re.search(r"\d", c) for c in cells[1:]), (module, cells)
        else:
            assert re.fullmatch(r"\d+\.\d%", cells[-1]), (module, cells)


def test_each_function_entry_adds_up():
    """killed + the mutants listed as not killed = the function's mutants, for every function."""
    for module, entry in RESULTS["modules"].items():
        for name, f in entry["functions"].items():
            listed = sum(m["file"] == f"attncore/{module}.py" and m["function"] == name for m in RESULTS["mutants"])
            assert f["killed"] + listed == f["mutants"], (module, name, f, listed)
            assert re.fullmatch(r"[0-9a-f]{12}", f["hash"]) and re.fullmatch(r"\d{4}-\d\d-\d\d", f["measured"])


def test_the_modules_whose_results_are_current_and_complete_hold_the_target():
    """A current row all of whose mutants were run holds the target score (95%); a row with
    mutants not run shows them in its *not run* column."""
    for row in module_rows(RESULTS, ROOT):
        if row["state"] == "current" and not row["not_run"] and row["score"] is not None:
            assert row["score"] >= RESULTS["target"], (row["module"], row["score"])


def test_the_per_mutant_listing_is_not_committed():
    assert "bench/mutation.md" in (ROOT / ".gitignore").read_text().splitlines()
    tracked = subprocess.run(["git", "ls-files", "bench/mutation.md"], cwd=ROOT, capture_output=True, text=True)
    assert tracked.returncode != 0 or not tracked.stdout.strip(), "git rm --cached bench/mutation.md"


def _mutate():
    spec = importlib.util.spec_from_file_location("mutate", ROOT / "scripts" / "mutate.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_a_run_enters_a_function_only_when_all_its_mutants_have_a_verdict():
    """scripts/mutate.py, record: a changed function whose mutants all have verdicts gets the new
    hash and counts; one with a mutant unrun keeps its old (stale) entry, or with --report-only
    lists that mutant as not run; a removed function leaves."""
    script = _mutate()
    hashes = function_hashes((ROOT / "attncore" / "_masks.py").read_text())
    name = next(iter(hashes))
    mutants = [f"attncore._masks.x_{name}__mutmut_{i}" for i in (1, 2, 3)]
    old = {"hash": "0" * 12, "mutants": 5, "killed": 5, "measured": "2026-01-01"}

    def results():
        return {"modules": {"_masks": {"functions": {name: dict(old), "gone": dict(old)}}}, "mutants": []}

    r = results()
    script.record(r, "_masks", {name: mutants, "gone": []}, {mutants[0]: "killed", mutants[1]: "timeout"}, False)
    assert r["modules"]["_masks"]["functions"] == {name: old}, "an incomplete function must keep its stale entry"
    r = results()
    script.record(r, "_masks", {name: mutants}, {mutants[0]: "killed", mutants[1]: "timeout"}, True)
    entry = r["modules"]["_masks"]["functions"][name]
    assert (entry["hash"], entry["mutants"], entry["killed"]) == (hashes[name], 3, 2)
    assert [(m["mutant"], m["status"]) for m in r["mutants"]] == [(mutants[2], "not run")]
    r = results()
    script.record(r, "_masks", {name: mutants}, dict.fromkeys(mutants, "killed"), False)
    assert r["modules"]["_masks"]["functions"][name]["killed"] == 3 and not r["mutants"]


# ---- the message lines (make mutate MUTATE_ARGS=--messages) ----------------------------

MESSAGES = '''\
def describe(value):
    return f"{type(value).__name__} {value!r}"


def check(x, name):
    if x < 0:
        what = "negative" if x > -10 else "far below zero"
        raise ValueError(
            f"{name} must be >= 0, got {describe(x)}: {what}"
        )
    limit = 5
    if x > limit:
        raise ValueError(f"{name} must be at most {limit}")
    return describe(x) if x else x
'''


def test_message_lines_are_raises_and_what_only_they_read():
    """By hand on a small module: the raise statements, an assignment read only by a raise, not a
    value also read elsewhere (limit), and not a helper also used outside a message (describe)."""
    lines = message_lines({"m": MESSAGES})["m"]
    assert lines == {7, 8, 9, 10, 13}
    alone = MESSAGES.replace("return describe(x) if x else x", "return x")
    assert message_lines({"m": alone})["m"] == {1, 2, 7, 8, 9, 10, 13}, "describe now serves messages only"
    assert message_lines({"m": alone, "other": "def f(v):\n    return describe(v)\n"})["m"] == {7, 8, 9, 10, 13}, \
        "a use in another module of the package counts"


def message_results(root: Path, killed: int = 19) -> dict:
    """Results whose message rows were recorded from the code under ``root`` as it is."""
    covered = message_functions(root)
    return {"target": 0.95, "mutants": [], "modules": {m: {"functions": {}, "messages": {
        "functions": f, "mutants": 20, "killed": killed, "measured": "2026-01-01",
        "survivors": [{"mutant": f"attncore.{m}.x_f__mutmut_{i}", "status": "survived"} for i in range(20 - killed)]}}
        for m, f in covered.items() if f}}


@pytest.mark.parametrize("edit", ["message", "other line", "new raise", "outside"])
def test_a_changed_function_makes_its_message_row_stale(tmp_path, edit):
    """A message row counts the functions that hold the module's message lines: an edit to one of
    them (to its message or to any other line), or a new function with a raise, makes the row
    stale; an edit to a function without message lines does not."""
    (tmp_path / "attncore").mkdir()
    module = tmp_path / "attncore" / "_permutations.py"
    source = (ROOT / "attncore" / "_permutations.py").read_text()
    module.write_text(source)
    results = message_results(tmp_path)
    assert table(message_summary(results, tmp_path))["_permutations"][-1] == "95.0%"
    assert "out of range" in source and "perm = np.asarray(perm)" not in source
    module.write_text({
        "message": source.replace("is out of range", "lies outside 0..n-1"),
        "other line": source.replace("ok = np.zeros(arr.size, dtype=bool)", "ok = np.zeros(arr.size, bool)"),
        "new raise": source + "\n\ndef _extra(x):\n    raise ValueError(f'x is {x}')\n",
        "outside": source.replace('r"""The matrix ``P`` with', 'r"""The permutation matrix ``P`` with'),
    }[edit])
    assert module.read_text() != source
    cells = table(message_summary(results, tmp_path))["_permutations"]
    if edit == "outside":
        assert cells[-1] == "95.0%", cells
    else:
        assert cells[-1] == "stale" and not any(re.search(r"\d", c) for c in cells[2:]), cells


def test_the_message_table_says_stale_when_a_recorded_function_changed():
    """On the committed results: a message row whose recorded functions no longer hash (by the
    independent route) to what it recorded prints "stale"; a current row prints its score."""
    rows = table(message_summary(RESULTS, ROOT))
    for module, entry in RESULTS["modules"].items():
        if "messages" not in entry:
            continue
        now = hashes_by_hand((ROOT / "attncore" / f"{module}.py").read_text())
        moved = any(now.get(f) != h for f, h in entry["messages"]["functions"].items())
        if moved:
            assert rows[module][-1] == "stale", (module, rows[module])
        elif rows[module][-1] != "stale":
            assert re.fullmatch(r"\d+\.\d%|–", rows[module][-1]), (module, rows[module])


def test_each_message_entry_adds_up_and_current_rows_hold_the_target():
    """killed + the mutants listed = the message mutants; a current row holds the target among the
    mutants run, once its equivalent (and reword-only) survivors are set aside."""
    for module, entry in RESULTS["modules"].items():
        if "messages" in entry:
            m = entry["messages"]
            assert m["killed"] + len(m["survivors"]) == m["mutants"], module
            assert all(s["status"] in ("survived", "equivalent", "not run") for s in m["survivors"]), module
    for row in message_rows(RESULTS, ROOT):
        if row["state"] == "current" and row["score"] is not None:
            assert row["score"] >= RESULTS["target"], (row["module"], row["score"])


def test_a_run_enters_the_message_row_only_when_every_mutant_has_a_verdict():
    """scripts/mutate.py, record_messages: no row while a mutant lacks a verdict, unless --report-only
    (partial), which lists it as not run; the row carries the hashes of the functions with message lines."""
    script = _mutate()
    names = [f"attncore._permutations.x__check_permutation__mutmut_{i}" for i in (1, 2)]
    results = {"modules": {"_permutations": {"functions": {}}}, "mutants": []}
    assert not script.record_messages(results, "_permutations", names, {names[0]: "killed"}, partial=False)
    assert "messages" not in results["modules"]["_permutations"]
    assert script.record_messages(results, "_permutations", names, {names[0]: "killed"}, partial=True)
    entry = results["modules"]["_permutations"]["messages"]
    assert (entry["killed"], [(m["mutant"], m["status"]) for m in entry["survivors"]]) == (1, [(names[1], "not run")])
    assert script.record_messages(results, "_permutations", names, dict.fromkeys(names, "timeout"), partial=False)
    entry = results["modules"]["_permutations"]["messages"]
    assert (entry["mutants"], entry["killed"], entry["survivors"]) == (2, 2, [])
    assert entry["functions"] == {"_check_permutation": hashes_by_hand(
        (ROOT / "attncore" / "_permutations.py").read_text())["_check_permutation"]}
