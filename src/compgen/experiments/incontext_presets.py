"""What the in-context section runs: presets and config lists, kept apart from
:mod:`compgen.experiments.incontext` so that editing a preset does not change the code fingerprint
of stored runs.

Each preset copies the task setup of the section's preset of the same name, so that the paper's four
models, read from the results store through the section's ``run``, were trained and evaluated on the
same tasks as the in-context learners: on the hyperteacher (:data:`PRESETS`) M, K, teacher, shots,
tasks per step, outer steps, schedule and evaluation of the hyperteacher preset; on the goals world
(:data:`GOALS_PRESETS`, ``environment="goals"``) shots, demonstration length, tasks per step, outer
steps, evaluation and seeds of the goals preset, and the size of the generated MLP of its linear
hypernetwork for the bottleneck learner.
"""

from __future__ import annotations

from dataclasses import dataclass

from compgen.experiments import goals_presets as GP
from compgen.experiments import hyperteacher_presets as H
from compgen.experiments.incontext import ENVIRONMENTS, InContextConfig, run  # noqa: F401  (the CLI runs from here)
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
# The goals fields an in-context config takes over from the goals preset (the linear hypernetwork's config),
# and the sizes of its generated MLP, which the bottleneck learner's hypernetwork takes over.
GOALS_TASK_FIELDS = ("shots_support", "shots_query", "demo_length", "outer_steps", "meta_batch", "eval_every",
                     "eval_tasks", "eval_chunk", "seeds")
GOALS_HNET_FIELDS = {"hnet_hidden": "hidden", "hnet_num_hidden": "num_hidden", "n_templates": "templates"}


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
        # quick: 10k-73k); the hyperteacher quick schedule (warm-up 100 + cosine over 2,000 steps of 16 tasks;
        # the steps are pinned because the linear hypernetwork whose task setup this copies trains for 4,000)
        common=dict(d_model=64, num_layers=2, num_heads=4, d_ff=128, code_dim=16, hnet_hidden=32, n_templates=16,
                    outer_lr=2e-3, outer_weight_decay=1e-2, outer_steps=2000),
        per_model={}, description="2 CPU cores, minutes per run; the hyperteacher quick task setup"),
    "paper": Preset(
        # 0.40M (memory), 0.53M (transformer), 0.65M (bottleneck) parameters, beside 0.31M-0.64M for the paper's
        # models at M = 8; the paper's budget of 200,000 steps of 128 tasks with 256 + 256 shots
        common=dict(d_model=128, num_layers=4, num_heads=4, d_ff=256, code_dim=32, hnet_hidden=48, n_templates=32,
                    outer_lr=1e-3, outer_schedule="warmup_cosine", warmup_steps=2000, outer_weight_decay=1e-2),
        per_model={}, description="the paper's task setup and budget (M = 8, K = 2); GPU"),
}


GOALS_PRESETS = {
    "smoke": Preset(
        common=dict(d_model=16, num_layers=1, num_heads=2, d_ff=32, code_dim=8, outer_lr=3e-3, warmup_steps=2),
        per_model={}, description="seconds; checks that everything runs, shows nothing"),
    "quick": Preset(
        # ~120k (transformer), ~180k (memory) and ~360k (bottleneck) parameters, beside the paper models at quick
        # (MAML 59k to the nonlinear hnet 0.92M); the goals quick budget (400 steps of 8 tasks), warm-up + cosine
        common=dict(d_model=64, num_layers=2, num_heads=4, d_ff=128, code_dim=16, outer_lr=2e-3,
                    outer_schedule="warmup_cosine", warmup_steps=40, outer_weight_decay=1e-2),
        per_model={}, description="2 CPU cores, about a minute per learner; the goals quick task setup"),
    "paper": Preset(
        # ~0.6M (memory, transformer) and ~0.9M (bottleneck) parameters, beside 0.23M-0.92M for the paper's goals
        # models; the paper's budget of 200,000 steps of 128 tasks, 1 + 1 demonstrations padded to 120 steps
        common=dict(d_model=128, num_layers=4, num_heads=4, d_ff=256, code_dim=32, outer_lr=1e-3,
                    outer_schedule="warmup_cosine", warmup_steps=2000, outer_weight_decay=1e-2),
        per_model={}, description="the paper's goals task setup and budget (spec §4.3); GPU"),
}


