"""Rules every chapter page keeps, checked on its MyST source."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def chapter_pages():
    """The chapter pages of _toc.yml (the landing chapter and the numbered ones; not the appendices)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [
        chapter["file"]
        for part in toc["parts"] if part.get("caption") in ("Start here", "Chapters")
        for chapter in part["chapters"]
    ]


@pytest.mark.parametrize("page", chapter_pages())
def test_chapter_ends_with_three_exercises_with_hidden_solutions(page):
    text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
    exercises = re.findall(r"^`{3,}\{exercise\}.*?\n:label: ([\w-]+)", text, flags=re.M)
    solutions = dict(re.findall(r"^`{3,}\{solution\} ([\w-]+)\n((?::[^\n]*\n)*)", text, flags=re.M))
    assert len(exercises) >= 3, f"{page}: {len(exercises)} labelled exercises"
    for label in exercises:
        assert label in solutions, f"{page}: exercise {label} has no solution"
        assert ":class: dropdown" in solutions[label], f"{page}: the solution of {label} is not hidden"


HAND_NUMBERED = re.compile(r"\b(Theorem|Lemma|Proposition|Equation|Eq\.|Figure|Fig\.|Table|Section)\s+\(?\d+(\.\d+)*\)?")


@pytest.mark.parametrize("page", chapter_pages())
def test_numbered_things_are_referenced_by_label(page):
    """Numbers change when a chapter grows; {prf:ref}, {eq}, {numref} keep up, hand-typed ones do not."""
    text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
    prose = re.sub(r"`{3,}[^\n]*\n.*?`{3,}", "", text, flags=re.S)  # not inside code or directives
    hits = [m.group(0) for m in HAND_NUMBERED.finditer(prose)]
    assert not hits, f"{page}: hand-numbered references {hits}"

