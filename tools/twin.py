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
the run in progress, and a rerun trains only what the record lacks. The reference checkout stays outside this
repository; nothing of it is copied here.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from compgen import results
from compgen.figures import twin as tables

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tools" / "twin_driver.py"
REPOSITORY = "smonsays/modular-hyperteacher"
COMMIT = "2680b5c6a5fd88f1487a6f794cf70d20b7bc261e"
TWIN_PYTHON = ROOT / ".venv-twin" / "bin" / "python"
SECOND_SET = (31, 32, 33)  # the seeds of tools/second_set.py
# The figures whose configs the claims read, per chapter the tool can twin (fig3e's K = 4 cell is fig3b's).
CLAIM_FIGURES = {"hyperteacher": ("fig3cd", "fig3e", "fig3b"), "teacher_student": ("fig2c",)}
# The nearest world the reference can express, where it cannot express a preset's: {(chapter, preset): {figure:
# changes}}. The tool trains ours at that world too (same store, same runner), so the comparison is like for like.
# run_theory.py trains train_step * n_task outer steps, evaluated every log_every steps in whole chunks, with a cosine
# outer schedule and no warm-up: quick's 8,000 steps with a 400-step warm-up become 7,998 steps (1,333 x 6), no warm-up.
MATCHED = {("teacher_student", "quick"): {"fig2c": dict(warmup_steps=0, outer_steps=7998, eval_every=1333)}}
# Claims the reference cannot express at a preset, with why (the record and the results page say so).
NOT_EXPRESSIBLE = {
    ("teacher_student", "quick"): {
        "Fig. 2D": "quick's Fig. 2D decays the inner rate (0.2, cosine over 50 steps); run_theory.py's inner Adam has "
        "a constant rate, and a constant-rate regime of that world is a new search, not a twin",
        "Table A1": "the same inner schedule as Fig. 2D",
    }
}

# ours -> the reference's flat config key (run_fewshot.py, configs/common.py), for fields whose value carries over
# unchanged.
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
    "n_modules": "dataset_num_experts",
    "max_hot": "dataset_num_hot",
    "frac_ood": "dataset_frac_ood",
    "teacher_hidden": "dataset_hidden_dim",
    "temperature": "dataset_targets_temperature",
    "shots_support": "dataset_shots_train",
    "shots_query": "dataset_shots_test",
    "templates_per_module": "ratio_templates_experts",
}
# Fields that change speed and memory only (compgen.experiments.fewshot.MEMORY_ONLY and the compiler's level).
SPEED_ONLY = ("eval_chunk", "train_chunk", "remat", "xla_opt_level")
# Fields whose value the reference fixes: ours must hold that value, or the config is not expressible.
FIXED = {
    "n_in": (16, "configs/common.py fixes input_dim = 16"),
    "n_out": (8, "configs/common.py fixes output_dim = 8"),
    "norm_inputs": (1000, "the reference standardises each teacher unit over 1,000 fixed inputs"),
    "inner_weight_decay": (1e-4, "the reference's inner AdamW keeps optax's default weight decay, 1e-4"),
    "gradient": ("second_order", "first_order = False: the exact meta-gradient through the inner loop"),
    "ridge_lambda": (1.0, "the reference's decoder (callbacks.py) is a ridge with l2_reg = 1.0"),
}
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
WORLD = {  # the reference's fixed settings of the hyperteacher world as the paper runs it
    "hyperteacher": dict(
        dataset="hyperteacher",
        dataset_num_hidden=3,
        dataset_normalize_classifier=True,
        dataset_train_test_split=True,
        dataset_continuous_combinations=False,
        dataset_chunking=False,
    )
}
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
    (
        "ridge probe",
        "our R² (r2_ood_pooled) is computed by compgen.metrics.linear_probe on the fast parameters the reference "
        "adapted to the test and OOD tasks; the reference's own decoder R² (mean over layers and experts, with an "
        "intercept) is recorded beside it",
    ),
)


class NotExpressible(ValueError):
    """The reference cannot express this config (a fixed field differs); the message says which and why."""