def get_preset(name: str, environment: str = "hyperteacher") -> Preset:
    if environment not in ENVIRONMENTS:
        raise ValueError(f"environment must be one of {ENVIRONMENTS}, got {environment!r}")
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {PRESET_NAMES}, got {name!r}")
    return (GOALS_PRESETS if environment == "goals" else PRESETS)[name]


def hyperteacher_reference(preset: str, split: str = "random", **overrides):
    """The hyperteacher config (linear hypernetwork) whose task setup the preset copies."""
    base = dict(n_modules=8, max_hot=2) if preset == "paper" else {}
    return H.make_config(preset, "hnet_linear", split=split, **{**base, **overrides})


def goals_reference(preset: str, split: str = "random", **overrides):
    """The goals config (linear hypernetwork) whose task setup the goals preset copies."""
    return GP.make_config(preset, "hnet_linear", split=split, **overrides)


def make_config(preset: str = "quick", model: str = "transformer", **overrides) -> InContextConfig:
    """The config of ``model`` at a preset: the task setup of the preset of the section named by
    ``environment`` (an override; default ``hyperteacher``), then the preset's model sizes, then ``overrides``."""
    environment = overrides.get("environment", "hyperteacher")
    p = get_preset(preset, environment)
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if environment == "goals":
        # the seeds fix the demonstration length of a preset that pads to the longest demonstration
        reference = goals_reference(preset, **{k: v for k, v in overrides.items() if k in GOALS_TASK_FIELDS})
        fields = {name: getattr(reference, name) for name in GOALS_TASK_FIELDS}
        fields.update({ours: getattr(reference, theirs) for ours, theirs in GOALS_HNET_FIELDS.items()})
    else:
        task_overrides = {k: v for k, v in overrides.items() if k in TASK_FIELDS and k != "seeds"}
        reference = hyperteacher_reference(preset, **task_overrides)
        fields = {name: getattr(reference, name) for name in TASK_FIELDS}
    fields.update(p.common)  # the preset may replace the schedule (paper: warm-up + cosine for the transformers)
    fields.update(p.per_model.get(model, {}))
    fields.update(overrides)
    return InContextConfig(model=model, **fields)


def comparison_configs(preset: str = "quick", model_names=MODELS, **overrides):
    """The in-context learners under compositional (``random``) and ``non_compositional`` support; model-major.
    On the hyperteacher unless ``environment="goals"`` is among the overrides."""
    return [make_config(preset, m, split=split, **overrides) for m in model_names for split in SPLITS]


def goals_comparison_configs(preset: str = "quick", model_names=MODELS, **overrides):
    """:func:`comparison_configs` on the goals world."""
    return comparison_configs(preset, model_names, **{**overrides, "environment": "goals"})


def paper_model_configs(preset: str = "quick", environment: str = "hyperteacher", **overrides):
    """The paper's four models on the same tasks: the hyperteacher section's Fig. 3B configs, or with
    ``environment="goals"`` the goals section's Fig. 4E/F configs (both splits)."""
    if environment not in ENVIRONMENTS:
        raise ValueError(f"environment must be one of {ENVIRONMENTS}, got {environment!r}")
    if environment == "goals":
        return GP.fig4ef_configs(preset, **overrides)
    return H.fig3b_configs(preset, **overrides)


EXPERIMENTS = {"comparison": comparison_configs, "goals": goals_comparison_configs}


def summarize(configs, outputs) -> str:
    """A markdown table: one row per config with its parameters, final (step) accuracies and R² (mean ± std over
    seeds)."""
    import numpy as np

    from compgen import experiments
    from compgen.experiments import incontext

    lines = ["| learner | split | tasks | parameters | test acc. (%) | OOD acc. (%) | R² (OOD) |",
             "|---|---|---|---|---|---|---|"]
    for c, out in zip(configs, outputs):
        key = f"eval/{incontext.accuracy_key(c)}"
        acc = lambda name: 100 * np.asarray(out[key])[:, -1, c.eval_set_names().index(name)]
        r2 = "–"
        if "eval/r2_ood_pooled" in out:
            r2 = experiments.mean_std(np.asarray(out["eval/r2_ood_pooled"])[:, -1], 2)
        tasks = f"hyperteacher M={c.n_modules}, K={c.max_hot}" if c.environment == "hyperteacher" else "goals"
        lines.append(f"| {MODEL_LABELS[c.model]} | {c.split} | {tasks} | "
                     f"{incontext.count_params(c):,} | {experiments.mean_std(acc('test'), 1)} | "
                     f"{experiments.mean_std(acc('ood'), 1)} | {r2} |")
    return "\n".join(lines)
