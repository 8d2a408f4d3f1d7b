"""The compositional-preferences experiments (paper §4.2, App. C.3): meta-learning to predict an agent's optimal
action values from demonstrations of its hidden, compositional colour preferences.

A task is a latent z (M,) over preference modules (Algorithm 1 weights on a mask from the split); its support
and query sets are greedy demonstrations on fresh layouts, generated inside the compiled step
(:mod:`compgen.tasks.preferences`). The four models regress the 5 action values of each visited state under
the masked ½-squared error; the probe decodes z from the adapted fast parameters. The world's sizes are config
fields (:class:`WorldFields`), the paper's by default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import numpy as np

from compgen import params
from compgen.experiments import fewshot
from compgen.params import field, positive
from compgen.section import Grid, Preset
from compgen.tasks import preferences as pf
from compgen.tasks import teacher

WORLD_FIELDS = tuple(f.name for f in dataclasses.fields(pf.PreferencesWorld))


@dataclass(frozen=True)
class WorldFields(params.Config):
    """The sizes of a preferences world (:class:`compgen.tasks.preferences.PreferencesWorld`; the paper's by
    default), as config fields: the preference modules M, the colours, the objects per layout, the layout (the
    paper's 7×7 room or a smaller one), the demonstration length, the value-iteration backups and the
    observation ("grid" or "free_cells"). ``world`` is the value the task functions take."""

    n_modules: int = positive(pf.N_MODULES)  # M
    n_colours: int = field(pf.N_COLOURS, ge=1, le=pf.MAX_COLOURS)
    n_objects: int = positive(pf.N_OBJECTS)
    layout: str = field("paper", choices=tuple(pf.LAYOUTS))
    horizon: int = positive(pf.HORIZON)  # steps of a demonstration
    backups: int = positive(pf.BACKUPS)  # value-iteration backups
    observation: str = field("grid", choices=pf.OBSERVATIONS)

    @property
    def world(self) -> pf.PreferencesWorld:
        return pf.PreferencesWorld(**{name: getattr(self, name) for name in WORLD_FIELDS})


def check_world(cfg):
    """Raise a ParameterError naming the field unless ``cfg``'s world sizes fit together (the objects and the
    agent on distinct free cells of the layout; at least two colours, and no more modules than colours, so that the
    modules' preference vectors over the colours can be linearly independent)."""
    if cfg.n_colours < 2:
        raise params.ParameterError("n_colours must be at least 2 (one colour leaves nothing to prefer), got 1")
    if cfg.n_modules > cfg.n_colours:
        raise params.ParameterError(
            f"n_modules must be at most n_colours ({cfg.n_colours}): each module is a preference vector over the "
            f"colours, and more of them than colours are linearly dependent; got {cfg.n_modules}"
        )
    most = min(pf.MAX_OBJECTS, len(pf.layout_tables(cfg.layout)[1]) - 1)
    if cfg.n_objects > most:
        raise params.ParameterError(
            f"n_objects must be at most {most} on layout {cfg.layout!r} (its free cells hold the objects and the "
            f"agent; at most {pf.MAX_OBJECTS} on any layout), got {cfg.n_objects}"
        )
    return cfg.world


def world_label(cfg) -> str:
    """The world's sizes in words, e.g. '5x5 layout (8 free cells), 2 objects, M = 6 modules over 6 colours,
    horizon 4, 4 backups, free-cells observation (56 inputs)'."""
    w = cfg.world
    return (
        f"{w.grid}x{w.grid} layout ({w.n_cells} free cells), {w.n_objects} objects, M = {cfg.n_modules} modules "
        f"over {w.n_colours} colours, horizon {w.horizon}, {w.backups} backups, "
        f"{w.observation.replace('_', '-')} observation ({w.obs_size} inputs)"
    )


def is_paper_world(cfg) -> bool:
    return cfg.world == pf.WORLD and cfg.n_modules == pf.N_MODULES


@dataclass(frozen=True)
class PreferencesConfig(fewshot.FewshotConfig, WorldFields):
    """One preferences configuration (defaults: the paper's common settings, App. C.3); every seed is trained.

    Shots count demonstrations (``horizon`` steps each, masked after termination). The world's sizes are
    :class:`WorldFields`; ``n_in`` (the observation) follows from them.
    """

    split: str = field("random", choices=pf.SPLITS)
    max_hot: int = positive(3)  # K
    frac_ood: float = field(0.25, gt=0, lt=1)
    templates: int = positive(32)  # T, the hypernetworks' number of modules
    shots_support: int = positive(16)
    shots_query: int = positive(16)
    eval_shots_query: int = positive(1)  # the authors' evaluation loaders use one query demonstration (App. C.3)

    n_out = pf.N_ACTIONS

    def check(self):
        super().check()
        check_world(self)
        try:
            pf.task_split(self.n_modules, self.max_hot, self.split, self.frac_ood, self.seeds[0])
        except ValueError as error:
            raise params.ParameterError(str(error)) from None

    @property
    def n_in(self) -> int:
        return self.world.obs_size

    @property
    def n_templates(self) -> int:
        return self.templates

    def eval_set_names(self):
        return ("valid", "test", "ood") + tuple(f"ood_{k}" for k in pf.ood_k_values(self.n_modules, self.max_hot))


# --------------------------------------------------------------------------------------------- environment


def run_arrays(cfg, seed):
    """One run's inputs: the preference templates of the seed, its training masks (padded) and the fixed
    evaluation latents (App. C.3)."""
    masks = pf.task_masks(cfg.n_modules, cfg.max_hot)
    train, ood, _ = pf.task_split(cfg.n_modules, cfg.max_hot, cfg.split, cfg.frac_ood, seed)
    padded = np.zeros_like(masks, dtype=np.float32)
    padded[: len(train)] = masks[train]
    root = jax.random.key(seed)
    sets = pf.evaluation_latents(root, cfg.n_modules, cfg.max_hot, train, ood, cfg.eval_tasks)
    names = cfg.eval_set_names()
    return {
        "seed_key": root,
        "templates": pf.preference_templates(seed, cfg.n_modules, cfg.n_colours),
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
        run["templates"], z, key, cfg.shots_support, n_query, world=cfg.world
    ),
)