@dataclasses.dataclass(frozen=True)
class Translation:
    """The reference's flat config for one seed, and how each of our fields was carried over."""

    config: dict
    fields: tuple  # (our field, our value, reference key or None, reference value or the reason)
    unmatched: tuple  # (what, why)


def translate(section_name: str, cfg, seed: int) -> Translation:
    """The reference's config for ``cfg`` (a config of ``section_name``) at ``seed``; every field of ``cfg`` is
    either carried over, speed-only, fixed by the reference at the same value, or raises :class:`NotExpressible`.
    """
    if section_name == "teacher_student":
        return translate_theory(cfg, seed)
    if section_name not in WORLD:
        raise NotExpressible(f"the twin tool translates {sorted(WORLD) + ['teacher_student']}, not {section_name!r}")
    meta_model, learner = MODEL[cfg.model]
    ref = {"name": cfg.model, "seed": int(seed), "method": "maml", "first_order": False, "base_model": "mlp"}
    ref.update(optim_outer="adamw", optim_inner="adamw", ignore_nan_grads_outer=True, meta_model=meta_model)
    ref.update(WORLD[section_name])
    ref.update(learner)
    if cfg.model.startswith("hnet"):
        ref.update(HNET_SETTINGS)
    rows, unmatched = [], list(ALWAYS_UNMATCHED)
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name in SAME_VALUE:
            ref[SAME_VALUE[f.name]] = value
            rows.append((f.name, value, SAME_VALUE[f.name], value))
        elif f.name in SPEED_ONLY:
            rows.append((f.name, value, None, "speed and memory only"))
        elif f.name in FIXED:
            fixed, why = FIXED[f.name]
            if value != fixed:
                raise NotExpressible(f"{f.name} = {value!r}: {why}")
            rows.append((f.name, value, None, why))
        elif f.name == "seeds":
            rows.append(("seeds", seed, "seed", seed))
        elif f.name == "model":
            rows.append(("model", value, "meta_model", meta_model))
        elif f.name == "outer_schedule":
            ref["schedule_outer"] = None if value == "constant" else value
            rows.append((f.name, value, "schedule_outer", ref["schedule_outer"]))
            if value == "warmup_cosine":
                unmatched.append(
                    (
                        "end of the cosine decay",
                        "ours decays to 5 % of the peak learning rate, the reference's to 1e-7 "
                        "(run_fewshot.py); the last few hundred steps take smaller steps there",
                    )
                )
        elif f.name == "warmup_steps":
            if cfg.outer_schedule == "warmup_cosine" and value != 100:
                raise NotExpressible(f"warmup_steps = {value}: the reference's warm-up is fixed at 100 steps")
            rows.append((f.name, value, None, "run_fewshot.py: 100 steps, with warmup_cosine"))
        elif f.name in ("probe", "ridge_cg_iters"):
            rows.append((f.name, value, None, "our probe, on the reference's adapted fast parameters"))
        else:
            raise NotExpressible(f"{f.name} has no counterpart in the reference and no stated reason")
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


def translate_theory(cfg, seed: int) -> Translation:
    """run_theory.py's config for a teacher-student ``cfg`` at ``seed`` (see :func:`translate`)."""
    ref = {"seed": int(seed), **THEORY_SETTINGS}
    rows, unmatched = [], [ALWAYS_UNMATCHED[0]]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name in THEORY_SAME:
            ref[THEORY_SAME[f.name]] = value
            rows.append((f.name, value, THEORY_SAME[f.name], value))
        elif f.name in THEORY_FIXED:
            fixed, why = THEORY_FIXED[f.name]
            if value != fixed:
                raise NotExpressible(f"{f.name} = {value!r}: {why}")
            rows.append((f.name, value, None, why))
        elif f.name in THEORY_OURS_ONLY:
            rows.append((f.name, value, None, THEORY_OURS_ONLY[f.name]))
        elif f.name == "seeds":
            rows.append(("seeds", seed, "seed", seed))
        elif f.name == "masks":  # run_theory.py needs masks of one length: a one-hot "0" is written "0,0"
            active = [np.flatnonzero(m).tolist() for m in cfg.mask_array()]
            width = max(map(len, active))
            ref["manual_task"] = ";".join(",".join(map(str, a + a[:1] * (width - len(a)))) for a in active)
            rows.append((f.name, value, "manual_task", ref["manual_task"]))
        elif f.name == "distribution":
            ref["continuous_combinations"] = value == "continuous"
            rows.append((f.name, value, "continuous_combinations", ref["continuous_combinations"]))
        elif f.name == "outer_steps":
            if value % cfg.n_modules or value % cfg.eval_every:
                raise NotExpressible(
                    f"outer_steps = {value}: run_theory.py trains train_step x n_task ({cfg.n_modules}) steps in whole "
                    f"chunks of log_every (eval_every = {cfg.eval_every})"
                )
            ref["train_step"] = value // cfg.n_modules
            rows.append((f.name, value, "train_step", ref["train_step"]))
        else:
            raise NotExpressible(f"{f.name} has no counterpart in run_theory.py and no stated reason")
    unmatched.append(
        (
            "alignment's decoder",
            "the reference's alignment (template_alignment_all_mean of its train-vs-OOD ridge on the training tasks) "
            "is the twin of ours; its decoder is fitted on its own evaluation draw of training tasks",
        )
    )
    return Translation(ref, tuple(rows), tuple(unmatched))


