"""Twin runs: train a chapter's configs with the authors' implementation and judge its claims on their numbers.

    make twin-env REFERENCE=/path/to/modular-hyperteacher          # once: .venv-twin with the reference's deps
    make twin REFERENCE=/path/to/modular-hyperteacher CHAPTER=hyperteacher
    .venv/bin/python tools/twin.py --reference /path/to/modular-hyperteacher --chapter teacher_student \\
        --seeds 100 101 102 --seeds 31 32 33                       # the same, seed sets named

For every config of the chapter's claim figures at the preset (the book's configs, with each seed set in turn)
and every seed, :func:`translate` writes the reference's config field by field (what has no counterpart is
listed, with why), ``tools/twin_driver.py`` trains it in the twin virtualenv with the reference's own
``run_fewshot`` for the same outer steps, tasks per step, inner steps and learning rates, and the final numbers,
the curve and the wall time are kept per seed. The chapter's own ``claims(runs)`` then judges the reference's
numbers, laid out as our runs' outputs (:func:`reference_output`), with the same criteria as the book: the
verdicts are computed by the same code on the other implementation's numbers.

The record, ``book/search/twin_<chapter>.json``, is written after every run: an interrupted tool loses at most
the run in progress, and a rerun trains only what the record lacks. It carries its ``schema`` and the fingerprint of
our chapter's code (``code_key``, :func:`compgen.analysis.twin.code_key`); an existing record that is
damaged or of a newer schema is refused in one line (exit status 2), never overwritten. The reference checkout stays
outside this repository; nothing of it is copied here.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from compgen import backends, programs, recordfile, records, results
from compgen.analysis import chapters
from compgen.analysis import twin as layout
from compgen.figures import twin as tables

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tools" / "twin_driver.py"
REPOSITORY = "smonsays/modular-hyperteacher"
COMMIT = "2680b5c6a5fd88f1487a6f794cf70d20b7bc261e"
TWIN_PYTHON = ROOT / ".venv-twin" / "bin" / "python"

REFERENCE_FILES = ("run_fewshot.py", "run_theory.py", "metax/experiment.py")  # what a checkout of the reference holds


def reference_problem(reference: Path, python: Path) -> str | None:
    """Why ``reference`` is not a checkout of the authors' code that ``python`` (the twin virtualenv's) can run, in one
    line naming the flag and the path, or ``None``: it must hold :data:`REFERENCE_FILES`, and ``python`` must import
    JAX and Haiku (``make twin-env`` makes it)."""
    missing = [f for f in REFERENCE_FILES if not (Path(reference) / f).is_file()]
    if missing:
        return f"--reference {reference} is not a checkout of {REPOSITORY}: it has no {', '.join(missing)}"
    if not (Path(python).is_file() and os.access(python, os.X_OK)):
        return f"--twin-python {python} is not an executable Python (make twin-env REFERENCE={reference} makes one)"
    try:
        probe = subprocess.run([str(python), "-c", "import jax, haiku"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"--twin-python {python} could not run: {error}"
    if probe.returncode:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        return f"--twin-python {python} cannot import jax and haiku ({last}); make twin-env REFERENCE={reference}"
    return None


SECOND_SET = (31, 32, 33)  # the seeds of tools/second_set.py
# Which figures of a chapter are twinned, and where the reference cannot express the preset's world: the chapter's
# Twin (compgen.analysis.chapter), read through compgen.analysis.twin.
claim_configs, reference_output = layout.claim_configs, layout.reference_output


def claim_figures(chapter: str) -> tuple:
    """The figures of ``chapter`` whose claims the twins test, in training order."""
    return layout.twin_of(chapter).figures


# Claims the reference cannot express at a preset, with why (the record and the results page say so).
NOT_EXPRESSIBLE = {
    ("teacher_student", "quick"): {
        "Fig. 2D": "quick's Fig. 2D decays the inner rate (0.2, cosine over 50 steps); run_theory.py's inner Adam has "
        "a constant rate, and a constant-rate regime of that world is a new search, not a twin",
        "Table A1": "the same inner schedule as Fig. 2D",
    }
}

# ours -> the reference's flat config key (run_fewshot.py, configs/common.py), for the learner's and the
# meta-training's fields whose value carries over unchanged (every few-shot chapter).
SAME_VALUE = {
    "outer_steps": "steps_outer",
    "meta_batch": "meta_batch_size",
    "outer_lr": "lr_outer",
    "clip_norm": "max_meta_grad_norm",
    "outer_weight_decay": "weight_decay_outer",
    "hidden": "base_model_hidden_dim",
    "num_hidden": "base_model_num_hidden",
    "inner_steps": "steps_inner",
    "inner_batch": "batch_size",
    "inner_lr": "lr_inner",
    "eval_every": "eval_every",
    "eval_tasks": "eval_tasks",
    "split": "dataset_task_support",
    "frac_ood": "dataset_frac_ood",
    "shots_support": "dataset_shots_train",
    "shots_query": "dataset_shots_test",
}
# Fields that change speed and memory only (compgen.experiments.fewshot.MEMORY_ONLY and the compiler's level).
SPEED_ONLY = ("eval_chunk", "train_chunk", "remat", "xla_opt_level", "fused_inner")
# Fields whose value the reference fixes (every few-shot chapter): ours must hold that value, or the config is not
# expressible.
FIXED = {
    "inner_weight_decay": (1e-4, "the reference's inner AdamW keeps optax's default weight decay, 1e-4"),
    "gradient": ("second_order", "first_order = False: the exact meta-gradient through the inner loop"),
}
PROBE = "our probe, on the reference's adapted fast parameters"
MODEL = {  # ours -> (meta_model, the reference's fixed settings of that learner, as in configs/hyperteacher.py)
    "hnet_linear": ("linear_hnet", dict(chunking=True, fast_bias=True)),
    # run_fewshot.py picks the generator from the name's first word (meta_model.split("_")[0]): its own config's
    # "hnet_deepmlp" would ask for a generator "hnet", which metax/models/hnet.py does not have; "deepmlp_hnet" is
    # the name that builds the DeepBank the paper's nonlinear hypernetwork uses
    "hnet_deepmlp": ("deepmlp_hnet", dict(chunking=True)),
    "anil": ("anil", {}),
    "maml": ("learned_init", dict(l2_reg=None)),
}
HNET_SETTINGS = dict(
    embedding_dropout=0.0, embedding_nonlinearity="linear", hnet_init="default", l1_reg=0.0, l2_reg=0.0
)


@dataclasses.dataclass(frozen=True)
class World:
    """How one few-shot chapter's world reads in the reference: its fixed settings (``settings``), our world's
    fields carried over under the reference's key (``same``), fields the reference fixes (``fixed``: field ->
    (value, or a function of the config giving it; why)), our fields that set nothing there (``notes``: field ->
    why), and the metrics the claims read (``metrics``: our name in ``eval/<name>`` -> the name the reference
    logs as ``<set>_<name>_outer``)."""

    settings: dict
    same: dict
    fixed: dict
    notes: dict
    metrics: dict
    fields: tuple  # the fields that name the world in the record
    r2: bool = False  # our R² on the reference's adapted fast parameters (the claims read it)
    allowed: dict = dataclasses.field(default_factory=dict)  # field -> (value -> bool, what the reference takes)
    draws: str = ""  # what of a seed's world is the same in both codes (default: ALWAYS_UNMATCHED's first entry)


WORLDS = {
    "hyperteacher": World(
        settings=dict(
            dataset="hyperteacher",
            dataset_num_hidden=3,
            dataset_normalize_classifier=True,
            dataset_train_test_split=True,
            dataset_continuous_combinations=False,
            dataset_chunking=False,
        ),
        same={
            "n_modules": "dataset_num_experts",
            "max_hot": "dataset_num_hot",
            "teacher_hidden": "dataset_hidden_dim",
            "temperature": "dataset_targets_temperature",
            "templates_per_module": "ratio_templates_experts",
        },
        fixed={
            "n_in": (16, "configs/common.py fixes input_dim = 16"),
            "n_out": (8, "configs/common.py fixes output_dim = 8"),
            "norm_inputs": (1000, "the reference standardises each teacher unit over 1,000 fixed inputs"),
            "ridge_lambda": (1.0, "the reference's decoder (callbacks.py) is a ridge with l2_reg = 1.0"),
        },
        notes={"probe": PROBE, "ridge_cg_iters": PROBE},
        metrics={"accuracy": "acc", "loss": "loss"},
        fields=("n_modules", "max_hot", "outer_steps", "meta_batch"),
        r2=True,
    ),
    "preferences": World(
        settings=dict(
            dataset="compositional_preference",
            dataset_discount=0.9,  # ours: compgen.tasks.preferences.GAMMA
            dataset_continuous_combinations=True,  # ours: continuous weights, the "code" normalisation
            dataset_train_test_split=True,
        ),
        same={
            "n_modules": "dataset_num_preferences",
            "n_colours": "dataset_num_features",
            "n_objects": "dataset_num_objects",
            "horizon": "dataset_timelimit",
            "max_hot": "dataset_num_hot",
            "templates": "num_templates",
        },
        fixed={
            "backups": (lambda c: c.horizon, "the reference runs value iteration for timelimit (= horizon) backups"),
            "layout": ("paper", "the reference's room is the paper's 7x7 layout"),
            "observation": ("grid", "the reference observes the full grid (colour one-hots, agent and walls)"),
            "eval_shots_query": (1, "the reference's evaluation tasks have one query demonstration"),
        },
        notes={"probe": PROBE, "ridge_lambda": PROBE, "ridge_cg_iters": PROBE},
        metrics={"loss": "loss"},  # its squared-error loss logs no accuracy
        fields=("layout", "observation", "n_modules", "max_hot", "horizon", "outer_steps", "meta_batch"),
        draws="a seed's preference modules, random split and supports are the same numbers in both codes; the tasks' "
        "weights, rooms and demonstrations drawn in training and evaluation and the learner's initialisation come "
        "from each code's own random streams, so runs are compared as seed sets",
    ),
    "goals": World(
        settings=dict(dataset="compositional_grid", dataset_frac_ood=0.25, dataset_train_test_split=True),
        same={
            "grid": "dataset_grid_size",
            "n_mazes": "dataset_num_mazes",
            "n_object_types": "dataset_num_objects",
            "n_interactions": "dataset_num_interactions",
            "n_distractors": "dataset_num_distractors",
            "templates": "num_templates",
        },
        fixed={
            "min_distance": (lambda c: c.grid, "the reference keeps goals at least grid-size steps from the start"),
            "eval_shots_query": (1, "the reference's evaluation tasks have one query demonstration"),
            "demo_length": (
                lambda c: c.grid**2 - 1,
                "the reference pads every demonstration to grid² - 1 steps, masked after the interaction",
            ),
        },
        notes={"probe": PROBE, "ridge_lambda": PROBE, "ridge_cg_iters": PROBE},
        metrics={"acc": "acc", "acc_all": "acc_all", "loss": "loss"},
        fields=("grid", "min_distance", "n_mazes", "outer_steps", "meta_batch"),
        allowed={"grid": (lambda g: g > 5 and g % 2, "the reference's maze generator asserts an odd grid above 5")},
        draws="a seed's mazes and random split are the same in both codes; the goals, starts and distractors drawn "
        "in training and evaluation and the learner's initialisation come from each code's own random streams, so "
        "runs are compared as seed sets",
    ),
}
# The figures whose configs the claims read, per chapter the tool can twin (fig3e's K = 4 cell is fig3b's), in the
# order they train: the headline comparisons first.
# What cannot be matched, whatever the config; each is a (what, why) pair in the record.
ALWAYS_UNMATCHED = (
    (
        "teacher, task draws and initialisation",
        "each implementation draws them from its own random streams: the same seed gives another teacher of the "
        "same distribution, so runs are compared as seed sets, not seed by seed",
    ),
    (
        "returned state",
        "the reference returns the state of its best validation loss; the twin reads its last evaluation (the "
        "final state), as the book does",
    ),
)
RIDGE_PROBE = (
    "ridge probe",
    "our R² (r2_ood_pooled) is computed by compgen.metrics.linear_probe on the fast parameters the reference "
    "adapted to the test and OOD tasks; the reference's own decoder R² (mean over layers and experts, with an "
    "intercept) is recorded beside it",
)


class NotExpressible(ValueError):
    """The reference cannot express this config (a fixed field differs); the message says which and why."""


@dataclasses.dataclass(frozen=True)
class Translation:
    """The reference's flat config for one seed, and how each of our fields was carried over."""

    config: dict
    fields: tuple  # (our field, our value, reference key or None, reference value or the reason)
    unmatched: tuple  # (what, why)


