"""What the preferences section runs: the paper's per-model values (spec §3.5), the presets, and the
config lists of Fig. 4B, 4C and A8 (spec §3.6). Kept apart from :mod:`compgen.experiments.preferences`
so that editing a preset does not change the code fingerprint of stored runs.
"""

from __future__ import annotations

import numpy as np

from compgen.experiments import fewshot, mean_std
from compgen.experiments.preferences import PreferencesConfig, run  # noqa: F401  (the CLI runs sections from here)

PRESET_NAMES = fewshot.PRESET_NAMES

# spec §3.5; B = 128, 100k steps, outer weight decay 1e-2 for every model
MODEL_DEFAULTS = {
    "hnet_deepmlp": dict(hidden=64, num_hidden=2, templates=32, inner_steps=10, inner_lr=0.1, outer_lr=3e-4,
                         clip_norm=2.0),
    "hnet_linear": dict(hidden=64, num_hidden=3, templates=32, inner_steps=10, inner_lr=0.1, outer_lr=3e-4,
                        clip_norm=1.0),
    "anil": dict(hidden=512, num_hidden=4, inner_steps=100, inner_batch=64, inner_lr=0.01, outer_lr=3e-4,
                 clip_norm=2.0),
    "maml": dict(hidden=368, num_hidden=3, inner_steps=10, inner_lr=0.01, outer_lr=1e-3, clip_norm=2.0),
}
MODELS = ("anil", "maml", "hnet_linear", "hnet_deepmlp")  # the paper's order
HNETS = ("hnet_linear", "hnet_deepmlp")

PRESETS = {
    "smoke": dict(
        common=dict(outer_steps=20, meta_batch=4, shots_support=2, shots_query=2, eval_every=10, eval_tasks=16,
                    eval_chunk=16, seeds=(2020,)),
        per_model={"hnet_linear": dict(hidden=16, templates=8), "hnet_deepmlp": dict(hidden=16, templates=8),
                   "anil": dict(hidden=32, num_hidden=2, inner_steps=5, inner_batch=8),
                   "maml": dict(hidden=16, num_hidden=2, inner_steps=3)},
        fig4b=dict(), figa8=dict(models=("hnet_linear",), hidden=(16,), templates=(8, 16), outer_lr=(3e-4,)),
        figa8_overrides={},
        description="seconds; checks that everything runs, shows nothing",
    ),
    "quick": dict(
        common=dict(outer_steps=600, meta_batch=8, shots_support=4, shots_query=4, eval_shots_query=8,
                    eval_every=200, eval_tasks=256, outer_schedule="warmup_cosine", warmup_steps=60, remat=False),
        per_model={"hnet_linear": dict(hidden=32, templates=16, outer_lr=2e-3),
                   "hnet_deepmlp": dict(hidden=32, templates=16, outer_lr=2e-3),
                   "anil": dict(hidden=128, num_hidden=2, inner_steps=20, inner_batch=32, outer_lr=1e-3),
                   # all three seeds: each seed draws its own preference modules, which set the scale of the
                   # losses, so the models are compared seed by seed
                   "maml": dict(hidden=64, num_hidden=2, outer_lr=1e-3)},
        fig4b=dict(), fig4b_models=("hnet_linear",),
        figa8=dict(models=("hnet_linear",), hidden=(32, 64), templates=(16, 32), outer_lr=(2e-3,)),
        figa8_overrides=dict(seeds=(2020,), outer_steps=400),
        description="2 CPU cores, minutes per run; aims at the qualitative claims",
    ),
    "paper": dict(
        common={}, per_model={},
        fig4b=dict(seeds=tuple(range(2020, 2026))),
        figa8=dict(models=HNETS, hidden=(32, 64, 128), templates=(16, 32, 64, 128), outer_lr=(1e-4, 3e-4, 1e-3)),
        figa8_overrides={},
        description="the paper's configuration (spec §3.5); GPU",
    ),
}


def make_config(preset: str = "quick", model: str = "hnet_linear", **overrides) -> PreferencesConfig:
    """The config of ``model`` at ``preset``: the paper's values, the preset's, then ``overrides``."""
    return fewshot.make_config(PreferencesConfig, MODEL_DEFAULTS, PRESETS, preset, model, **overrides)


def differences_from_paper(cfg: PreferencesConfig):
    """``(field, value, paper value)`` for every field that differs from the paper's config of the model."""
    return fewshot.differences_from_paper(cfg, MODEL_DEFAULTS, ("split", "max_hot", "seeds"))


def fig4c_configs(preset: str = "quick", model_names=MODELS, **overrides):
    """Fig. 4C: the four models under compositional (``random``) and ``non_compositional`` support, K = 3
    (6 seeds in the paper). Ordered model-major."""
    seeds = dict(seeds=tuple(range(2020, 2026))) if preset == "paper" else {}
    return [make_config(preset, m, split=split, **{**seeds, **overrides})
            for m in model_names for split in ("random", "non_compositional")]


def fig4b_configs(preset: str = "quick", **overrides):
    """Fig. 4B: the preset's hypernetworks (both at paper) under ``connected`` and ``disconnected`` support, K = 2."""
    return [make_config(preset, m, split=split, max_hot=2, **{**PRESETS[preset]["fig4b"], **overrides})
            for m in PRESETS[preset].get("fig4b_models", HNETS) for split in ("connected", "disconnected")]


def figa8_configs(preset: str = "quick", **overrides):
    """Fig. A8: the hypernetworks over hidden width x T x outer learning rate (the best lr per cell is shown)."""
    grid = PRESETS[preset]["figa8"]
    return [make_config(preset, m, hidden=h, templates=t, outer_lr=lr, **{**PRESETS[preset]["figa8_overrides"],
                                                                         **overrides})
            for m in grid["models"] for h in grid["hidden"] for t in grid["templates"] for lr in grid["outer_lr"]]


EXPERIMENTS = {"fig4b": fig4b_configs, "fig4c": fig4c_configs, "figa8": figa8_configs}


def summarize(configs, outputs) -> str:
    """A markdown table of the final test and OOD loss (mean ± std over seeds) of each config."""
    lines = ["| model | split | K | hidden | T | steps | test loss | OOD loss |", "|---|---|---|---|---|---|---|---|"]
    for c, out in zip(configs, outputs):
        final = lambda name: np.asarray(out["eval/loss"])[:, -1, c.eval_set_names().index(name)]
        templates = c.templates if c.model.startswith("hnet") else "–"
        lines.append(f"| {c.model} | {c.split} | {c.max_hot} | {c.num_hidden}x{c.hidden} | {templates} | "
                     f"{c.outer_steps} | {mean_std(final('test'))} | {mean_std(final('ood'))} |")
    return "\n".join(lines)
