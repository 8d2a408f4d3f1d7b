"""What the goals section runs: the paper's per-model values (spec §4.3), the presets, and the config
lists of Fig. 4E/F, A9 and A10 (spec §4.4). Kept apart from :mod:`compgen.experiments.goals` so that
editing a preset does not change the code fingerprint of stored runs.
"""

from __future__ import annotations

import numpy as np

from compgen.experiments import fewshot, mean_std
from compgen.experiments.goals import GoalsConfig, run, shortest_demonstration_bound  # noqa: F401  (the CLI runs from here)
from compgen.tasks.goals import MAX_STEPS

PRESET_NAMES = fewshot.PRESET_NAMES

# spec §4.3; B = 128, 200k steps, shots 1/1, outer weight decay 1e-2, inner weight decay 1e-4, constant lr
_COMMON = dict(num_hidden=2, meta_batch=128, outer_steps=200_000, outer_weight_decay=1e-2, inner_weight_decay=1e-4,
               shots_support=1, shots_query=1, demo_length=120)
MODEL_DEFAULTS = {
    "hnet_deepmlp": dict(_COMMON, hidden=32, templates=8, inner_steps=10, inner_lr=0.1, outer_lr=1e-3, clip_norm=2.0),
    "hnet_linear": dict(_COMMON, hidden=32, templates=8, inner_steps=10, inner_lr=0.3, outer_lr=3e-3, clip_norm=2.0),
    "anil": dict(_COMMON, hidden=512, inner_steps=100, inner_batch=None, inner_lr=0.01, outer_lr=1e-3, clip_norm=2.0),
    "maml": dict(_COMMON, hidden=384, inner_steps=10, inner_lr=0.01, outer_lr=1e-3, clip_norm=1.0),
}
# spec §4.3, last row: the meta-parameter counts of the paper's models
PAPER_PARAM_COUNTS = {"hnet_deepmlp": 919_688, "hnet_linear": 227_144, "anil": 699_910, "maml": 475_782}
MODELS = ("anil", "maml", "hnet_linear", "hnet_deepmlp")  # the paper's order
HNETS = ("hnet_linear", "hnet_deepmlp")
MODEL_LABELS = {"anil": "ANIL", "maml": "MAML", "hnet_linear": "Linear hnet", "hnet_deepmlp": "Nonlinear hnet"}

PRESETS = {
    "smoke": dict(
        common=dict(outer_steps=6, meta_batch=2, demo_length="longest", eval_every=3, eval_tasks=8, eval_chunk=8,
                    seeds=(2020,)),
        per_model={"hnet_linear": dict(hidden=16, templates=4, inner_steps=2),
                   "hnet_deepmlp": dict(hidden=16, templates=4, inner_steps=2),
                   "anil": dict(hidden=16, inner_steps=3), "maml": dict(hidden=16, inner_steps=2)},
        figa10=dict(models=HNETS, hidden=(16,), templates=(4,), outer_lr=(None,)), figa10_overrides={},
        description="a few minutes, nearly all compilation; checks that everything runs, shows nothing",
    ),
    "quick": dict(
        common=dict(outer_steps=400, meta_batch=8, demo_length="longest", eval_every=200, eval_tasks=128,
                    remat=False),
        # outer learning rates 3x the paper's: every learner leaves its initial plateau within ~200 steps
        per_model={"hnet_linear": dict(inner_steps=5, outer_lr=1e-2),
                   "hnet_deepmlp": dict(inner_steps=5, outer_lr=3e-3),
                   "anil": dict(hidden=128, inner_steps=20, outer_lr=3e-3),
                   "maml": dict(hidden=64, inner_steps=5, outer_lr=3e-3)},
        figa10=dict(models=("hnet_linear",), hidden=(32, 64), templates=(8, 16), outer_lr=(None,)),
        figa10_overrides=dict(seeds=(2020,)),
        description="2 CPU cores, about 15 minutes for the section; far too short for the paper's claims",
    ),
    "paper": dict(
        common={}, per_model={},
        figa10=dict(models=HNETS, hidden=(32, 64, 128, 256), templates=(8, 16, 32), outer_lr=(3e-4, 1e-3, 3e-3)),
        figa10_overrides={},
        description="the paper's configuration (spec §4.3); GPU",
    ),
}


def make_config(preset: str = "quick", model: str = "hnet_linear", **overrides) -> GoalsConfig:
    """The config of ``model`` at ``preset``: the paper's values, the preset's, then ``overrides``.

    A preset whose ``demo_length`` is ``"longest"`` pads demonstrations to the longest one possible in
    the mazes of the config's seeds (51 steps for seeds 2020-2022) instead of the paper's 120.
    """
    if PRESETS.get(preset, {}).get("common", {}).get("demo_length") == "longest" and "demo_length" not in overrides:
        seeds = overrides.get("seeds", PRESETS[preset]["common"].get("seeds", GoalsConfig.seeds))
        overrides["demo_length"] = max((shortest_demonstration_bound(int(s)) for s in seeds), default=MAX_STEPS)
    return fewshot.make_config(GoalsConfig, MODEL_DEFAULTS, PRESETS, preset, model, **overrides)


def differences_from_paper(cfg: GoalsConfig):
    """``(field, value, paper value)`` for every field that differs from the paper's config of the model."""
    return fewshot.differences_from_paper(cfg, MODEL_DEFAULTS, ("split", "seeds"))


def fig4ef_configs(preset: str = "quick", model_names=MODELS, **overrides):
    """Fig. 4E/F and A9: the four models under compositional (``random``) and ``non_compositional``
    (a held-out quadrant) support, seeds 2020-2022. Ordered model-major."""
    return [make_config(preset, m, split=split, **overrides)
            for m in model_names for split in ("random", "non_compositional")]


def figa10_configs(preset: str = "quick", **overrides):
    """Fig. A10: the hypernetworks over hidden width x T x outer learning rate, random split (the best lr
    per cell is shown). An outer lr of None keeps the model's own."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
    grid = PRESETS[preset]["figa10"]
    configs = []
    for m in grid["models"]:
        for h in grid["hidden"]:
            for t in grid["templates"]:
                for lr in grid["outer_lr"]:
                    extra = {} if lr is None else dict(outer_lr=lr)
                    configs.append(make_config(preset, m, hidden=h, templates=t, split="random",
                                               **{**extra, **PRESETS[preset]["figa10_overrides"], **overrides}))
    return configs


EXPERIMENTS = {"fig4ef": fig4ef_configs, "figa10": figa10_configs}


def summarize(configs, outputs) -> str:
    """A markdown table of the final test and OOD step accuracy and the fraction of optimal OOD episodes
    (mean ± std over seeds, in %) of each config."""
    lines = ["| model | split | hidden | T | steps | test acc. | OOD acc. | optimal OOD episodes |",
             "|---|---|---|---|---|---|---|---|"]
    for c, out in zip(configs, outputs):
        final = lambda metric, name: 100 * np.asarray(out[f"eval/{metric}"])[:, -1, c.eval_set_names().index(name)]
        templates = c.templates if c.model.startswith("hnet") else "–"
        lines.append(f"| {c.model} | {c.split} | {c.num_hidden}x{c.hidden} | {templates} | {c.outer_steps} | "
                     f"{mean_std(final('acc', 'test'), 1)} | {mean_std(final('acc', 'ood'), 1)} | "
                     f"{mean_std(final('acc_all', 'ood'), 1)} |")
    return "\n".join(lines)