def _carry(cfg, ref: dict, same: dict, fixed: dict, notes: dict, rules: dict) -> list:
    """Every field of ``cfg`` into ``ref`` (in place), as rows (field, our value, key or None, value or why): by
    its own rule (``rules``: field -> value -> (key, value)), carried over under the reference's key (``same``),
    held at the value the reference fixes (``fixed``: field -> (value or a function of ``cfg``, why)), or noted as
    setting nothing there (``notes``); any other field raises :class:`NotExpressible`."""
    rows = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name in rules:
            key, out = rules[f.name](value)
        elif f.name in same:
            key, out = same[f.name], value
        elif f.name in fixed:
            want, why = fixed[f.name]
            want = want(cfg) if callable(want) else want
            if value != want:
                raise NotExpressible(f"{f.name} = {value!r}, not {want!r}: {why}")
            key, out = None, why
        elif f.name in notes:
            key, out = None, notes[f.name]
        else:
            raise NotExpressible(f"{f.name} has no counterpart in the reference and no stated reason")
        if key is not None:
            ref[key] = out
        rows.append((f.name, value, key, out))
    return rows


def translate(section_name: str, cfg, seed: int) -> Translation:
    """The reference's config for ``cfg`` (a config of ``section_name``) at ``seed``; every field of ``cfg`` is
    either carried over, speed-only, fixed by the reference at the same value, or raises :class:`NotExpressible`.
    """
    if section_name == "teacher_student":
        return translate_theory(cfg, seed)
    if section_name not in WORLDS:
        raise NotExpressible(f"the twin tool translates {', '.join(sorted(chapters.twinned()))}, not {section_name!r}")
    world = WORLDS[section_name]
    for name, (ok, why) in world.allowed.items():
        if not ok(getattr(cfg, name)):
            raise NotExpressible(f"{name} = {getattr(cfg, name)!r}: {why}")
    meta_model, learner = MODEL[cfg.model]
    ref = {"name": cfg.model, "seed": int(seed), "method": "maml", "first_order": False, "base_model": "mlp"}
    ref.update(optim_outer="adamw", optim_inner="adamw", ignore_nan_grads_outer=True, meta_model=meta_model)
    ref.update(world.settings, twin_keep_adapted=world.r2)
    ref.update(learner)
    if cfg.model.startswith("hnet"):
        ref.update(HNET_SETTINGS)

    def warmup(value):
        if cfg.outer_schedule == "warmup_cosine" and value != 100:
            raise NotExpressible(f"warmup_steps = {value}: the reference's warm-up is fixed at 100 steps")
        return None, "run_fewshot.py: 100 steps, with warmup_cosine"

    rules = {
        "seeds": lambda value: ("seed", int(seed)),
        "model": lambda value: ("meta_model", meta_model),
        "outer_schedule": lambda value: ("schedule_outer", None if value == "constant" else value),
        "warmup_steps": warmup,
    }
    notes = {**world.notes, **dict.fromkeys(SPEED_ONLY, "speed and memory only")}
    rows = _carry(cfg, ref, {**SAME_VALUE, **world.same}, {**FIXED, **world.fixed}, notes, rules)
    unmatched = list(ALWAYS_UNMATCHED) + ([RIDGE_PROBE] if world.r2 else [])
    if world.draws:
        unmatched[0] = ("task draws and initialisation", world.draws)
    if cfg.outer_schedule == "warmup_cosine":
        unmatched.append(
            (
                "end of the cosine decay",
                "ours decays to 5 % of the peak learning rate, the reference's to 1e-7 (run_fewshot.py); the last "
                "few hundred steps take smaller steps there",
            )
        )
    return Translation(ref, tuple(rows), tuple(unmatched))


