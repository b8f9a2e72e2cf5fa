"""The claims ledger: every entry is well formed, its evidence exists and can fail.

Also checks that the checker itself catches each kind of broken entry (a missing
field, missing evidence, an evidence cell without an assert or with one that
cannot fail, a "proved" row without a symbolic proof), so that a ledger that
passes here is one whose evidence really exists and really checks something.
"""

import copy
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from ledger_checks import (  # noqa: E402
    SOURCE_FILE,
    assert_problems,
    cell_label,
    errata_rows,
    evidence_problem,
    ledger_problems,
    load_ledger,
    reader_text_problems,
    strength_problems,
    overcorrections,
    tautology,
    unmarked_corrections,
)


@pytest.fixture(scope="module")
def ledger():
    return load_ledger(ROOT)


def test_ledger_is_well_formed(ledger):
    """Keys, verdict fields and the existence of every piece of evidence."""
    problems = ledger_problems(ROOT, ledger, strength=False)
    assert not problems, "\n".join(problems)


def test_ledger_evidence_can_fail(ledger):
    """Every evidence cell asserts, no assert is a tautology, every proved row has a symbolic proof."""
    problems = ledger_problems(ROOT, ledger)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


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
    "catches": "A softmax that forgets to subtract the same shift from every logit.",
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
        ({"verdict": "refuted", "catches": None}, "needs its correction"),
        ({"verdict": "qualified", "catches": None}, "needs 'hypothesis:'"),
        ({"verdict": "qualified", "catches": None, "hypothesis": "  "}, "needs 'hypothesis:'"),
        ({"catches": None}, "needs 'catches:'"),
        ({"catches": ""}, "needs 'catches:'"),
        ({"verdict": "cited", "catches": None, "evidence": [], "reference": "vaswani2017attention"},
         "needs 'locator:'"),
        ({"verdict": "cited", "catches": None, "evidence": [], "locator": "Table 1"}, "needs a reference"),
        ({"verdict": "proved", "catches": None, "evidence": ["notebooks/00_softmax_shift_invariance.ipynb#check-numeric"]},
         "needs an evidence cell tagged 'symbolic'"),
        ({"verdict": "qualified", "hypothesis": "n >= 2"}, "'catches:' belongs to checked claims only"),
        ({"correction": "something"}, "'correction:' belongs to refuted claims only"),
        ({"hypothesis": "something"}, "'hypothesis:' belongs to qualified claims only"),
        ({"source": "a blog I read"}, "neither a listed document nor a references.bib key"),
        ({"id": "Not An Id"}, "id must be lower-case"),
        ({"colour": "blue"}, "unknown keys colour"),
        ({"corrects": "a typo"}, "corrects: 'a typo' is not of type 'object'"),
        ({"corrects": {"slip": "writes j twice"}}, "corrects: 'fix' is a required property"),
        ({"corrects": {"slip": "writes j twice", "fix": "  "}}, "corrects.fix: '  ' does not match"),
        ({"corrects": {"slip": "x", "fix": "y", "why": "z"}}, "Additional properties are not allowed"),
        ({"note": 42}, "note: 42 is not of type 'string'"),
        ({"corrects": {"slip": "x", "fix": "y", "of": "notes.txt"}}, "corrects.of 'notes.txt' is not a listed"),
    ],
)
def test_checker_catches_broken_entries(ledger, change, expected):
    entry = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    broken = {"sources": ledger["sources"], "claims": [entry]}
    problems = ledger_problems(ROOT, broken)
    assert any(expected in p for p in problems), problems


def test_checker_catches_duplicates_and_missing_keys(ledger):
    broken = copy.deepcopy(ledger)
    broken["claims"] += [dict(GOOD), dict(GOOD), {"id": "lonely"}]
    problems = ledger_problems(ROOT, broken)
    assert any("duplicate id" in p for p in problems)
    assert any("missing source, claim, verdict, evidence" in p for p in problems)


def test_good_example_passes(ledger):
    fine = {"sources": ledger["sources"], "claims": [dict(GOOD)]}
    assert ledger_problems(ROOT, fine) == []
    for extra in (
        {"verdict": "qualified", "catches": None, "hypothesis": "The row has at least two keys."},
        {"verdict": "refuted", "catches": None, "correction": "What is true instead."},
        {"verdict": "cited", "catches": None, "reference": "vaswani2017attention", "locator": "Section 3.2.1"},
    ):
        entry = {k: v for k, v in {**GOOD, **extra}.items() if v is not None}
        assert ledger_problems(ROOT, {"sources": ledger["sources"], "claims": [entry]}) == []


