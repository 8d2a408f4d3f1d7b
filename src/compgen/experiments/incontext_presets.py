"""What the in-context section runs: presets and config lists, kept apart from
:mod:`compgen.experiments.incontext` so that editing a preset does not change the code fingerprint
of stored runs.

Each preset copies the task setup of the hyperteacher preset of the same name (M, K, teacher, shots,
tasks per step, outer steps, schedule, evaluation), so that the paper's four models, read from the
results store through :func:`compgen.experiments.hyperteacher.run`, were trained and evaluated on the
same tasks as the in-context learners.
"""

from __future__ import annotations

from dataclasses import dataclass

from compgen.experiments import hyperteacher_presets as H
from compgen.experiments.incontext import InContextConfig, run  # noqa: F401  (the CLI runs sections from here)
from compgen.models.incontext import INCONTEXT_MODEL_NAMES

PRESET_NAMES = ("smoke", "quick", "paper")
MODELS = INCONTEXT_MODEL_NAMES
MODEL_LABELS = {"kv_memory": "KV memory (meta seq2seq)", "transformer": "Transformer",
                "bottleneck": "Bottleneck transformer + hnet"}
SPLITS = ("random", "non_compositional")

# The hyperteacher fields an in-context config takes over from the hyperteacher preset.
TASK_FIELDS = ("n_modules", "max_hot", "frac_ood", "n_in", "n_out", "teacher_hidden", "temperature", "norm_inputs",
               "shots_support", "shots_query", "outer_steps", "meta_batch", "outer_schedule", "warmup_steps",
               "eval_every", "eval_tasks", "eval_chunk", "probe", "ridge_lambda", "ridge_cg_iters", "seeds")


@dataclass(frozen=True)
class Preset:
    """Model sizes and optimiser settings common to the three learners, per-learner overrides on top."""

    common: dict
    per_model: dict
    description: str = ""


PRESETS = {
    "smoke": Preset(
        common=dict(d_model=16, num_layers=1, num_heads=2, d_ff=32, code_dim=8, hnet_hidden=16, n_templates=8,
                    outer_lr=3e-3, warmup_steps=2),
        per_model={}, description="seconds; checks that everything runs, shows nothing"),
    "quick": Preset(
        # ~70k parameters for the memory and the transformer, ~100k for the bottleneck (the paper models at
        # quick: 10k-73k); the hyperteacher quick schedule (warm-up 100 + cosine over 2,000 steps of 16 tasks)
        common=dict(d_model=64, num_layers=2, num_heads=4, d_ff=128, code_dim=16, hnet_hidden=32, n_templates=16,
                    outer_lr=2e-3, outer_weight_decay=1e-2),
        per_model={}, description="2 CPU cores, minutes per run; the hyperteacher quick task setup"),
    "paper": Preset(
        # 0.40M (memory), 0.53M (transformer), 0.65M (bottleneck) parameters, beside 0.31M-0.64M for the paper's
        # models at M = 8; the paper's budget of 200,000 steps of 128 tasks with 256 + 256 shots
        common=dict(d_model=128, num_layers=4, num_heads=4, d_ff=256, code_dim=32, hnet_hidden=48, n_templates=32,
                    outer_lr=1e-3, outer_schedule="warmup_cosine", warmup_steps=2000, outer_weight_decay=1e-2),
        per_model={}, description="the paper's task setup and budget (M = 8, K = 2); GPU"),
}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {PRESET_NAMES}, got {name!r}")
    return PRESETS[name]


def hyperteacher_reference(preset: str, split: str = "random", **overrides):
    """The hyperteacher config (linear hypernetwork) whose task setup the preset copies."""
    base = dict(n_modules=8, max_hot=2) if preset == "paper" else {}
    return H.make_config(preset, "hnet_linear", split=split, **{**base, **overrides})


def make_config(preset: str = "quick", model: str = "transformer", **overrides) -> InContextConfig:
    """The config of ``model`` at a preset: the hyperteacher preset's task setup, then the preset's model
    sizes, then ``overrides``."""
    p = get_preset(preset)
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    task_overrides = {k: v for k, v in overrides.items() if k in TASK_FIELDS and k != "seeds"}
    reference = hyperteacher_reference(preset, **task_overrides)
    fields = {name: getattr(reference, name) for name in TASK_FIELDS}
    fields.update(p.common)  # the preset may replace the schedule (paper: warm-up + cosine for the transformers)
    fields.update(p.per_model.get(model, {}))
    fields.update(overrides)
    return InContextConfig(model=model, **fields)


def comparison_configs(preset: str = "quick", model_names=MODELS, **overrides):
    """The in-context learners under compositional (``random``) and ``non_compositional`` support; model-major."""
    return [make_config(preset, m, split=split, **overrides) for m in model_names for split in SPLITS]


def paper_model_configs(preset: str = "quick", **overrides):
    """The paper's four models on the same tasks: the hyperteacher section's Fig. 3B configs."""
    return H.fig3b_configs(preset, **overrides)


EXPERIMENTS = {"comparison": comparison_configs}


def summarize(configs, outputs) -> str:
    """A markdown table: one row per config with its parameters, final accuracies and R² (mean ± std over seeds)."""
    import numpy as np

    from compgen import experiments
    from compgen.experiments import incontext

    lines = ["| learner | split | M | K | parameters | test acc. (%) | OOD acc. (%) | R² (OOD) |",
             "|---|---|---|---|---|---|---|---|"]
    for c, out in zip(configs, outputs):
        acc = lambda name: 100 * np.asarray(out["eval/accuracy"])[:, -1, c.eval_set_names().index(name)]
        r2 = "–"
        if "eval/r2_ood_pooled" in out:
            r2 = experiments.mean_std(np.asarray(out["eval/r2_ood_pooled"])[:, -1], 2)
        lines.append(f"| {MODEL_LABELS[c.model]} | {c.split} | {c.n_modules} | {c.max_hot} | "
                     f"{incontext.count_params(c):,} | {experiments.mean_std(acc('test'), 1)} | "
                     f"{experiments.mean_std(acc('ood'), 1)} | {r2} |")
    return "\n".join(lines)