# --------------------------------------------------------------------------------------------- teacher-student

THEORY_SAME = {  # ours -> run_theory.py's key, same value
    "n_in": "n_input",
    "teacher_hidden": "n_hidden",
    "n_out": "n_output",
    "n_modules": "n_task",
    "hidden_factor": "n_hidden_student_factor",
    "module_factor": "n_task_student_factor",
    "meta_batch": "meta_batch_size",
    "batch": "batch_size",
    "inner_steps": "inner_step",
    "inner_lr": "inner_learning_rate",
    "outer_lr": "learning_rate",
    "lr_final_fraction": "cosine_alpha",
    "weight_decay": "weight_decay",
    "eval_every": "log_every",
    "eval_tasks": "eval_meta_batch_size",
    "eval_inputs": "eval_batch_size",
}
THEORY_FIXED = {
    "normalisation": ("code", "run_theory.py divides the exponential weights by their sum + 1"),
    "inner_schedule": ("constant", "run_theory.py's inner Adam has a constant rate"),
    "warmup_steps": (0, "run_theory.py's outer schedule is a cosine decay without warm-up"),
    "ridge_lambda": (0.01, "run_theory.py's decoder is a ridge with l2_reg = 0.01"),
}
THEORY_OURS_ONLY = {
    "input_sampler": "our inputs' random stream; the distribution, Uniform[-sqrt 3, sqrt 3], is the reference's",
    "expect_connected": "a check of ours on the masks, no setting",
    "ridge_cg_iters": "our ridge solver's iterations",
    "xla_opt_level": "speed and memory only",
    "fused_inner": "how a GPU computes the inner loop (one kernel), not what it computes",
}
THEORY_SETTINGS = dict(  # run_theory.py's settings for the paper's teacher-student experiment (its __main__)
    use_bias=False,
    n_hidden_layers=1,
    n_hidden_layers_student=1,
    scheduler="cosine",
    lr_step_every=0.3,
    lr_step_factor=0.3,
    embedding_init="constant",
    problem="regression",
    data_seed=42,
    datatype="sparse",
    n_hot_fraction=0.5,
    frac_ood=0.0,
    second_order=False,
)
THEORY_FIELDS = ("masks", "distribution", "hidden_factor", "module_factor", "outer_steps", "meta_batch")