def test_parametrised_node_ids_are_accepted():
    assert evidence_problem(ROOT, "tests/test_softmax.py::test_matches_exact_arithmetic[1.0-row0]") is None


def test_cell_labels():
    assert cell_label("notebooks/00_softmax_shift_invariance.ipynb", "proof-general-n") == (
        "nb-00-softmax-shift-invariance-proof-general-n"
    )


# ---- evidence that can fail: the checker on scratch notebooks ----------------

NOTEBOOK = "notebooks/00_softmax_shift_invariance.ipynb"


def scratch_root(tmp_path, edit=None):
    """A scratch copy of the repository's bibliography and of one notebook, edited by ``edit``."""
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / "references.bib", tmp_path / "book" / "references.bib")
    (tmp_path / "notebooks").mkdir()
    nb = json.loads((ROOT / NOTEBOOK).read_text())
    if edit:
        edit(nb["cells"])
    (tmp_path / NOTEBOOK).write_text(json.dumps(nb))
    return tmp_path


def tagged(cells, tag):
    return next(c for c in cells if tag in c["metadata"].get("tags", []))


def set_source(cells, tag, source):
    tagged(cells, tag)["source"] = source


def entry(verdict="checked", tags=("check-numeric",)):
    claim = {**GOOD, "verdict": verdict, "evidence": [f"{NOTEBOOK}#{t}" for t in tags]}
    if verdict != "checked":
        claim.pop("catches")
    return claim


def problems_in(root, claim):
    return ledger_problems(root, {"sources": {}, "claims": [claim]})


def test_scratch_copy_of_a_sound_notebook_passes(tmp_path):
    root = scratch_root(tmp_path)
    assert problems_in(root, entry()) == []


def test_assert_free_evidence_cell_is_rejected(tmp_path):
    """The real cell with its assert turned into a print: it still prints True, and fails the ledger."""
    def drop_asserts(cells):
        cell = tagged(cells, "check-numeric")
        source = "".join(cell["source"])
        assert "assert all(within)" in source
        cell["source"] = source.replace("assert all(within)", "print(all(within))")

    root = scratch_root(tmp_path, drop_asserts)
    problems = problems_in(root, entry())
    assert any("check-numeric has no assert" in p for p in problems), problems


@pytest.mark.parametrize(
    "line",
    [
        "assert True",
        "assert (all(within), 'every trial within tolerance')",
        "assert np.allclose(logits, logits)",
        "assert np.array_equal(softmax(logits), softmax(logits))",
        "assert error == error",
        "assert all(within) or True",
    ],
)
def test_tautological_evidence_cell_is_rejected(tmp_path, line):
    """The real cell with its assert replaced by one that cannot fail."""
    def tautologise(cells):
        cell = tagged(cells, "check-numeric")
        source = "".join(cell["source"])
        # the cell's whole assert line (it may assert more than all(within)) becomes ``line``
        mutated = re.sub(r"^assert all\(within\).*$", line, source, count=1, flags=re.M)
        assert mutated != source and line in mutated
        cell["source"] = mutated

    root = scratch_root(tmp_path, tautologise)
    problems = problems_in(root, entry())
    assert any("check-numeric has an assert that cannot fail" in p for p in problems), problems


def test_magics_and_shell_lines_are_ignored_when_parsing():
    source = "%timeit f()\n!ls\nfor i in range(2):\n    %time g()\nassert f() > 0\n"
    assert assert_problems(source) == []
    assert assert_problems("%%time\nprint(1)\n") == ["has no assert (a printed False would not fail)"]


def test_assert_inside_a_string_does_not_count():
    """The check reads the syntax tree, not the text."""
    assert assert_problems('print("assert x == y")\n# assert ok\n') != []


@pytest.mark.parametrize(
    "test, cannot_fail",
    [
        ("True", True),
        ("1", True),
        ("'a message'", True),
        ("(x == y, 'message')", True),
        ("f'{x}'", True),
        ("x == x", True),
        ("0 <= x <= x", True),
        ("np.allclose(a @ b, a @ b)", True),
        ("np.testing.assert_allclose(a, a)", True),
        ("np.isclose(f(x), f(x), atol=1e-9)", True),
        ("all(a == a)", True),
        ("np.all(x.T == x.T)", True),
        ("not False", True),
        ("True and True", True),
        ("x > 0 or True", True),
        ("False", False),
        ("x == y", False),
        ("x != x", False),
        ("np.allclose(a @ b, b @ a)", False),
        ("np.array_equal(f(x), g(x))", False),
        ("all(d == 0 for d in differences)", False),
        ("x > 0 and True", False),
        ("rank <= min(d, n)", False),  # always true mathematically, but not syntactically: a reviewer's job
    ],
)
def test_tautology_detector(test, cannot_fail):
    import ast

    node = ast.parse(f"assert {test}").body[0].test
    assert bool(tautology(node)) is cannot_fail