def run_key(cfg, seed) -> str:
    """A stable key of one (config, seed): the config with that seed alone, and the reference commit."""
    fields = {**results.config_dict(cfg), "seeds": [int(seed)]}
    payload = json.dumps({"class": type(cfg).__name__, "commit": COMMIT, **fields}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------- running


def train_reference(reference: Path, python: Path, translation: Translation, theory=False) -> dict:
    """Train one translated config with the reference (tools/twin_driver.py) and return its arrays."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        out = Path(tmp) / "result.npz"
        config.write_text(json.dumps(translation.config))
        env = {**os.environ, "TQDM_DISABLE": "1", "JAX_PLATFORMS": "cpu"}
        command = [str(python), str(DRIVER), "--reference", str(reference), "--config", str(config), "--out", str(out)]
        done = subprocess.run(command + (["--theory"] if theory else []), env=env, capture_output=True, text=True)
        if done.returncode:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(f"the reference run failed (exit {done.returncode}): {tail[0]}")
        with np.load(out) as arrays:
            return {k: arrays[k] for k in arrays.files}


def _log(arrays, key):
    return np.asarray(arrays.get(f"log/{key}", np.full(len(arrays["log_step"]), np.nan)), float)


def summarise(chapter: str, cfg, arrays: dict) -> dict:
    """One reference run as JSON: the final numbers the chapter's claims read, a curve and the wall time.

    Hyperteacher: per evaluation set the final query accuracy and loss, our R² on the fast parameters it adapted
    to the test and OOD tasks, and its own decoder R². Teacher-student: its module alignment
    (``template_alignment_all_mean`` of its train-vs-OOD decoder on the training tasks) and loss."""
    common = {"wall_s": round(float(arrays["wall_s"]), 1)}
    steps = [int(s) for s in arrays["log_step"]]
    if chapter == "teacher_student":
        alignment = _log(arrays, "_train_train_vs_oodtemplate_alignment_all_mean")
        return {
            "final": {"alignment": float(alignment[-1]), "loss": float(_log(arrays, "_train_outer_loss")[-1])},
            "curve": {"step": steps, "alignment": [round(float(v), 4) for v in alignment]},
            **common,
        }
    from compgen import metrics

    final = {
        n: {"accuracy": float(_log(arrays, f"{n}_acc_outer")[-1]), "loss": float(_log(arrays, f"{n}_loss_outer")[-1])}
        for n in cfg.eval_set_names()
    }
    codes = {n: arrays[f"codes_{n}"].reshape(len(arrays[f"codes_{n}"]), -1) for n in ("test", "ood")}
    probe = metrics.linear_probe(
        arrays["adapted_test"], codes["test"], arrays["adapted_ood"], codes["ood"], cfg.ridge_lambda, cfg.ridge_cg_iters
    )
    decoder = [k for k in arrays if k.startswith("log/decoder_r2_")]
    return {
        "final": final,
        "r2_ood_pooled": float(probe["r2_pooled"]),
        "reference_decoder_r2": float(np.mean([arrays[k][-1] for k in decoder])) if decoder else None,
        "curve": {
            "step": steps,
            "ood_accuracy": [round(float(v), 4) for v in _log(arrays, "ood_acc_outer")],
            "train_loss": [round(float(v), 4) for v in _log(arrays, "train_loss_outer")],
        },
        **common,
    }


WORLD_FIELDS = {
    "hyperteacher": ("n_modules", "max_hot", "outer_steps", "meta_batch"),
    "teacher_student": ("masks", "distribution", "hidden_factor", "module_factor", "outer_steps", "meta_batch"),
}


def reference_output(chapter: str, cfg, runs: list) -> dict:
    """The reference's runs of ``cfg`` (one summary per seed, in ``cfg.seeds`` order) laid out as our runs'
    outputs at their last evaluation, so that a chapter's ``claims`` reads them: ``eval/<metric>`` (seeds, 1,
    n_sets) and ``eval/r2_ood_pooled`` (seeds, 1); teacher-student ``eval/alignment`` (seeds, 1)."""
    if chapter == "teacher_student":
        return {"eval/alignment": np.array([[r["final"]["alignment"]] for r in runs])}
    names = cfg.eval_set_names()
    out = {f"eval/{m}": np.array([[[r["final"][n][m] for n in names]] for r in runs]) for m in ("accuracy", "loss")}
    out["eval/r2_ood_pooled"] = np.array([[r["r2_ood_pooled"]] for r in runs])
    return out


def claim_configs(chapter: str, preset: str, seeds):
    """(section, {figure: configs}) of the chapter's claim figures at ``preset`` with ``seeds``, each moved to the
    nearest world the reference expresses (:data:`MATCHED`) where it cannot express the preset's."""
    from compgen.figures import chapter_configs

    sec, by_figure = chapter_configs(chapter, preset, None if seeds is None else list(seeds), CLAIM_FIGURES[chapter])
    changes = MATCHED.get((chapter, preset), {})
    return sec, {f: [dataclasses.replace(c, **changes.get(f, {})) for c in cs] for f, cs in by_figure.items()}