def translate_theory(cfg, seed: int) -> Translation:
    """run_theory.py's config for a teacher-student ``cfg`` at ``seed`` (see :func:`translate`)."""

    def masks(value):  # run_theory.py needs masks of one length: a one-hot "0" is written "0,0"
        active = [np.flatnonzero(m).tolist() for m in cfg.mask_array()]
        width = max(map(len, active))
        return "manual_task", ";".join(",".join(map(str, a + a[:1] * (width - len(a)))) for a in active)

    def outer_steps(value):
        if value % cfg.n_modules or value % cfg.eval_every:
            raise NotExpressible(
                f"outer_steps = {value}: run_theory.py trains train_step x n_task ({cfg.n_modules}) steps in whole "
                f"chunks of log_every (eval_every = {cfg.eval_every})"
            )
        return "train_step", value // cfg.n_modules

    rules = {
        "seeds": lambda value: ("seed", int(seed)),
        "masks": masks,
        "distribution": lambda value: ("continuous_combinations", value == "continuous"),
        "outer_steps": outer_steps,
    }
    ref = {"seed": int(seed), **THEORY_SETTINGS}
    rows = _carry(cfg, ref, THEORY_SAME, THEORY_FIXED, THEORY_OURS_ONLY, rules)
    unmatched = (
        ALWAYS_UNMATCHED[0],
        (
            "alignment's decoder",
            "the reference's alignment (template_alignment_all_mean of its train-vs-OOD ridge on the training tasks) "
            "is the twin of ours; its decoder is fitted on its own evaluation draw of training tasks",
        ),
    )
    return Translation(ref, tuple(rows), unmatched)


