"""The claims ledger: every entry is well formed and its evidence exists.

Also checks that the checker itself catches each kind of broken entry, so that
a ledger that passes here is one whose evidence really exists.
"""

import copy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from claims_ledger import cell_label, evidence_problem, ledger_problems, load_ledger  # noqa: E402


@pytest.fixture(scope="module")
def ledger():
    return load_ledger(ROOT)


def test_ledger_has_no_problems(ledger):
    assert ledger_problems(ROOT, ledger) == []


def test_ledger_is_not_empty(ledger):
    assert len(ledger["claims"]) >= 1


def test_every_notebook_evidence_cell_is_executed_code(ledger):
    """A tag on a markdown cell would be evidence that never runs."""
    import json

    for claim in ledger["claims"]:
        for item in claim["evidence"] or []:
            if "#" not in item:
                continue
            path, _, tag = item.partition("#")
            cells = json.loads((ROOT / path).read_text())["cells"]
            tagged = [c for c in cells if tag in c.get("metadata", {}).get("tags", [])]
            assert tagged and all(c["cell_type"] == "code" and c["outputs"] for c in tagged), item


GOOD = {
    "id": "example-claim",
    "source": "vaswani2017attention",
    "claim": "An example.",
    "verdict": "checked",
    "evidence": ["tests/test_softmax.py::test_shift_invariance"],
}


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"evidence": []}, "needs at least one piece of evidence"),
        ({"evidence": ["tests/test_softmax.py::test_no_such_test"]}, "no test 'test_no_such_test'"),
        ({"evidence": ["tests/no_such_file.py::test_x"]}, "no such test file"),
        ({"evidence": ["notebooks/00_softmax_shift_invariance.ipynb#no-such-tag"]}, "no cell tagged 'no-such-tag'"),
        ({"evidence": ["notebooks/missing.ipynb#tag"]}, "no such notebook"),
        ({"evidence": ["somewhere else"]}, "evidence must be"),
        ({"verdict": "plausible"}, "verdict must be one of"),
        ({"verdict": "refuted"}, "needs its correction"),
        ({"verdict": "cited", "evidence": []}, "needs a reference"),
        ({"source": "a blog I read"}, "neither a listed document nor a references.bib key"),
        ({"id": "Not An Id"}, "id must be lower-case"),
        ({"colour": "blue"}, "unknown keys colour"),
    ],
)
def test_checker_catches_broken_entries(ledger, change, expected):
    broken = copy.deepcopy(ledger)
    broken["claims"].append({**GOOD, **change})
    problems = ledger_problems(ROOT, broken)
    assert any(expected in p for p in problems), problems


def test_checker_catches_duplicates_and_missing_keys(ledger):
    broken = copy.deepcopy(ledger)
    broken["claims"] += [dict(GOOD), dict(GOOD), {"id": "lonely"}]
    problems = ledger_problems(ROOT, broken)
    assert any("duplicate id" in p for p in problems)
    assert any("missing source, claim, verdict, evidence" in p for p in problems)


def test_good_example_passes(ledger):
    fine = copy.deepcopy(ledger)
    fine["claims"].append(dict(GOOD))
    assert ledger_problems(ROOT, fine) == []


def test_parametrised_node_ids_are_accepted():
    assert evidence_problem(ROOT, "tests/test_softmax.py::test_matches_exact_arithmetic[1.0-row0]") is None


def test_cell_labels():
    assert cell_label("notebooks/00_softmax_shift_invariance.ipynb", "proof-general-n") == (
        "nb-00-softmax-shift-invariance-proof-general-n"
    )
