"""A chapter's runs as the analysis and the figures read them: the configs of each figure and their outputs.

Pure data, below the engine: :mod:`compgen.notebook` makes them from a store, :mod:`compgen.analysis.finals` from
records of final numbers, :mod:`compgen.analysis.twin` from the authors' runs; the analysis judges them and the
figures draw them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Runs:
    """A chapter's runs: the configs of each figure at a preset, and their outputs (``None``: not stored)."""

    section: object
    preset: str
    figures: dict
    outputs: dict
    wall_s: float = 0.0
    trained: int = 0
    store: object = None  # the compgen.results.Store they came from
    pooled: bool = False  # runs of several seed sets joined (compgen.analysis.finals.pool): judged by the pooled rule

    def configs(self, figure, **where):
        """The configs of ``figure`` whose fields equal ``where`` (e.g. ``model="anil"``), in grid order."""
        return [c for c in self.figures.get(figure, []) if all(getattr(c, k) == v for k, v in where.items())]

    def one(self, figure, **where):
        """The single config of ``figure`` matching ``where``, or ``None``."""
        found = self.configs(figure, **where)
        return found[0] if found else None

    def output(self, cfg):
        return None if cfg is None else self.outputs.get(cfg)

    @property
    def seeds(self):
        return tuple(sorted({s for cs in self.figures.values() for c in cs for s in c.seeds}))
