"""Twin runs: train a chapter's configs with the authors' implementation and judge its claims on their numbers.

    make twin-env REFERENCE=/path/to/modular-hyperteacher          # once: .venv-twin with the reference's deps
    .venv/bin/python tools/twin.py --reference /path/to/modular-hyperteacher --chapter hyperteacher \\
        --seeds 2020 2021 2022 --seeds 31 32 33

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

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tools" / "twin_driver.py"
REPOSITORY = "smonsays/modular-hyperteacher"
COMMIT = "2680b5c6a5fd88f1487a6f794cf70d20b7bc261e"
TWIN_PYTHON = ROOT / ".venv-twin" / "bin" / "python"
# The figures whose configs the claims read, per chapter the tool can twin (fig3e's K = 4 cell is fig3b's).
CLAIM_FIGURES = {"hyperteacher": ("fig3cd", "fig3b", "fig3e")}

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
    "hnet_deepmlp": ("hnet_deepmlp", dict(chunking=True)),
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
    if section_name not in WORLD:
        raise NotExpressible(f"the twin tool translates {sorted(WORLD)}, not {section_name!r}")
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


def run_key(cfg, seed) -> str:
    """A stable key of one (config, seed): the config with that seed alone, and the reference commit."""
    from compgen import results

    fields = {**results.config_dict(cfg), "seeds": [int(seed)]}
    payload = json.dumps({"class": type(cfg).__name__, "commit": COMMIT, **fields}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------- running


def train_reference(reference: Path, python: Path, translation: Translation, log=print) -> dict:
    """Train one translated config with the reference (tools/twin_driver.py) and return its arrays."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        out = Path(tmp) / "result.npz"
        config.write_text(json.dumps(translation.config))
        env = {**os.environ, "TQDM_DISABLE": "1", "JAX_PLATFORMS": "cpu"}
        done = subprocess.run(
            [str(python), str(DRIVER), "--reference", str(reference), "--config", str(config), "--out", str(out)],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(f"the reference run failed (exit {done.returncode}): {tail[0]}")
        with np.load(out) as arrays:
            return {k: arrays[k] for k in arrays.files}


def summarise(cfg, arrays: dict) -> dict:
    """One reference run as JSON: per evaluation set the final query accuracy and loss, the OOD curve, our R² on
    its adapted fast parameters and its own decoder R², and the wall time."""
    from compgen import metrics

    names = cfg.eval_set_names()
    log = lambda key: np.asarray(arrays.get(f"log/{key}", np.full(len(arrays["log_step"]), np.nan)), float)
    final = {
        n: {"accuracy": float(log(f"{n}_acc_outer")[-1]), "loss": float(log(f"{n}_loss_outer")[-1])} for n in names
    }
    probe = metrics.linear_probe(
        arrays["adapted_test"],
        arrays["codes_test"].reshape(len(arrays["codes_test"]), -1),
        arrays["adapted_ood"],
        arrays["codes_ood"].reshape(len(arrays["codes_ood"]), -1),
        cfg.ridge_lambda,
        cfg.ridge_cg_iters,
    )
    decoder = [k for k in arrays if k.startswith("log/decoder_r2_")]
    return {
        "final": final,
        "r2_ood_pooled": float(probe["r2_pooled"]),
        "reference_decoder_r2": float(np.mean([arrays[k][-1] for k in decoder])) if decoder else None,
        "curve": {
            "step": [int(s) for s in arrays["log_step"]],
            "ood_accuracy": [round(float(v), 4) for v in log("ood_acc_outer")],
            "train_loss": [round(float(v), 4) for v in log("train_loss_outer")],
        },
        "wall_s": round(float(arrays["wall_s"]), 1),
    }


def reference_output(cfg, runs: list) -> dict:
    """The reference's runs of ``cfg`` (one summary per seed, in ``cfg.seeds`` order) laid out as our runs'
    outputs at their last evaluation, so that a chapter's ``claims`` reads them: ``eval/<metric>`` (seeds, 1,
    n_sets) and ``eval/r2_ood_pooled`` (seeds, 1)."""
    names = cfg.eval_set_names()
    out = {f"eval/{m}": np.array([[[r["final"][n][m] for n in names]] for r in runs]) for m in ("accuracy", "loss")}
    out["eval/r2_ood_pooled"] = np.array([[r["r2_ood_pooled"]] for r in runs])
    return out


def chapter_claims(chapter: str, preset: str, seeds, record: dict):
    """The chapter's claims judged on the reference's runs in ``record`` (configs without every seed: not run)."""
    from compgen import experiments
    from compgen.figures import Runs, chapter_configs
    from compgen.figures.glance import CHAPTERS

    sec, by_figure = chapter_configs(chapter, preset, list(seeds), CLAIM_FIGURES[chapter])
    outputs = {}
    for cfgs in by_figure.values():
        for cfg in cfgs:
            found = [record["runs"].get(run_key(cfg, s)) for s in cfg.seeds]
            outputs[cfg] = reference_output(cfg, found) if all(found) else None
    assert sec is experiments.get(chapter)
    return CHAPTERS[chapter].claims(Runs(sec, preset, by_figure, outputs))


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
    parser.add_argument("--seeds", type=int, nargs="+", action="append", required=True, help="a seed set (repeat)")
    parser.add_argument("--out", type=Path, help="default: book/search/twin_<chapter>.json")
    parser.add_argument("--no-train", action="store_true", help="only judge the claims on the recorded runs")
    args = parser.parse_args(argv)
    from compgen.figures import chapter_configs

    out = args.out or ROOT / "book" / "search" / f"twin_{args.chapter}.json"
    record = json.loads(out.read_text()) if out.exists() else {}
    record.update(
        about="The chapter's claim configs trained with the authors' implementation (tools/twin.py), judged by the "
        "chapter's own claims code on the reference's numbers.",
        reference={"repository": REPOSITORY, "commit": COMMIT},
        chapter=args.chapter,
        preset=args.preset,
        seed_sets=args.seeds,
    )
    record.setdefault("runs", {})
    for seeds in args.seeds:
        _, by_figure = chapter_configs(args.chapter, args.preset, seeds, CLAIM_FIGURES[args.chapter])
        configs = list(dict.fromkeys(c for cs in by_figure.values() for c in cs))
        for i, cfg in enumerate(configs):
            for seed in cfg.seeds:
                key = run_key(cfg, seed)
                if key in record["runs"] or args.no_train:
                    continue
                translation = translate(args.chapter, cfg, seed)
                start = time.perf_counter()
                print(
                    f"[twin {args.chapter}] config {i + 1}/{len(configs)} {cfg.model} {cfg.split} "
                    f"M={cfg.n_modules} K={cfg.max_hot}, seed {seed} ...",
                    flush=True,
                )
                summary = summarise(cfg, train_reference(args.reference, args.python, translation))
                figure = next(name for name, cs in by_figure.items() if cfg in cs)
                record["runs"][key] = {
                    "figure": figure,
                    "model": cfg.model,
                    "split": cfg.split,
                    "world": {k: getattr(cfg, k) for k in ("n_modules", "max_hot", "outer_steps", "meta_batch")},
                    "seed": seed,
                    **summary,
                    "translation": {
                        "config": translation.config,
                        "fields": translation.fields,
                        "unmatched": translation.unmatched,
                    },
                }
                _write(out, record)
                print(
                    f"  OOD accuracy {100 * summary['final']['ood']['accuracy']:.1f} %, R² "
                    f"{summary['r2_ood_pooled']:.2f}, {time.perf_counter() - start:.0f} s",
                    flush=True,
                )
    record["claims"] = {
        ",".join(map(str, seeds)): [
            {"figure": c.figure, "claim": c.claim, "verdict": c.verdict, "ours": c.ours}
            for c in chapter_claims(args.chapter, args.preset, seeds, record)
        ]
        for seeds in args.seeds
    }
    _write(out, record)
    print(f"{len(record['runs'])} reference runs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
