"""Numbers read from runs, as the claims and the figures both read them: final values per seed, a learner against
the better of ANIL and MAML paired by seed, size sweeps as grids."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compgen.runs import Runs

SPLITS = ("random", "non_compositional")  # compositional and non-compositional support, in that order
MONOLITHIC = ("anil", "maml")


def final(output, key, set_index=None, scale=1.0):
    """The value of ``eval/<key>`` at the last evaluation per seed, on evaluation set ``set_index``: (seeds,)."""
    values = np.asarray(output[f"eval/{key}"])[:, -1]
    return scale * (values if set_index is None else values[:, set_index])


def learners_of(runs: Runs, figure: str) -> tuple:
    """The learners of ``figure``'s configs in grid order: the paper's, then any other compared with them."""
    return tuple(dict.fromkeys(c.model for c in runs.configs(figure)))


def best_per_seed(pairs, seeds, higher=True):
    """Per seed of ``seeds``, the best value over the ``(config, per-seed values)`` pairs that ran that seed
    (a learner run with fewer seeds still counts where it ran): (len(seeds),); NaN where none ran it."""
    pick = np.nanmax if higher else np.nanmin
    out = []
    for seed in seeds:
        values = [v[c.seeds.index(seed)] for c, v in pairs if seed in c.seeds]
        out.append(pick(values) if values else np.nan)
    return np.asarray(out, float)


def on_seeds(cfg, values, seeds):
    """``values`` (per seed of ``cfg``) on ``seeds``, in that order: the one way figures pair seeds."""
    return np.asarray(values)[[cfg.seeds.index(s) for s in seeds]]


@dataclass
class Versus:
    """A hypernetwork against the monolithic learners (ANIL, MAML) in one figure, paired by seed: ``seeds`` (the
    hypernetwork's under random support), ``hnet[split]`` its values on them, ``mono[split]`` the better of ANIL/MAML
    per seed (:func:`best_per_seed`) and ``mono_runs[split]`` their ``(config, per-seed values)``; a split whose
    runs are not stored is absent."""

    seeds: tuple
    hnet: dict
    mono: dict
    mono_runs: dict


def versus_monolithic(runs: Runs, figure: str, model: str, value, higher=True, splits=SPLITS) -> Versus | None:
    """The comparison every chapter's "the hypernetwork beats the better of ANIL/MAML" claim reads (Fig. 3B, 4C,
    4E/F): ``value(cfg, output)`` gives a config's per-seed values (``higher``: better). ``None`` if the
    hypernetwork's random-support run is not stored; a split enters the monolithic side only when every monolithic
    learner the figure trains on it is stored (a partial record compares with none rather than with one of them)."""

    def stored(model, split):  # the config of ``model`` on ``split`` if its runs are stored, else None
        cfg = runs.one(figure, model=model, split=split)
        return cfg if runs.output(cfg) is not None else None

    cfg = stored(model, splits[0])
    if cfg is None:
        return None
    seeds = cfg.seeds
    hnet, mono, mono_runs = {}, {}, {}
    for split in splits:
        own = stored(model, split)
        if own is not None:
            hnet[split] = on_seeds(own, value(own, runs.output(own)), seeds)
        # the better of the monolithic learners the figure has: all of them stored, or no comparison on this split
        learners = [c for c in (runs.one(figure, model=m, split=split) for m in MONOLITHIC) if c is not None]
        if learners and all(runs.output(c) is not None for c in learners):
            pairs = [(c, value(c, runs.output(c))) for c in learners]
            mono_runs[split] = pairs
            mono[split] = best_per_seed(pairs, seeds, higher)
    return Versus(seeds, hnet, mono, mono_runs)


def size_grid(runs: Runs, figure: str, model: str, value, best=max, across="templates"):
    """A hypernetwork size sweep (Fig. 3F, A8, A10) as a grid: ``(configs, hidden widths, module counts, grid)``
    where ``grid[i, j]`` is the best (``best``: max or min, over the remaining axes such as the outer learning rate)
    of the seed mean of ``value(config, output)`` at width ``hidden[i]`` and the ``j``-th value of the config field
    ``across`` (the number of modules); only configs with stored runs count (NaN where a cell has none)."""
    cfgs = [c for c in runs.configs(figure, model=model) if runs.output(c) is not None]
    hidden, templates = sorted({c.hidden for c in cfgs}), sorted({getattr(c, across) for c in cfgs})
    grid = np.full((len(hidden), len(templates)), np.nan)
    for i, h in enumerate(hidden):
        for j, t in enumerate(templates):
            cell = [value(c, runs.output(c)).mean() for c in cfgs if c.hidden == h and getattr(c, across) == t]
            grid[i, j] = best(cell) if cell else np.nan  # a (width, modules) cell with none of its runs stored
    return cfgs, hidden, templates, grid