# ---- "proved" needs a symbolic proof -----------------------------------------

def add_symbolic_tag(tag):
    def edit(cells):
        tags = tagged(cells, tag)["metadata"]["tags"]
        if "symbolic" not in tags:
            tags.append("symbolic")
    return edit


def remove_symbolic_tag(tag):
    def edit(cells):
        tags = tagged(cells, tag)["metadata"]["tags"]
        tags[:] = [t for t in tags if t != "symbolic"]
    return edit


def test_symbolic_proof_over_integer_size_is_accepted(tmp_path):
    """proof-general-n declares n = Symbol('n', integer=True, positive=True) and asserts."""
    root = scratch_root(tmp_path, add_symbolic_tag("proof-general-n"))
    assert problems_in(root, entry("proved", ("proof-general-n", "check-numeric"))) == []


def test_proved_row_without_symbolic_cell_is_rejected(tmp_path):
    """The real notebook tags proof-general-n symbolic; the scratch copy drops that tag."""
    root = scratch_root(tmp_path, remove_symbolic_tag("proof-general-n"))
    problems = problems_in(root, entry("proved", ("proof-general-n", "proof-small-n")))
    assert any("needs an evidence cell tagged 'symbolic'" in p for p in problems), problems


def test_symbolic_tag_on_a_fixed_size_proof_is_rejected(tmp_path):
    """proof-small-n loops over n = 1..6 with concrete symbols: no integer size symbol."""
    root = scratch_root(tmp_path, add_symbolic_tag("proof-small-n"))
    problems = problems_in(root, entry("proved", ("proof-small-n",)))
    assert any("uses no size symbol declared integer" in p for p in problems), problems


def test_symbolic_tag_on_a_numeric_cell_is_rejected(tmp_path):
    root = scratch_root(tmp_path, add_symbolic_tag("check-numeric"))
    problems = problems_in(root, entry("proved", ("check-numeric",)))
    assert any("does not use sympy" in p for p in problems), problems


def test_symbolic_cell_must_assert(tmp_path):
    def edit(cells):
        add_symbolic_tag("proof-general-n")(cells)
        cell = tagged(cells, "proof-general-n")
        cell["source"] = "".join(cell["source"]).replace("assert factored == plain", "")

    root = scratch_root(tmp_path, edit)
    problems = problems_in(root, entry("proved", ("proof-general-n",)))
    assert any("proof-general-n has no assert" in p for p in problems), problems


def test_integer_size_symbol_may_come_from_an_earlier_cell(tmp_path):
    """The size symbol is declared in the set-up cell and used in the tagged one."""
    def edit(cells):
        add_symbolic_tag("proof-general-n")(cells)
        setup = cells[1]
        setup["source"] = "".join(setup["source"]) + '\nn = sp.Symbol("n", integer=True, positive=True)\n'
        cell = tagged(cells, "proof-general-n")
        cell["source"] = "".join(cell["source"]).replace(
            'n = sp.Symbol("n", integer=True, positive=True)\n', ""
        ).replace('i, j = sp.symbols("i j", integer=True, positive=True)', 'i, j = sp.symbols("i j", positive=True)')

    root = scratch_root(tmp_path, edit)
    assert problems_in(root, entry("proved", ("proof-general-n",))) == []


def test_strength_problems_ignore_pytest_evidence():
    assert strength_problems(ROOT, {"verdict": "checked", "evidence": ["tests/test_softmax.py::test_shift_invariance"]}) == []


# ---- the errata page: complete by construction ---------------------------------

def test_errata_page_lists_refuted_qualified_and_corrected_rows(ledger):
    """The page's rows are exactly the refuted, the qualified and those with ``corrects:``."""
    listed = {c["id"] for c in errata_rows(ledger)}
    expected = {c["id"] for c in ledger["claims"] if c["verdict"] in ("refuted", "qualified") or "corrects" in c}
    assert listed == expected
    assert any(c["verdict"] not in ("refuted", "qualified") for c in errata_rows(ledger))


