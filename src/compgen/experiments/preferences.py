"""The compositional-preferences experiments (paper §4.2, spec §3): meta-learning to predict an
agent's optimal action values from demonstrations of its hidden, compositional colour preferences.

A task is a latent z (M,) over preference modules (Algorithm 1 weights on a mask from the split);
its support and query sets are greedy demonstrations on fresh layouts, generated inside the compiled
step (:mod:`compgen.tasks.preferences`). The four models regress the 5 action values of each visited
state under the masked ½-squared error. The presets and the figures' config lists live in
:mod:`compgen.experiments.preferences_presets`, so that tuning them does not touch the code these
numbers are stored under.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from compgen import experiments, meta, models
from compgen.experiments import fewshot
from compgen.models import hypernetwork, mlp
from compgen.tasks import preferences as pf
from compgen.tasks import support, teacher

KIND = "preferences"


@dataclass(frozen=True)
class PreferencesConfig(fewshot.FewshotConfig):
    """One preferences configuration (defaults: the paper's linear hypernetwork, spec §3.5); every seed is trained.

    Shots count demonstrations (8 steps each, masked after termination).
    """

    n_in = pf.OBS_SIZE
    n_out = pf.N_ACTIONS

    split: str = "random"
    n_modules: int = pf.N_MODULES  # M
    max_hot: int = 3  # K
    frac_ood: float = 0.25
    shots_support: int = 16
    shots_query: int = 16
    eval_shots_query: int = 1  # the authors' evaluation loaders use one query demonstration (spec §3.4)

    def __post_init__(self):
        super().__post_init__()
        for name in ("shots_support", "shots_query", "eval_shots_query"):
            fewshot.check_positive_int(name, getattr(self, name))
        if self.n_modules != pf.N_MODULES:
            raise ValueError(f"n_modules must be {pf.N_MODULES} (the colours' template matrix is 8 x 8), "
                             f"got {self.n_modules!r}")
        pf.task_split(self.n_modules, self.max_hot, self.split, self.frac_ood, self.seeds[0])  # raises if invalid

    def eval_set_names(self):
        return ("valid", "test", "ood") + tuple(f"ood_{k}" for k in pf.ood_k_values(self.n_modules, self.max_hot))


CONFIG_CLASS = PreferencesConfig


def shape_key(cfg: PreferencesConfig):
    """Fields that fix the compiled program; configs equal here are vmapped together."""
    return tuple((f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in ("split", "seeds"))


def code():
    """The modules whose source the numbers of this section depend on (see results.code_fingerprint)."""
    return (pf, support, teacher, meta, models, hypernetwork, mlp, fewshot, experiments, sys.modules[__name__])


# --------------------------------------------------------------------------------------------- environment


def _sample_tasks(cfg, run, key, num):
    """``num`` training latents: masks drawn from the run's training masks, continuous weights: (num, M)."""
    return teacher.sample_latents_padded(key, run["train_masks"], run["n_train"], False, num)


def _task_data(cfg, run, latent, key, n_query):
    return pf.task_data(run["templates"], latent, key, cfg.shots_support, n_query)


ENV = fewshot.Environment(sample_tasks=_sample_tasks, task_data=_task_data, loss=pf.masked_squared_error)


def run_arrays(configs):
    """Per-run inputs of same-shape configs, stacked over (config, seed)."""
    cfg = configs[0]
    masks = pf.task_masks(cfg.n_modules, cfg.max_hot)
    rows = []
    for c in configs:
        for seed in c.seeds:
            train, ood, _ = pf.task_split(c.n_modules, c.max_hot, c.split, c.frac_ood, seed)
            padded = np.zeros_like(masks, dtype=np.float32)
            padded[: len(train)] = masks[train]
            root = jax.random.key(seed)
            sets = pf.evaluation_latents(root, c.n_modules, c.max_hot, train, ood, c.eval_tasks)
            rows.append({"seed_key": root, "templates": pf.preference_templates(seed, c.n_modules),
                         "train_masks": padded, "n_train": len(train),
                         "eval_tasks": np.stack([np.asarray(sets[n]) for n in c.eval_set_names()])})
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *rows)


def make_train(configs):
    """``(runs, init, chunk, evaluate)``: the compiled pieces that train every seed of same-shape ``configs``."""
    return fewshot.make_train(ENV, configs, run_arrays, shape_key)


def describe_group(group):
    c = group[0]
    splits = ", ".join(sorted({g.split for g in group}))
    return (f"{c.model} (K={c.max_hot}, hidden {c.num_hidden}x{c.hidden}) on {splits}: "
            f"{len(group)} config(s) x {len(c.seeds)} seed(s), {c.outer_steps} steps")


def train_group(configs, log=print):
    """Train every seed of same-shape ``configs`` in one compiled program; ``(history, wall_time_s)``."""
    ood = configs[0].eval_set_names().index("ood")

    def describe(step_metrics, evaluation):
        text = f"loss {np.mean(step_metrics['loss'][-1]):.4f}"
        if evaluation is not None:
            text += f"  ood loss {np.mean(evaluation['loss'][:, ood]):.4f}"
        return text

    return experiments.train_compiled(make_train, configs, describe, log)


def training_cost(cfg: PreferencesConfig) -> float:
    points = pf.HORIZON * np.array([cfg.shots_support, cfg.shots_query])
    return fewshot.flops_per_step(cfg, *points) * cfg.outer_steps * len(cfg.seeds)


def run(configs, force: bool = False, workers: int | None = None, log=print):
    """Results for each config (a list, in order): dicts of arrays with a leading seed axis.

    Keys: ``steps/{loss,grad_norm,skipped}`` (seed, step); ``eval/{loss,inner_loss_init,inner_loss_final}``
    (seed, eval, set) over :meth:`PreferencesConfig.eval_set_names`; ``eval_steps`` (eval,).
    """
    return experiments.run(sys.modules[__name__], configs, force, workers, log)
