"""A chapter is one value: its claims declared once with stable ids, the figures they read and where the book shows
them, its comparisons and its twin description, all read from the one registry."""

import dataclasses
import re
from pathlib import Path

import pytest

from compgen import bridge, catalog, section
from compgen.analysis import chapters
from compgen.analysis import claims as C
from compgen.analysis.chapter import Chapter
from compgen.analysis.compare import compared
from compgen.figures.compare import FIGURES

BOOK = Path(__file__).resolve().parents[2] / "book"


def _judged(name, runs_of):
    return chapters.get(name).claims(runs_of(name, "paper", lambda c: None))


@pytest.mark.parametrize("name", list(chapters.CHAPTERS))
def test_pairing_follows_the_id_not_the_wording(runs_of, name):
    """A claim reworded (a new criterion text, a new statement) is still found as itself on other runs, and never as
    another claim: the results page's seed sets, the pooled column and the twins pair by id."""
    found = _judged(name, runs_of)
    reworded = [dataclasses.replace(c, claim=f"reworded: {c.claim}", criterion="new words") for c in found]
    assert [C.find(reworded, c).claim for c in found] == [f"reworded: {c.claim}" for c in found]
    assert C.find(reworded, dataclasses.replace(found[0], id="no such claim")) is None


@pytest.mark.parametrize("name", list(chapters.CHAPTERS))
def test_every_claim_is_shown_under_a_figure_its_chapter_labels(runs_of, name):
    """Each claim's anchor is a label of its chapter's notebook, so the figure there is handed it
    (:meth:`Chapter.shown_at`) and the results page links to it."""
    labels = set(re.findall(r"^# \(([\w-]+)\)=$", (BOOK / f"{name}.py").read_text(), re.M))
    chapter = chapters.get(name)
    for claim in _judged(name, runs_of):
        assert claim.anchor.startswith("#") and claim.anchor[1:] in labels, claim.anchor
    shown = [c.id for label in sorted(labels) for c in chapter.shown_at(runs_of(name, "paper", lambda c: None), label)]
    assert sorted(shown) == sorted(c.id for c in _judged(name, runs_of))  # each claim under exactly one figure


def test_a_chapter_refuses_two_claims_with_one_id_or_another_sections_claim():
    spec = C.ClaimSpec("goals", "Fig. 4E", "a claim", "a criterion", id="fig4e", reads=("fig4ef",))
    with pytest.raises(ValueError, match="distinct ids"):
        Chapter("goals", "Goals", lambda runs: [], (spec, spec))
    with pytest.raises(ValueError, match="its own section"):
        Chapter("preferences", "Preferences", lambda runs: [], (spec,))
    with pytest.raises(ValueError, match="give its id"):
        C.ClaimSpec("goals", "Fig. 4E", "a claim", "a criterion")


def test_comparisons_and_twins_name_figures_their_claims_read():
    """Every comparison is drawn by its chapter's figure module and reads figures of its section; a twin trains only
    figures that some claim of its chapter reads, and moves worlds only at presets that exist."""
    assert {s: set(FIGURES[s]) for s in FIGURES} == {s: set(c.comparisons) for s, c in compared().items()}
    for name, chapter in chapters.CHAPTERS.items():
        figures = set(catalog.get(name).figures("paper"))
        for figure in chapter.comparisons:
            assert chapter.reads(figure)[0] == figure and set(chapter.reads(figure)) <= figures
        if chapter.twin is not None:
            read = {r for s in chapter.specs for r in s.reads}
            assert set(chapter.twin.figures) <= read, name
            assert all(p in section.PRESET_NAMES or bridge.parse(p) for p in chapter.twin.matched)


def test_an_unknown_chapter_is_one_line_naming_the_choices():
    from compgen.params import ParameterError

    with pytest.raises(ParameterError, match="chapter must be one of .*teacher_student"):
        chapters.get("teacher-student")