def judge(chapter: str, preset: str, seeds, outputs_of) -> list:
    """The chapter's claims on ``outputs_of(config)`` (``None``: not run), with the chapter's own claims code."""
    from compgen.figures import Runs
    from compgen.figures.glance import CHAPTERS

    sec, by_figure = claim_configs(chapter, preset, seeds)
    outputs = {c: outputs_of(c) for cs in by_figure.values() for c in cs}
    return CHAPTERS[chapter].claims(Runs(sec, preset, by_figure, outputs))


def reference_claims(chapter: str, preset: str, seeds, record: dict) -> list:
    """The chapter's claims judged on the reference's runs in ``record`` (configs without every seed: not run)."""

    def outputs_of(cfg):
        found = [record["runs"].get(run_key(cfg, s)) for s in cfg.seeds]
        return reference_output(chapter, cfg, found) if all(found) else None

    return judge(chapter, preset, seeds, outputs_of)


def _entries(claims) -> list:
    return [{"figure": c.figure, "claim": c.claim, "verdict": c.verdict, "ours": c.ours} for c in claims]


def _write(path: Path, record: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str) + "\n")
    tmp.replace(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help=f"a checkout of {REPOSITORY} at {COMMIT[:10]}")
    parser.add_argument("--python", type=Path, default=TWIN_PYTHON, help="the twin virtualenv's python")
    parser.add_argument("--chapter", choices=sorted(CLAIM_FIGURES), default="hyperteacher")
    parser.add_argument("--preset", default="quick")
    parser.add_argument(
        "--seeds", type=int, nargs="+", action="append", help="a seed set (repeat; default: the chapter's, and 31-33)"
    )
    parser.add_argument("--out", type=Path, help="default: book/search/twin_<chapter>.json")
    parser.add_argument("--no-train", action="store_true", help="only judge the claims on the recorded runs")
    args = parser.parse_args(argv)
    chapter = args.chapter
    if not args.seeds:
        _, by_figure = claim_configs(chapter, args.preset, None)
        args.seeds = [sorted({s for cs in by_figure.values() for c in cs for s in c.seeds}), list(SECOND_SET)]
    out = args.out or ROOT / "book" / "search" / f"twin_{chapter}.json"
    record = json.loads(out.read_text()) if out.exists() else {}
    record.update(
        about="The chapter's claim configs trained with the authors' implementation (tools/twin.py), judged by the "
        "chapter's own claims code on the reference's numbers.",
        reference={"repository": REPOSITORY, "commit": COMMIT},
        chapter=chapter,
        preset=args.preset,
        seed_sets=args.seeds,
        matched_world=MATCHED.get((chapter, args.preset), {}),
        not_expressible=NOT_EXPRESSIBLE.get((chapter, args.preset), {}),
    )
    record.setdefault("runs", {})
    for seeds in args.seeds:
        _, by_figure = claim_configs(chapter, args.preset, seeds)
        configs = list(dict.fromkeys(c for cs in by_figure.values() for c in cs))
        for i, cfg in enumerate(configs):
            for seed in cfg.seeds:
                key = run_key(cfg, seed)
                if key in record["runs"] or args.no_train:
                    continue
                translation = translate(chapter, cfg, seed)
                start = time.perf_counter()
                print(f"[twin {chapter}] config {i + 1}/{len(configs)}, seed {seed} ...", flush=True)
                arrays = train_reference(args.reference, args.python, translation, chapter == "teacher_student")
                figure = next(name for name, cs in by_figure.items() if cfg in cs)
                record["runs"][key] = {
                    "figure": figure,
                    "model": getattr(cfg, "model", None),
                    "split": getattr(cfg, "split", None),
                    "world": {k: getattr(cfg, k) for k in WORLD_FIELDS[chapter]},
                    "seed": seed,
                    **summarise(chapter, cfg, arrays),
                    "translation": {
                        "config": translation.config,
                        "fields": translation.fields,
                        "unmatched": translation.unmatched,
                    },
                }
                record["runs"][key]["row"] = tables.config_row(chapter, figure, results.config_dict(cfg))
                _write(out, record)
                headline = tables.reference_headline(chapter, record["runs"][key])
                shown = ", ".join(f"{k} {v:.3g}" for k, v in headline.items())
                print(f"  {shown}, {time.perf_counter() - start:.0f} s", flush=True)
    for seeds in args.seeds:  # every run's table row, from its config (records made before rows were kept too)
        for figure, cfgs in claim_configs(chapter, args.preset, seeds)[1].items():
            for cfg in cfgs:
                for seed in cfg.seeds:
                    if run_key(cfg, seed) in record["runs"]:
                        row = tables.config_row(chapter, figure, results.config_dict(cfg))
                        record["runs"][run_key(cfg, seed)]["row"] = row
    sets = [",".join(map(str, seeds)) for seeds in args.seeds]
    record["claims"] = {
        s: _entries(reference_claims(chapter, args.preset, seeds, record)) for s, seeds in zip(sets, args.seeds)
    }
    if record["matched_world"]:  # ours at the same world, trained (or loaded) by the runner, judged the same way
        from compgen import runner

        ours, rows = {}, []
        for s, seeds in zip(sets, args.seeds):
            sec, by_figure = claim_configs(chapter, args.preset, seeds)
            configs = list(dict.fromkeys(c for cs in by_figure.values() for c in cs))
            outputs = dict(zip(configs, runner.run(sec, configs))) if not args.no_train else {}
            output_of = lambda c: outputs.get(c) or runner.load(sec, c)  # noqa: E731
            ours[s] = _entries(judge(chapter, args.preset, seeds, output_of))
            for figure, cfgs in by_figure.items():
                for cfg in cfgs:
                    if output_of(cfg) is not None:
                        values = tables.our_headline(chapter, cfg, output_of(cfg))
                        row = tables.config_row(chapter, figure, results.config_dict(cfg))
                        rows.append(
                            {
                                "row": row,
                                "seeds": list(cfg.seeds),
                                "values": {k: np.asarray(v).tolist() for k, v in values.items()},
                            }
                        )
        record["ours_matched"], record["ours_matched_rows"] = ours, rows
    _write(out, record)
    print(f"{len(record['runs'])} reference runs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