def test_every_row_that_describes_a_slip_is_on_the_errata_page(ledger):
    """A row whose text says the source got something wrong carries ``corrects:`` (or is refuted/qualified)."""
    problems = unmarked_corrections(ledger)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "note",
    [
        "The notes write the summand as $q_{ij}k_{jl}$, an index typo.",
        "The post writes the covariance as $1_d$; it is the identity.",
        "The document calls it a tensor product; the sign is garbled.",
        "The notes credit the paper with an argument it does not make.",
        "The document's sentence garbles the constraint as a parameter.",
        "The post misstates the reach of the citation.",
        "The document's citation supports less: this row corrects the reach of that citation.",
    ],
)
def test_unmarked_correction_is_found_and_corrects_clears_it(ledger, note):
    row = {**GOOD, "note": note}
    assert unmarked_corrections({"claims": [row]}) != []
    fixed = {**row, "corrects": {"slip": "What the source writes.", "fix": "What is right."}}
    assert unmarked_corrections({"claims": [fixed]}) == []
    assert ledger_problems(ROOT, {"sources": ledger["sources"], "claims": [fixed]}) == []


# corrections the course makes under checked, proved or cited rows: each must stay on the errata page
CORRECTIONS = {
    "variance-derivation-typo": "index typo in the variance derivation",
    "ln-parameter-names": "the letter D for the variance and the width",
    "scaling-purpose": "the 'local extremum' reason for the scale",
    "sinusoid-motivation-attribution": "the argument credited to the sinusoid's authors",
    "synth-mixture-weights": "the constraint sum(alpha) = 1 called a learnable parameter",
    "bias-prior-conjecture": "the reach of the PaLM citation",
    "synth-mixtures-keep-token-to-token": "no Synthesizer said to keep the token-to-token form",
    "la-softmax-sum-index": "the summation index of the first display",
    "la-reused-letters": "n and m with two meanings each",
    "value-bias-constant": "the vector of ones written 1^T in R^n",
    "permutation-matrix-definition": "the chained memberships of Pi",
    "rope-complex-matrix": "the spaces of RoPE's complex form",
    "ffn-cost": "the FFN written with one matrix",
    "la-infinite-features-no-lower-bound": "the inference from infinitely many features to rank",
    "invariance-definitions-domain": "invariance defined for maps from R^n to R^n",
    "synth-multi-head-is-repetition": "multi-head attention described without W_O",
    "notes-multi-head-undefined": "multi-head attention named, not defined",
    "promised-transformer-invariance": "the promised proof that the Transformer is invariant",
}


# rows regraded because the source is right in its own setting: not errata
NOT_ERRATA = ("weights-open-interval", "normalisation-avoids-overflow", "cost-list-omits-output-projection",
              "rp-urpe-shorter-inputs", "self-attention-not-invariant",
              # the post assumes phi(Q) in R^(n x d); the bound d is right there
              "la-rank-head-size",
              # the post says the rows "need not" sum to 1 and that URPE "can" solve the probe
              "rp-urpe-breaks-row-sums",
              # constant queries and keys give a constant score matrix, whatever the width
              "synth-random-is-fixed-q-and-k",
              # O(L^2) with D fixed, a hypothesis the notes state in the same sentence
              "total-cost-quadratic",
              # the notes say in the same sentence that FFN and LN act on each token separately,
              # and the post's Transformer is that standard block
              "attention-only-token-mixer", "rp-attention-only-token-interaction",
              # a true claim: the post gives no error bound, an omission the chapter fills, not an error
              "la-deterministic-assessable",
              # one width d' for queries, keys and values is a special case (the Transformer's
              # d_k = d_v), not a slip
              "synth-attention-is-mixing",
              # notations some authors use, each with no other meaning in its document: 1_d for
              # the identity, and an otimes the same sentence calls elementwise
              "la-performer-covariance", "synth-factorized-dense-tiling")


@pytest.mark.parametrize("cid", NOT_ERRATA)
def test_right_in_its_own_setting_is_not_an_erratum(ledger, cid):
    row = next(c for c in ledger["claims"] if c["id"] == cid)
    assert row["verdict"] in ("checked", "proved") and row not in errata_rows(ledger)


def test_no_row_whose_note_says_the_source_is_right_is_an_erratum(ledger):
    """The other half of the errata page's calibration: a listed row must not call the source right."""
    problems = overcorrections(ledger)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "note",
    [
        "The statement is right in its own setting: the post assumes a width-preserving map.",
        "The post's statement is right: it says the rows need not sum to 1.",
        "The notes are right for the attention they define.",
        "Correct as a layer, but here the scale and the shift carry each other's names.",
        "The statement holds under the hypothesis its own notation implies.",
        "Read with the usual scoping the post's value is the right one.",
        "The words in the same place say which product is meant, so this is a notation convention.",
    ],
)
def test_a_row_that_calls_the_source_right_is_not_listed(note):
    listed = {**GOOD, "note": note, "corrects": {"slip": "What the source writes.", "fix": "What is right."}}
    assert overcorrections({"claims": [listed]}) != []
    assert overcorrections({"claims": [{**GOOD, "note": note}]}) == []
    assert unmarked_corrections({"claims": [{**GOOD, "note": note}]}) == []


