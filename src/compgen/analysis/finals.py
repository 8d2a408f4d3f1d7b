"""Runs kept as numbers, judged when the book is built: records of final evaluations and seed pooling.

A chapter's claims read only each run's last evaluation (``eval/<metric>[:, -1]``, one value per seed, and per
evaluation set where there are several; ``tests/figures/test_records.py`` checks it for every chapter). A record
therefore keeps, for each config, those final values per seed (:func:`entries`), and :func:`runs_from_entries` lays
them out again as runs that the chapter's own ``claims`` judge with the current claim code: no verdict is stored.
:func:`output_from_finals` is the one step from final numbers to a run's output, for these records and for the twin
records' runs of both codes (:mod:`compgen.analysis.twin`).

:func:`pool` joins runs of the same configs on several seed sets (the book's seeds and a second set, say) into one
set of runs over all their seeds, marked ``pooled``; judged by the rule for pooled runs, that gives the pooled
verdict of a claim.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from compgen import params, results
from compgen.records import Entry
from compgen.runs import Runs


def finals(output) -> dict:
    """``{"eval/<metric>": per-seed final values (nested lists)}`` of one run's output: its last evaluation."""
    return {
        k: np.round(np.asarray(v, float)[:, -1], 7).tolist()
        for k, v in output.items()
        if k.startswith("eval/") and np.ndim(v) >= 2
    }


def output_from_finals(values: dict) -> dict:
    """The output :func:`finals` was read from, cut to its last evaluation: ``eval/<metric>`` (seeds, 1, ...)."""
    return {k: np.asarray(v, float)[:, None] for k, v in values.items()}


def config_key(config) -> str:
    """A config's fields but the values of its seeds (their number stays), as sorted JSON: what identifies it across
    seed sets. The number keeps apart two configs of one chapter that differ only in their seeds (a size sweep trained
    on the first seed of a figure's three, say)."""
    fields = {k: v for k, v in results.config_dict(config).items() if k != "seeds"}
    return json.dumps({**fields, "n_seeds": len(config.seeds)}, sort_keys=True, default=str)


def entries(runs: Runs) -> list:
    """One :class:`compgen.records.Entry` per config of ``runs`` that has an output: the figures that read it, its
    config's fields and its final values."""
    found = {}
    for figure, configs in runs.figures.items():
        for cfg in configs:
            output = runs.output(cfg)
            if output is None:
                continue
            key = config_key(cfg)
            if key in found:
                found[key]["figures"].append(figure)
            else:
                found[key] = {"figures": [figure], "config": results.config_dict(cfg), "finals": finals(output)}
    return [Entry(**e) for e in found.values()]


def runs_from_entries(section_name: str, preset: str, seeds, recorded: list) -> Runs:
    """The chapter's runs at ``preset`` on ``seeds`` (its configs as the current code builds them), their outputs
    taken from ``recorded`` :class:`~compgen.records.Entry` values (:func:`entries`) where a config's fields match one,
    else ``None`` (not run). An entry whose config the current code no longer builds (a field renamed or removed
    since) matches none."""
    from compgen.notebook import chapter_configs

    sec, by_figure = chapter_configs(section_name, preset, list(seeds))
    by_key = {}
    for e in recorded:
        try:
            by_key[config_key(sec.config_from_dict(dict(e.config)))] = e
        except (params.ParameterError, TypeError):  # TypeError: a field the config class no longer has
            continue
    outputs = {}
    for configs in by_figure.values():
        for cfg in configs:
            entry = by_key.get(config_key(cfg))
            ok = entry is not None and entry.seeds == tuple(cfg.seeds)
            outputs[cfg] = output_from_finals(entry.finals) if ok else None
    return Runs(sec, preset, by_figure, outputs)


def missing(runs: Runs) -> list:
    """The figures whose configs ``runs`` has no output for (a record made with other configs, or not at all)."""
    return [f for f, configs in runs.figures.items() if any(runs.output(c) is None for c in configs)]


def _same_but_seeds(a, b) -> bool:
    return {**results.config_dict(a), "seeds": 0} == {**results.config_dict(b), "seeds": 0}


def _joined(cfg, parts):
    """``cfg`` on the seeds of ``parts`` (its pair in every set, in order), or ``None`` where there is no pair or
    the current code refuses the config on those seeds."""
    if parts is None:
        return None
    try:
        return dataclasses.replace(cfg, seeds=tuple(s for c in parts for s in c.seeds))
    except params.ParameterError:
        return None


def pool(*sets: Runs) -> Runs:
    """``sets`` (runs of the same chapter and preset on disjoint seed sets) as one set of runs over all their seeds:
    each figure's configs paired in grid order (their fields but the seeds must agree), their final values joined
    seed after seed; a config any set lacks is not run, and so is every config of a figure whose configs differ
    between the sets (a field derived from the seeds, or a record made at other configs): it keeps the first set's
    config, without an output. Only final evaluations are kept (what the claims read)."""
    first = sets[0]
    seeds = [s for runs in sets for s in runs.seeds]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"pool: the seed sets overlap ({seeds})")
    figures, outputs = {}, {}
    for figure, configs in first.figures.items():
        others = [runs.figures.get(figure, []) for runs in sets]
        paired = all(len(o) == len(configs) for o in others) and all(
            _same_but_seeds(cfg, o[i]) for o in others for i, cfg in enumerate(configs)
        )
        figures[figure] = []
        for i, cfg in enumerate(configs):
            parts = [o[i] for o in others] if paired else None
            together = _joined(cfg, parts)
            figures[figure].append(cfg if together is None else together)
            outputs[figures[figure][-1]] = None
            found = [None] if together is None else [runs.output(c) for runs, c in zip(sets, parts)]
            if all(f is not None for f in found):
                outputs[together] = {
                    k: np.concatenate([np.asarray(f[k], float)[:, -1:] for f in found])
                    for k in found[0]
                    if k.startswith("eval/")
                }
    return Runs(first.section, first.preset, figures, outputs, pooled=True)
