"""The paper-scale ledger: the paper's runs in order of value, continued lease by lease on whatever device is lent.

A ledger (``book/records/ledger.json``, a ``ledger`` record) lists :class:`Work` items: each picks configs of one
figure at a preset, all of one shape, which train as lanes of one program. A work's state is a folder
(``book/records/paper/<name>/``) holding

* ``progress.json`` (a ``paper_run`` record, :func:`progress_record`): steps done of the total, the evaluations so
  far, the training loss averaged over each block of ``eval_every`` steps, every lease's device, knobs and seconds;
* its newest checkpoint (``step-<done>.ckpt``, :class:`compgen.checkpoint.Checkpointer`, compressed): the training
  state and the same history, from which the next lease resumes.

:func:`advance` continues one work from its folder for a time budget, a checkpoint after every chunk of steps; a work
continued over any number of leases equals one uninterrupted run on the same device with the same chunk (the state
is restored bit for bit and the chunks are the same compiled program). The steps' own metrics are kept per chunk
(mean loss, last streak and skip count), so a checkpoint stays small at 60,000 steps.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import jax
import numpy as np

from compgen import catalog, checkpoint, devices, params, recordfile, records, results, runner, section

LEDGER = "ledger.json"
PROGRESS = "progress.json"


class OutOfTime(RuntimeError):
    """A budget ended a work before its last step; its checkpoint and progress are saved."""


def matching(configs, pick: dict) -> list:
    """The configs of ``configs`` whose fields equal ``pick``'s values (compared as text, as JSON keeps them)."""
    return [c for c in configs if all(str(getattr(c, k, None)) == str(v) for k, v in pick.items())]


@dataclasses.dataclass(frozen=True)
class Work:
    """One piece of paper-scale work: the configs of ``figure`` of ``section`` at ``preset`` that ``select`` picks
    (each a ``{field: value}`` naming one config, in order), called ``labels`` on the page."""

    name: str
    section: str
    figure: str
    preset: str
    select: tuple
    labels: tuple
    why: str = ""

    def configs(self, preset: str | None = None, **knobs) -> list:
        """The selected configs at ``preset`` (default the work's), with the device ``knobs`` given
        (:data:`compgen.devices.KNOBS`); a selection naming no config, or configs of different shapes, is a
        :class:`compgen.params.ParameterError`."""
        preset = preset or self.preset
        sec = catalog.SECTIONS[self.section]
        every = section.figure_configs(sec, self.figure, preset, **knobs)
        chosen = []
        for pick in self.select:
            found = matching(every, pick)
            if len(found) != 1:
                raise params.ParameterError(
                    f"ledger work {self.name!r}: {pick} names {len(found)} configs of {self.figure} at {preset}, "
                    "not one"
                )
            chosen.append(found[0])
        if len({sec.shape_key(c) for c in chosen}) != 1:
            raise params.ParameterError(f"ledger work {self.name!r}: its configs differ in shape; split it")
        return chosen


def read(path) -> list:
    """The :class:`Work` items of the ledger at ``path``, in order."""

    def deep(record):
        names = [w["name"] for w in record["work"]]
        if len(set(names)) != len(names):
            raise ValueError(f"work names repeat: {names}")
        for w in record["work"]:
            if w["section"] not in catalog.SECTIONS:
                raise ValueError(
                    f"work {w['name']!r} names section {w['section']!r}, not one of {list(catalog.SECTIONS)}"
                )
            if len(w["select"]) != len(w["labels"]) or not w["select"]:
                raise ValueError(f"work {w['name']!r} needs one label per selected config")

    record = records.Ledger.load(path, deep)
    return [Work(**{**w, "select": tuple(w["select"]), "labels": tuple(w["labels"])}) for w in record.work]


def read_progress(folder) -> records.PaperRun | None:
    """The ``paper_run`` record of the work whose state is ``folder``, or ``None`` before its first lease."""
    return records.PaperRun.load_if_there(Path(folder) / PROGRESS)