def run_key(cfg, seed) -> str:
    """A stable key of one (config, seed) at the reference's commit (:func:`compgen.analysis.twin.run_key`)."""
    return layout.run_key(cfg, seed, COMMIT)


# --------------------------------------------------------------------------------------------- running


def train_reference(reference: Path, python: Path, translation: Translation, theory=False) -> dict:
    """Train one translated config with the reference (tools/twin_driver.py) and return its arrays. The reference
    runs on the CPU unless ``TWIN_JAX_PLATFORMS`` names another platform (``cuda`` on a GPU machine)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        out = Path(tmp) / "result.npz"
        config.write_text(json.dumps(translation.config))
        env = {**os.environ, "TQDM_DISABLE": "1", "JAX_PLATFORMS": os.environ.get("TWIN_JAX_PLATFORMS", "cpu")}
        command = [str(python), str(DRIVER), "--reference", str(reference), "--config", str(config), "--out", str(out)]
        done = subprocess.run(command + (["--theory"] if theory else []), env=env, capture_output=True, text=True)
        if done.returncode:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(f"the reference run failed (exit {done.returncode}): {tail[0]}")
        with np.load(out) as arrays:
            return {k: arrays[k] for k in arrays.files}


def _log(arrays, key):
    return np.asarray(arrays.get(f"log/{key}", np.full(len(arrays["log_step"]), np.nan)), float)


def _curve(values) -> list:
    return [round(float(v), 4) for v in values]


def summarise(chapter: str, cfg, arrays: dict) -> dict:
    """One reference run as JSON: the final numbers the chapter's claims read, a curve and the wall time.

    Few-shot chapters: per evaluation set the final value of each metric the claims read (``World.metrics``);
    hyperteacher also our R² on the fast parameters it adapted to the test and OOD tasks, and its own decoder
    R². Teacher-student: its module alignment (``template_alignment_all_mean`` of its train-vs-OOD decoder on the
    training tasks) and loss."""
    common = {"wall_s": round(float(arrays["wall_s"]), 1), "device": str(arrays.get("device", "cpu"))}
    steps = [int(s) for s in arrays["log_step"]]
    if chapter == "teacher_student":
        alignment = _log(arrays, "_train_train_vs_oodtemplate_alignment_all_mean")
        return {
            "final": {"alignment": float(alignment[-1]), "loss": float(_log(arrays, "_train_outer_loss")[-1])},
            "curve": {"step": steps, "alignment": _curve(alignment)},
            **common,
        }
    world = WORLDS[chapter]
    final = {
        n: {ours: float(_log(arrays, f"{n}_{theirs}_outer")[-1]) for ours, theirs in world.metrics.items()}
        for n in cfg.eval_set_names()
    }
    curve = {"step": steps, **{f"ood_{m}": _curve(_log(arrays, f"ood_{m}_outer")) for m in world.metrics.values()}}
    curve["train_loss"] = _curve(_log(arrays, "train_loss_outer"))
    summary = {"final": final, "curve": curve, **common}
    if world.r2:
        from compgen import metrics

        codes = {n: arrays[f"codes_{n}"].reshape(len(arrays[f"codes_{n}"]), -1) for n in ("test", "ood")}
        probe = metrics.linear_probe(
            arrays["adapted_test"],
            codes["test"],
            arrays["adapted_ood"],
            codes["ood"],
            cfg.ridge_lambda,
            cfg.ridge_cg_iters,
        )
        decoder = [k for k in arrays if k.startswith("log/decoder_r2_")]
        summary["r2_ood_pooled"] = float(probe["r2_pooled"])
        summary["reference_decoder_r2"] = float(np.mean([arrays[k][-1] for k in decoder])) if decoder else None
    return summary


def world_fields(chapter: str) -> tuple:
    """The fields that name a run's world in the record."""
    return THEORY_FIELDS if chapter == "teacher_student" else WORLDS[chapter].fields