def test_a_correction_that_calls_the_source_right_is_not_listed():
    """The words are looked for in the correction itself too, not only in the note."""
    slip = "The product is written with a tensor symbol; the words beside it make it a notation convention."
    listed = {**GOOD, "corrects": {"slip": slip, "fix": "The elementwise product."}}
    assert overcorrections({"claims": [listed]}) != []
    clash = {**GOOD, "corrects": {"slip": "One letter is both the free and the summation index.",
                                  "fix": "A letter of its own for the bound index."}}
    assert overcorrections({"claims": [clash]}) == []


def test_an_empirical_reading_is_cited_not_graded_as_expressivity(ledger):
    """The document's "not degenerate" is its reading of a results table: cited, not qualified."""
    row = next(c for c in ledger["claims"] if c["id"] == "synth-not-degenerate")
    assert row["verdict"] == "cited" and row not in errata_rows(ledger)


@pytest.mark.parametrize("cid", sorted(CORRECTIONS))
def test_known_corrections_are_on_the_errata_page(ledger, cid):
    row = next(c for c in ledger["claims"] if c["id"] == cid)
    assert row in errata_rows(ledger), CORRECTIONS[cid]
    assert row.get("corrects") or row["verdict"] in ("refuted", "qualified")


def test_a_correction_of_a_source_document_is_listed_under_it(ledger):
    """scaling-purpose rests on the Transformer paper but corrects the lecture notes."""
    from ledger_checks import errata_source

    row = next(c for c in ledger["claims"] if c["id"] == "scaling-purpose")
    assert row["source"] not in ledger["sources"]
    assert errata_source(row) in ledger["sources"]


def test_one_source_sentence_has_one_verdict(ledger):
    """The RoPE sentence on complex numbers was once two rows with two verdicts."""
    ids = {c["id"] for c in ledger["claims"]}
    assert "rope-complex-field" not in ids and "rope-complex-matrix" in ids


# ---- reader text: no process talk, no source file names ------------------------

def test_ledger_text_has_no_process_talk_or_file_names(ledger):
    problems = reader_text_problems(ledger)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "note, what",
    [
        ("Re-checked for issue 13: nothing found.", "process talk"),
        ("An earlier version of this row said otherwise.", "process talk"),
        ("Found in the proof-read of the notes.", "process talk"),
        ("Kept as refuted after review.", "process talk"),
        ("See 002_4e2776c27ee7706d.txt.", "a source file name"),
    ],
)
def test_reader_text_checker_catches(note, what):
    problems = reader_text_problems({"claims": [{**GOOD, "note": note}], "sources": {}})
    assert any(what in p for p in problems), problems


def _page_files():
    patterns = ("book/**/*.md", "book/**/*.rst", "book/**/*.bib", "notebooks/*.md", "notebooks/*.ipynb",
                "_config.yml")
    for pattern in patterns:
        yield from ROOT.glob(pattern)


def test_no_page_names_a_source_file():
    """Readers cannot open the source documents' files: pages cite their public origin."""
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in _page_files()
             for m in SOURCE_FILE.finditer(p.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_source_file_pattern_matches_every_seed_name():
    """The pattern the page checks use does match the names of the source documents."""
    seeds = ROOT.parent / "shared" / "seeds"
    names = [p.name for p in seeds.glob("*.txt")] if seeds.is_dir() else []
    names += ["000_ba8614a4608a9186.txt", "003_52d3c8fa058639d9"]
    assert all(SOURCE_FILE.fullmatch(n) for n in names)
    # the ledger keys its documents by name, never by the file name of a copy
    keys = list(load_ledger(ROOT)["sources"])
    assert keys and not any(SOURCE_FILE.search(k) for k in keys), keys


def test_ledger_pages_cover_every_source_once(ledger):
    """The ledger is spread over pages (one per source document, one for published work); each row
    is on exactly one of them, so its label claim-<id> is defined once."""
    import re

    pages = sorted((ROOT / "book" / "appendix").glob("claims_*.md"))
    named = [key for page in pages
             for key in re.search(r"^:sources: (.+)$", page.read_text(encoding="utf-8"), re.M).group(1).split()]
    assert sorted(named) == sorted([*ledger["sources"], "published"]), named