def staleness(record) -> list:
    """Why a ``paper_run`` record no longer shows what the current code computes (empty: current): the section's
    code fingerprint differs or is not recorded, or a config differs from the one its selection names at its preset
    now (device knobs apart)."""
    sec = catalog.SECTIONS[record.section]
    why = [w] if (w := recordfile.stale(record.fingerprint(), sec.fingerprint)) else []
    every = section.figure_configs(sec, record.figure, record.preset)
    for entry in record.configs:
        found = matching(every, entry["select"])
        if len(found) != 1:
            why.append(f"{entry['label']} is no longer in {record.figure} at {record.preset}")
            continue
        now = {k: v for k, v in results.config_dict(found[0]).items() if k not in devices.KNOBS}
        changed = sorted(k for k in now.keys() | entry["config"].keys() if entry["config"].get(k) != now.get(k))
        if changed:
            why.append(f"{entry['label']}: its config changed ({', '.join(changed)})")
    return why


def chunk_for(eval_every: int, chunk: int | None = None) -> int:
    """Outer steps per compiled call: ``chunk`` (a divisor of ``eval_every``), else the largest divisor of
    ``eval_every`` up to 100, so that a budget is checked at least every 100 steps."""
    if chunk is None:
        return max(d for d in range(1, min(eval_every, 100) + 1) if eval_every % d == 0)
    chunk = params.check_int("chunk", chunk, ge=1)
    if eval_every % chunk:
        raise params.ParameterError(f"chunk must divide eval_every ({eval_every}), got {chunk}")
    return chunk


def _per_chunk(metrics) -> dict:
    """One chunk's per-step metrics (steps, runs) as one row (1, runs): the mean loss, the last streak and skips."""
    return {
        k: (np.mean(v, axis=0, keepdims=True) if k == "loss" else np.asarray(v)[-1:])
        for k, v in jax.device_get(metrics).items()
    }


def advance(work, folder, budget_s=math.inf, preset=None, chunk=None, knobs=None, log=print, clock=time.monotonic):
    """Continue ``work`` from the checkpoint in ``folder`` (from its start if there is none, or if its state was made
    by other code or configs, :func:`staleness`) until it is complete or ``budget_s`` seconds would be exceeded by the
    next chunk (at least one chunk runs), saving a checkpoint and ``progress.json`` after every chunk. ``preset``
    overrides the work's (a rehearsal at ``smoke``); ``chunk``: outer steps per call (default: its last lease's, else
    :func:`chunk_for`); ``knobs``: device choices (:data:`compgen.devices.KNOBS`), recorded per lease. Returns the
    progress record; raises :class:`OutOfTime` (after saving) where the budget ended it first."""
    started, folder = clock(), Path(folder)
    before = read_progress(folder)
    if before is not None and (why := staleness(before)):
        log(f"[ledger] {work.name}: its state was made by other code or configs ({'; '.join(why)}); starting again")
        for old in folder.glob("step-*.ckpt"):
            old.unlink()
        before = None
    if chunk is None and before is not None:
        chunk = before.leases[-1]["chunk"]
    run = _prepare(work, folder, preset, chunk, dict(knobs or {}), log, clock)
    first_step, stopped = run["progress"]["done"], _train(run, work.name, started + budget_s, log, clock)
    lease = {
        "date": time.strftime("%Y-%m-%d"),
        "device": str(jax.devices()[0].device_kind),
        "backend": devices.default_backend(),
        "jax_version": jax.__version__,
        "steps": [first_step, run["progress"]["done"]],
        "knobs": run["knobs"],
        "matmul_precision": str(jax.config.jax_default_matmul_precision or "default"),
        "chunk": run["chunk"],
        "seconds": {k: round(v, 2) for k, v in run["seconds"].items()} | {"wall": round(clock() - started, 2)},
    }
    diverged = dict(before.diverged if before else {}) | {run["section"].label(c): why for c, why in stopped.items()}
    leases = [*(before.leases if before else ()), lease]
    record = progress_record(
        work, preset or work.preset, run["configs"], run["progress"], run["chunk"], leases, diverged
    )
    record.save(folder / PROGRESS)
    done, total = record.steps_done, record.outer_steps
    log(f"[ledger] {work.name}: {done:,} of {total:,} steps; progress in {folder / PROGRESS}")
    if done < total and not diverged:
        raise OutOfTime(f"{work.name}: at {done:,} of {total:,} steps")
    return record