def label(cfg):
    world = "" if is_paper_world(cfg) else f"world {world_label(cfg)}"
    return (
        f"{fewshot.learner_text(cfg, world)} on {cfg.split} support, K={cfg.max_hot}: "
        f"{len(cfg.seeds)} seed(s), {cfg.outer_steps} steps"
    )


def flops_per_step(cfg) -> float:
    return fewshot.flops_per_step(cfg, cfg.horizon * cfg.shots_support, cfg.horizon * cfg.shots_query)


# --------------------------------------------------------------------------------------------- presets

_C = dict(split=("random", "non_compositional"))
# the quick preset's world (regime C1 of the search record book/search/preferences.json, chosen on seeds 7-9)
QUICK_WORLD = dict(layout="5x5", n_objects=2, n_modules=6, n_colours=6, horizon=4, backups=4, observation="free_cells")
_B = dict(split=("connected", "disconnected"))


def _figa8(models_, hidden, templates, outer_lr, **fixed):
    return Grid(models=models_, fixed=fixed, axes=dict(hidden=hidden, templates=templates, outer_lr=outer_lr))


PRESETS = {
    "paper": Preset(
        "the paper's configuration (App. C.3); GPU",
        # App. C.3; B = 128, 100k steps, outer weight decay 1e-2 for every model
        per_model={
            "hnet_deepmlp": dict(
                hidden=64, num_hidden=2, templates=32, inner_steps=10, inner_lr=0.1, outer_lr=3e-4, clip_norm=2.0
            ),
            "hnet_linear": dict(
                hidden=64,
                num_hidden=3,
                templates=32,
                inner_steps=10,
                inner_lr=0.1,
                outer_lr=3e-4,
                clip_norm=1.0,
            ),
            "anil": dict(
                hidden=512,
                num_hidden=4,
                inner_steps=100,
                inner_batch=64,
                inner_lr=0.01,
                outer_lr=3e-4,
                clip_norm=2.0,
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
        "2 CPU cores, in a smaller world (5x5 room, 2 objects, M = 6)",
        # The world and learners of regime C1 of the search record (book/search/preferences.json; chosen on seeds
        # 7-9), at 800 outer steps (Fig. 4B) and 2,000 (Fig. 4C and A8) so that the section fits 10 minutes on 2 cores.
        common=dict(
            QUICK_WORLD,
            outer_steps=800,
            meta_batch=8,
            shots_support=16,
            shots_query=8,
            eval_shots_query=8,
            eval_every=400,
            eval_tasks=256,
            outer_schedule="warmup_cosine",
            warmup_steps=100,
        ),
        per_model={
            "hnet_linear": dict(hidden=64, templates=16, outer_lr=5e-3),
            "hnet_deepmlp": dict(hidden=64, templates=16, outer_lr=5e-3),
            "anil": dict(hidden=128, num_hidden=2, inner_steps=20, inner_batch=32, outer_lr=3e-3),
            # all three seeds: each seed draws its own preference modules, which set the scale of the
            # losses, so the models are compared seed by seed
            "maml": dict(hidden=64, num_hidden=2, outer_lr=1e-3),
        },
        figures={
            # Fig. 4C and A8 for 2,000 steps, evaluated at steps 0, 1,000 and 2,000 (Fig. 4B keeps the preset's 800):
            # at 800 the nonlinear hypernetwork was still improving fast while ANIL had levelled off (the chapter's
            # diagnosis); 2,500 showed its lead on every tuning seed (7-9)
            "fig4c": Grid(models=fewshot.MODELS, fixed=dict(outer_steps=2000, eval_every=1000), axes=_C),
            "fig4b": Grid(models=("hnet_linear",), fixed=dict(max_hot=2), axes=_B),
            # the width axis only; its 64-wide cell is the Fig. 4C run of the linear hypernetwork (trained once)
            "figa8": _figa8(("hnet_linear",), (32, 64), (16,), (5e-3,), outer_steps=2000, eval_every=1000),
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
    flops_per_step=flops_per_step,
    label=label,
    experiment_fields=("split", "max_hot", "seeds"),
)
