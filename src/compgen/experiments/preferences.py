"""The compositional-preferences experiments (paper §4.2, spec §3): meta-learning to predict an agent's optimal
action values from demonstrations of its hidden, compositional colour preferences.

A task is a latent z (M,) over preference modules (Algorithm 1 weights on a mask from the split); its support
and query sets are greedy demonstrations on fresh layouts, generated inside the compiled step
(:mod:`compgen.tasks.preferences`). The four models regress the 5 action values of each visited state under
the masked ½-squared error; the probe decodes z from the adapted fast parameters.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import jax
import numpy as np

from compgen import initializers, meta, metrics, models, params, runner
from compgen.experiments import fewshot
from compgen.models import hypernetwork, mlp
from compgen.params import field, positive
from compgen.section import Grid, Preset
from compgen.tasks import preferences as pf
from compgen.tasks import support, teacher


@dataclass(frozen=True)
class PreferencesConfig(fewshot.FewshotConfig):
    """One preferences configuration (defaults: the paper's common settings, spec §3.5); every seed is trained.

    Shots count demonstrations (8 steps each, masked after termination).
    """

    split: str = field("random", choices=pf.SPLITS)
    n_modules: int = positive(pf.N_MODULES)  # M
    max_hot: int = positive(3)  # K
    frac_ood: float = field(0.25, gt=0, lt=1)
    templates: int = positive(32)  # T, the hypernetworks' number of modules
    shots_support: int = positive(16)
    shots_query: int = positive(16)
    eval_shots_query: int = positive(1)  # the authors' evaluation loaders use one query demonstration (spec §3.4)

    n_in = pf.OBS_SIZE
    n_out = pf.N_ACTIONS

    def check(self):
        super().check()
        if self.n_modules != pf.N_MODULES:
            raise params.ParameterError(
                f"n_modules must be {pf.N_MODULES} (the colours' template matrix is 8 x 8), got {self.n_modules!r}"
            )
        try:
            pf.task_split(self.n_modules, self.max_hot, self.split, self.frac_ood, self.seeds[0])
        except ValueError as error:
            raise params.ParameterError(str(error)) from None

    @property
    def n_templates(self) -> int:
        return self.templates

    def eval_set_names(self):
        return ("valid", "test", "ood") + tuple(f"ood_{k}" for k in pf.ood_k_values(self.n_modules, self.max_hot))


# --------------------------------------------------------------------------------------------- environment


def run_arrays(cfg, seed):
    """One run's inputs: the preference templates of the seed, its training masks (padded) and the fixed
    evaluation latents (spec §3.4)."""
    masks = pf.task_masks(cfg.n_modules, cfg.max_hot)
    train, ood, _ = pf.task_split(cfg.n_modules, cfg.max_hot, cfg.split, cfg.frac_ood, seed)
    padded = np.zeros_like(masks, dtype=np.float32)
    padded[: len(train)] = masks[train]
    root = jax.random.key(seed)
    sets = pf.evaluation_latents(root, cfg.n_modules, cfg.max_hot, train, ood, cfg.eval_tasks)
    names = cfg.eval_set_names()
    return {
        "seed_key": root,
        "templates": pf.preference_templates(seed, cfg.n_modules),
        "train_masks": padded,
        "n_train": len(train),
        "eval_tasks": np.stack([np.asarray(sets[n]) for n in names]),
        "eval_valid": np.ones(len(names), bool),
    }


ENV = fewshot.Environment(
    name="preferences",
    run_arrays=run_arrays,
    loss=pf.masked_squared_error,
    latent=lambda cfg, z: z,
    sample_tasks=lambda cfg, run, key, num: teacher.sample_latents_padded(
        key, run["train_masks"], run["n_train"], False, num
    ),
    task_data=lambda cfg, run, world, z, key, n_query: pf.task_data(
        run["templates"], z, key, cfg.shots_support, n_query
    ),
)


def label(cfg):
    size = f"hidden {cfg.num_hidden}x{cfg.hidden}" + (f", T={cfg.templates}" if cfg.model.startswith("hnet") else "")
    return (
        f"{fewshot.MODEL_LABELS[cfg.model]} ({size}) on {cfg.split} support, K={cfg.max_hot}: "
        f"{len(cfg.seeds)} seed(s), {cfg.outer_steps} steps"
    )


def flops_per_step(cfg) -> float:
    return fewshot.flops_per_step(cfg, pf.HORIZON * cfg.shots_support, pf.HORIZON * cfg.shots_query)


# --------------------------------------------------------------------------------------------- presets

_C = dict(split=("random", "non_compositional"))
_B = dict(split=("connected", "disconnected"))


def _figa8(models_, hidden, templates, outer_lr, **fixed):
    return Grid(models=models_, fixed=fixed, axes=dict(hidden=hidden, templates=templates, outer_lr=outer_lr))


PRESETS = {
    "paper": Preset(
        "the paper's configuration (spec §3.5); GPU",
        # spec §3.5; B = 128, 100k steps, outer weight decay 1e-2 for every model
        per_model={
            "hnet_deepmlp": dict(
                hidden=64, num_hidden=2, templates=32, inner_steps=10, inner_lr=0.1, outer_lr=3e-4, clip_norm=2.0
            ),
            "hnet_linear": dict(
                hidden=64, num_hidden=3, templates=32, inner_steps=10, inner_lr=0.1, outer_lr=3e-4, clip_norm=1.0
            ),
            "anil": dict(
                hidden=512, num_hidden=4, inner_steps=100, inner_batch=64, inner_lr=0.01, outer_lr=3e-4, clip_norm=2.0
            ),
            "maml": dict(hidden=368, num_hidden=3, inner_steps=10, inner_lr=0.01, outer_lr=1e-3, clip_norm=2.0),
        },
        figures={
            "fig4c": Grid(models=fewshot.MODELS, fixed=dict(seeds=tuple(range(2020, 2026))), axes=_C),
            "fig4b": Grid(models=fewshot.HNETS, fixed=dict(max_hot=2, seeds=tuple(range(2020, 2026))), axes=_B),
            "figa8": _figa8(fewshot.HNETS, (32, 64, 128), (16, 32, 64, 128), (1e-4, 3e-4, 1e-3)),
        },
    ),
    "quick": Preset(
        "2 CPU cores, minutes per run; aims at the qualitative claims",
        common=dict(
            outer_steps=600,
            meta_batch=8,
            shots_support=4,
            shots_query=4,
            eval_shots_query=8,
            eval_every=200,
            eval_tasks=256,
            outer_schedule="warmup_cosine",
            warmup_steps=60,
            remat=False,
        ),
        per_model={
            "hnet_linear": dict(hidden=32, templates=16, outer_lr=2e-3),
            "hnet_deepmlp": dict(hidden=32, templates=16, outer_lr=2e-3),
            "anil": dict(hidden=128, num_hidden=2, inner_steps=20, inner_batch=32, outer_lr=1e-3),
            # all three seeds: each seed draws its own preference modules, which set the scale of the
            # losses, so the models are compared seed by seed
            "maml": dict(hidden=64, num_hidden=2, outer_lr=1e-3),
        },
        figures={
            "fig4c": Grid(models=fewshot.MODELS, axes=_C),
            "fig4b": Grid(models=("hnet_linear",), fixed=dict(max_hot=2), axes=_B),
            "figa8": _figa8(("hnet_linear",), (32, 64), (16, 32), (2e-3,), seeds=(2020,), outer_steps=400),
        },
    ),
    "smoke": Preset(
        "seconds; checks that everything runs, shows nothing",
        common=dict(
            outer_steps=20,
            meta_batch=4,
            shots_support=2,
            shots_query=2,
            eval_every=10,
            eval_tasks=16,
            eval_chunk=16,
            seeds=(2020,),
        ),
        per_model={
            "hnet_linear": dict(hidden=16, templates=8),
            "hnet_deepmlp": dict(hidden=16, templates=8),
            "anil": dict(hidden=32, num_hidden=2, inner_steps=5, inner_batch=8),
            "maml": dict(hidden=16, num_hidden=2, inner_steps=3),
        },
        figures={
            "fig4c": Grid(models=fewshot.MODELS, axes=_C),
            "fig4b": Grid(models=fewshot.HNETS, fixed=dict(max_hot=2), axes=_B),
            "figa8": _figa8(("hnet_linear",), (16,), (8, 16), (3e-4,)),
        },
    ),
}

SECTION = fewshot.make_section(
    ENV,
    "preferences",
    PreferencesConfig,
    PRESETS,
    code=(
        pf,
        support,
        teacher,
        initializers,
        meta,
        metrics,
        models,
        hypernetwork,
        mlp,
        fewshot,
        runner,
        sys.modules[__name__],
    ),
    cost=lambda cfg: flops_per_step(cfg) * cfg.outer_steps * len(cfg.seeds),
    label=label,
    experiment_fields=("split", "max_hot", "seeds"),
)