def _prepare(work, folder, preset, chunk, knobs, log, clock) -> dict:
    """What a lease of ``work`` trains with: its ``section``, ``configs``, ``runs``, ``program`` (and the ``knobs`` it
    was built with), the steps ``compiled`` for one ``chunk``, the ``saver`` of ``folder``, the ``state`` and
    ``progress`` restored from there or begun (with the evaluation at step 0), and ``seconds`` spent so far."""
    sec = catalog.SECTIONS[work.section]
    configs = work.configs(preset, **knobs)
    chunk = chunk_for(configs[0].eval_every, chunk)
    runs = sec.run_arrays(configs)
    prog, chosen = runner.fitting_program(sec, configs[0], runs, log)
    state = prog.init(runs)
    saver = checkpoint.Checkpointer(folder, every=1, keep=1, log=log, compress=True)
    restored = saver.restore(state)
    seconds, t = {"compile": 0.0, "train": 0.0, "evaluate": 0.0}, clock()
    compiled = prog.steps.lower(runs, state, chunk).compile()
    seconds["compile"] = clock() - t
    log(f"[ledger] {work.name}: compiled {chunk} steps in {seconds['compile']:.1f} s")
    if restored is None:
        t = clock()
        progress = {"done": 0, "steps": [], "evals": [jax.device_get(prog.evaluate(runs, state))], "eval_steps": [0]}
        seconds["evaluate"] = clock() - t
    else:
        state, progress = restored
        if progress["done"] % chunk:
            raise params.ParameterError(f"chunk must divide the {progress['done']:,} steps {work.name} has done")
    run = {"section": sec, "configs": configs, "runs": runs, "program": prog, "knobs": chosen, "chunk": chunk}
    return run | {"compiled": compiled, "saver": saver, "state": state, "progress": progress, "seconds": seconds}


def _train(run, name, deadline, log, clock) -> dict:
    """Train ``run`` (:func:`_prepare`) chunk by chunk until its last step, until the next chunk would end after
    ``deadline`` (a time of ``clock``; the first chunk always runs), or until every config diverged, evaluating
    every ``eval_every`` steps and saving after every chunk. ``{config: why}`` of the configs that diverged."""
    sec, configs, progress, seconds = run["section"], run["configs"], run["progress"], run["seconds"]
    cfg, stopped, last = configs[0], {}, None
    check = runner.divergence_check(sec, configs, stopped)
    while progress["done"] < cfg.outer_steps and not stopped:
        if last is not None and clock() + last > deadline:
            break
        t = clock()
        run["state"], metrics = run["compiled"](run["runs"], run["state"])
        progress["steps"].append(_per_chunk(metrics))
        progress["done"] += run["chunk"]
        seconds["train"] += (last := clock() - t)
        evaluation = None
        if progress["done"] % cfg.eval_every == 0:
            t = clock()
            evaluation = jax.device_get(run["program"].evaluate(run["runs"], run["state"]))
            progress["evals"].append(evaluation)
            progress["eval_steps"].append(progress["done"])
            seconds["evaluate"] += clock() - t
        try:
            check(progress["steps"][-1], progress["done"], evaluation, progress["evals"][0])
        except runner.TrainingDiverged:
            pass  # every config is in ``stopped``
        log(f"[ledger] {name}: step {progress['done']:,}/{cfg.outer_steps:,}  {sec.progress(cfg, metrics, evaluation)}")
        run["saver"].save(run["state"], progress)
    return stopped