def _write(path: Path, record: dict) -> records.Twin:
    """``record`` written to ``path`` as a checked twin record (atomically); the record written."""
    written = records.Twin.from_dict(json.loads(json.dumps(record, default=str)))
    written.save(path)
    return written


def _record_run(record: dict, chapter: str, figure: str, cfg, seed: int, translation, arrays) -> dict:
    run = {
        "figure": figure,
        "model": getattr(cfg, "model", None),
        "split": getattr(cfg, "split", None),
        "world": {k: getattr(cfg, k) for k in world_fields(chapter)},
        "seed": seed,
        **summarise(chapter, cfg, arrays),
        "translation": {"config": translation.config, "fields": translation.fields, "unmatched": translation.unmatched},
        "row": layout.config_row(chapter, figure, results.config_dict(cfg)),
    }
    record["runs"][run_key(cfg, seed)] = run
    return run


def seed_runs(chapter: str, preset: str, seed_sets):
    """Every (figure, config, seed) of the chapter's claim figures on each seed set, in training order."""
    for seeds in seed_sets:
        for figure, cfgs in claim_configs(chapter, preset, seeds)[1].items():
            for cfg in cfgs:
                for seed in cfg.seeds:
                    yield figure, cfg, seed


def train_all(args, record: dict, out: Path) -> None:
    """Train every (config, seed) of every seed set that the record lacks, ``args.jobs`` reference processes at a
    time (book's seeds first, figures in :func:`claim_figures` order; only ``args.figures`` and ``args.models`` where
    given), writing the record after each run."""
    chapter = args.chapter
    todo = {}
    for figure, cfg, seed in seed_runs(chapter, args.preset, args.seeds):
        wanted = figure in (args.figures or claim_figures(chapter)) and (
            not args.models or getattr(cfg, "model", None) in args.models
        )
        if wanted and run_key(cfg, seed) not in record["runs"]:
            todo.setdefault(run_key(cfg, seed), (figure, cfg, seed))
    lock = threading.Lock()

    def one(i, figure, cfg, seed):
        translation = translate(chapter, cfg, seed)
        start = time.perf_counter()
        fields = [str(getattr(cfg, k)) for k in ("model", "split", "distribution") if hasattr(cfg, k)]
        name = ", ".join([figure, *fields, f"seed {seed}"])
        print(f"[twin {chapter}] {i + 1}/{len(todo)}: {name} ...", flush=True)
        arrays = train_reference(args.reference, args.python, translation, chapter == "teacher_student")
        with lock:
            run = _record_run(record, chapter, figure, cfg, seed, translation, arrays)
            run["runs_at_a_time"] = max(1, args.jobs)  # reference processes sharing the device (wall time)
            _write(out, record)
        shown = ", ".join(f"{k} {v:.3g}" for k, v in tables.reference_headline(chapter, run).items())
        print(f"  {i + 1}/{len(todo)} {name}: {shown}, {time.perf_counter() - start:.0f} s", flush=True)

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(one, i, *job) for i, job in enumerate(todo.values())]
        for future in concurrent.futures.as_completed(futures):
            if future.exception() is not None:
                failed.append(future.exception())
                print(f"[twin {chapter}] {future.exception()}", flush=True)
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(todo)} reference runs failed; the record keeps the others")


