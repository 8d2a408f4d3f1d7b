"""A chapter of the book as one value: :class:`Chapter`, declared once in the chapter's analysis module
(``compgen.analysis.<section>.CHAPTER``) and gathered in :data:`compgen.analysis.chapters.CHAPTERS`.

The results page, the twin tables, :func:`compgen.analysis.compare.compare`, the figures and the notebooks read a
chapter from that one registry: its title, whether its claims are the paper's, the claims it judges (each
:class:`ClaimSpec` with its stable id and the figures it reads), the comparisons any learner can enter, and how its
twin runs with the authors' code are laid out (:class:`Twin`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from compgen.analysis.claims import ClaimSpec


@dataclass(frozen=True)
class Twin:
    """How a chapter's claims are tested with the authors' implementation (:mod:`compgen.analysis.twin`).

    ``figures``: the figures the twins train, in training order; ``rows``: how a config appears in the twin table,
    ``{column: config fields -> cell}``; ``headlines``: the final numbers the tables show, ``{label: (metric,
    evaluation set or None, scale)}``; ``matched``: where the reference cannot express a preset's world, the nearest
    one it does, ``{preset: {figure: config changes}}`` (ours are trained there too)."""

    figures: tuple
    rows: Mapping[str, Callable]
    headlines: Mapping[str, tuple]
    matched: Mapping[str, Mapping] = field(default_factory=dict)


@dataclass(frozen=True)
class Chapter:
    """One chapter: its section's name, its title, ``claims`` (a :class:`compgen.runs.Runs` -> ``[Claim]``, every
    claim of ``specs`` judged), ``specs`` (the claims, declared once), ``comparisons`` (``{figure: claims(runs,
    learners)}``: a learner in the hypernetworks' place judged by the claims of ``figure``, on the runs of the figures
    those claims read, :meth:`reads`), ``twin`` (or ``None``) and ``beyond_the_paper`` (claims that are not the
    paper's, counted apart)."""

    name: str
    title: str
    claims: Callable
    specs: tuple[ClaimSpec, ...]
    comparisons: Mapping[str, Callable] = field(default_factory=dict)
    twin: Twin | None = None
    beyond_the_paper: bool = False

    def __post_init__(self):
        ids = [s.id for s in self.specs]
        if len(set(ids)) != len(ids) or any(s.section != self.name for s in self.specs):
            raise ValueError(f"chapter {self.name!r}: its claims need distinct ids and its own section")

    def reads(self, figure: str) -> tuple:
        """The figures whose runs the claims of ``figure`` (those whose own figure it is) read, ``figure`` first."""
        return tuple(dict.fromkeys(r for s in self.specs if s.reads[0] == figure for r in s.reads))

    def shown_at(self, runs, label: str) -> list:
        """The claims the book shows under the figure labelled ``label`` (their anchor), judged on ``runs``: what a
        chapter's figure function is handed, so that it lists no claim of its own."""
        return [c for c in self.claims(runs) if c.anchor == f"#{label}"]


# How a config appears in a twin table: cells that several chapters share (config fields -> text).
def steps_cell(fields) -> str:
    return f"{fields['outer_steps']:,} × {fields['meta_batch']}"


def support_cell(fields) -> str:
    return fields["split"].replace("_", "-")


def model_cell(fields) -> str:
    return fields["model"]


def modules_hot_cell(fields) -> str:
    return f"{fields['n_modules']}, {fields['max_hot']}"