def _numbers(a, digits=7):
    """``a`` as nested lists of floats to ``digits`` significant digits, NaN and infinities as ``None``."""
    a = np.asarray(a, float)
    out = np.vectorize(lambda x: float(f"{x:.{digits}g}") if np.isfinite(x) else None, otypes=[object])(a)
    return out.tolist()


def progress_record(work, preset, configs, progress, chunk, leases, diverged) -> records.PaperRun:
    """The ``paper_run`` record of ``work`` at ``preset`` (its state folder's ``progress.json``) from a run's
    progress (as :class:`compgen.checkpoint.Checkpointer` keeps it, one row of step metrics per chunk)."""
    sec = catalog.SECTIONS[work.section]
    cfg = configs[0]
    evals = jax.tree.map(lambda *xs: np.stack(xs, axis=1), *progress["evals"])  # (runs, evals, ...)
    loss = np.concatenate([s["loss"] for s in progress["steps"]]) if progress["steps"] else np.zeros((0, 1))
    per_block = cfg.eval_every // chunk
    blocks = loss[: len(loss) // per_block * per_block].reshape(-1, per_block, loss.shape[-1]).mean(1).T
    offsets = np.cumsum([0] + [len(c.seeds) for c in configs])
    entries = []
    for label, pick, c, a, b in zip(work.labels, work.select, configs, offsets[:-1], offsets[1:]):
        entries.append(
            {
                "label": label,
                "select": pick,
                "seeds": list(c.seeds),
                "config": {k: v for k, v in results.config_dict(c).items() if k not in devices.KNOBS},
                "eval": {k: _numbers(v[a:b]) for k, v in evals.items()},
                "train_loss": _numbers(blocks[a:b]),
            }
        )
    return records.PaperRun(
        **{
            "work": work.name,
            "section": work.section,
            "figure": work.figure,
            "preset": preset,
            "outer_steps": cfg.outer_steps,
            "eval_every": cfg.eval_every,
            "steps_done": int(progress["done"]),
            "complete": bool(progress["done"] >= cfg.outer_steps),
            "eval_steps": [int(s) for s in progress["eval_steps"]],
            "configs": entries,
            "diverged": diverged,
            "leases": leases,
        },
        code_fingerprint=sec.fingerprint,
    )


def standing(record) -> dict:
    """Where the work of a ``paper_run`` record stands: ``state`` ("complete", "diverged" or "in progress"),
    ``leases`` (their number), ``devices`` (theirs, in order of first use, as text) and ``device_hours`` (their wall
    seconds in all, in hours)."""
    leases = record.leases
    return {
        "state": "complete" if record.complete else "diverged" if record.diverged else "in progress",
        "leases": len(leases),
        "devices": ", ".join(dict.fromkeys(lease["device"] for lease in leases)),
        "device_hours": sum(lease["seconds"].get("wall", 0) for lease in leases) / 3600,
    }


def status(work, folder) -> str:
    """One line: where ``work`` stands in ``folder``."""
    found = read_progress(folder)
    if found is None:
        return f"{work.name}: not started"
    where = standing(found)
    done, total = found.steps_done, found.outer_steps
    return f"{work.name}: {where['state']}, {done:,} of {total:,} steps over {where['leases']} lease(s)"


def next_unfinished(works, root) -> list:
    """The works of ``works`` not yet complete (nor diverged) in the state folders under ``root``, in order."""
    out = []
    for w in works:
        found = read_progress(Path(root) / w.name)
        if found is None or not (found.complete or found.diverged):
            out.append(w)
    return out


def dumps_ledger(works) -> str:
    """The ledger file's text for ``works``."""
    return recordfile.dumps(records.Ledger(work=[dataclasses.asdict(w) for w in works]).to_dict())