def train_ours(chapter: str, preset: str, seed_sets, workers=None, train=True, figures=None, models=None) -> dict:
    """Ours at the matched world: {seed set: {config: output or None}}, the configs of ``figures`` and ``models``
    (default: all) trained or loaded by the runner when ``train``, every other config loaded from the store if it is
    there."""
    from compgen import dispatch, runner

    found = {}
    for seeds in seed_sets:
        sec, by_figure = claim_configs(chapter, preset, seeds)
        configs = list(dict.fromkeys(c for cs in by_figure.values() for c in cs))
        chosen = [c for f, cs in by_figure.items() if train and f in (figures or by_figure) for c in cs]
        chosen = [c for c in chosen if not models or getattr(c, "model", None) in models]
        chosen = list(dict.fromkeys(chosen))  # a config shared by two figures trains once
        outputs = (
            dict(zip(chosen, dispatch.train_or_load(sec, chosen, backend=backends.Workers(workers)))) if chosen else {}
        )
        stored = lambda c: runner.load(sec, c, log=lambda _: None)
        found[records.seed_set_name(seeds)] = {c: outputs[c] if c in outputs else stored(c) for c in configs}
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help=f"a checkout of {REPOSITORY} at {COMMIT[:10]}")
    parser.add_argument("--python", type=Path, default=TWIN_PYTHON, help="the twin virtualenv's python")
    parser.add_argument("--chapter", choices=sorted(chapters.twinned()), default="hyperteacher")
    parser.add_argument("--preset", default="quick")
    parser.add_argument(
        "--seeds", type=int, nargs="+", action="append", help="a seed set (repeat; default: the chapter's, and 31-33)"
    )
    parser.add_argument("--out", type=Path, help="default: book/search/twin_<chapter>.json")
    parser.add_argument("--jobs", type=int, default=1, help="reference runs at a time (default 1)")
    parser.add_argument("--no-train", action="store_true", help="only judge the claims on the recorded runs")
    parser.add_argument(
        "--ours-only",
        action="store_true",
        help="only train ours at the matched world into the store (COMPGEN_RESULTS), with --workers processes",
    )
    parser.add_argument("--workers", type=int, help="the runner's worker processes for ours (default: its own)")
    parser.add_argument(
        "--reference-only",
        action="store_true",
        help="train only the reference runs; ours at the matched world are loaded from the store if there",
    )
    parser.add_argument(
        "--figures", nargs="+", help="train only these claim figures (default: all); the claims read the whole record"
    )
    parser.add_argument(
        "--models",
        nargs="+",
        help="train only these models (default: all), the reference's and ours at a matched world",
    )
    args = parser.parse_args(argv)
    chapter = args.chapter
    unknown = set(args.figures or ()) - set(claim_figures(chapter))
    if unknown:
        parser.error(f"--figures: {sorted(unknown)} not among {chapter}'s claim figures {claim_figures(chapter)}")
    if args.models and (chapter == "teacher_student" or set(args.models) - set(MODEL)):
        choices = "none to choose" if chapter == "teacher_student" else sorted(MODEL)
        parser.error(f"--models: {chapter}'s models are {choices}")
    if not args.seeds:
        _, by_figure = claim_configs(chapter, args.preset, None)
        args.seeds = [sorted({s for cs in by_figure.values() for c in cs for s in c.seeds}), list(SECOND_SET)]
    if args.ours_only:
        if not layout.matched(chapter, args.preset):
            parser.error(f"--ours-only: {chapter} at {args.preset} has no matched world (ours are the book's runs)")
        train_ours(chapter, args.preset, args.seeds, args.workers, figures=args.figures, models=args.models)
        return 0
    out = args.out or ROOT / "book" / "search" / f"twin_{chapter}.json"
    try:
        loaded = layout.load_twin(out)
        record = {} if loaded is None else loaded.to_dict()
    except recordfile.RecordError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    record.update(
        code_key=layout.code_key(chapter),
        code_versions=programs.versions(),
        about="The chapter's claim configs trained with the authors' implementation (tools/twin.py), judged by the "
        "chapter's own claims code on the reference's numbers.",
        reference={"repository": REPOSITORY, "commit": COMMIT},
        chapter=chapter,
        preset=args.preset,
        seed_sets=args.seeds,
        matched_world=layout.matched(chapter, args.preset),
        not_expressible=NOT_EXPRESSIBLE.get((chapter, args.preset), {}),
    )
    record.setdefault("runs", {})
    if not args.no_train:
        train_all(args, record, out)
    for figure, cfg, seed in seed_runs(chapter, args.preset, args.seeds):  # every run's table row, from its config
        run = record["runs"].get(run_key(cfg, seed))
        if run is not None and (run["figure"] == figure or "row" not in run):  # a shared config: its own figure's
            run["row"] = layout.config_row(chapter, figure, results.config_dict(cfg))
    sets = [records.seed_set_name(seeds) for seeds in args.seeds]
    if record["matched_world"]:  # ours at the same world, trained (or loaded) by the runner
        train = not (args.no_train or args.reference_only)
        trained = train_ours(chapter, args.preset, args.seeds, args.workers, train, args.figures, args.models)
        rows = []
        for s, seeds in zip(sets, args.seeds):
            output_of = trained[s].get
            for figure, cfgs in claim_configs(chapter, args.preset, seeds)[1].items():
                for cfg in cfgs:
                    if output_of(cfg) is not None:
                        values = layout.our_finals(chapter, cfg, output_of(cfg))
                        row = layout.config_row(chapter, figure, results.config_dict(cfg))
                        rows.append(
                            {
                                "row": row,
                                "seeds": list(cfg.seeds),
                                "values": {k: np.asarray(v).tolist() for k, v in values.items()},
                            }
                        )
        # a row recorded earlier whose run the store no longer holds (other code, another machine) is kept as data
        made = {(json.dumps(r["row"], sort_keys=True), tuple(r["seeds"])) for r in rows}
        for r in record.get("ours_matched_rows", []):
            if (json.dumps(r["row"], sort_keys=True), tuple(r["seeds"])) not in made:
                rows.append(r)
        record["ours_matched_rows"] = rows
    written = _write(out, record)
    print(f"{len(written.runs)} reference runs in {out}")
    for s, found in layout.judged(written).items():  # what the book will show, judged now
        for who, claims in found.items():
            for c in claims or ():
                print(f"[{who}, seeds {s}] {c.figure} {c.claim}: {c.verdict} ({c.ours})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
