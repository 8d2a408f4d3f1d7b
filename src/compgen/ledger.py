"""The paper-scale ledger: the paper's runs in order of value, continued lease by lease on whatever device is lent.

A ledger (``book/records/ledger.json``, a ``ledger`` record) lists :class:`Work` items: each picks configs of one
figure at a preset, all of one shape, which train as lanes of one program. A work's state is a folder
(``book/records/paper/<name>/``) holding

* ``progress.json`` (a ``paper_run`` record, :func:`progress_record`): steps done of the total, the evaluations so
  far, the training loss averaged over each block of ``eval_every`` steps, every lease's device, knobs and seconds;
* its newest checkpoint (``step-<done>.ckpt``, :class:`compgen.checkpoint.Checkpointer`, compressed): the training
  state and the same history, from which the next lease resumes; removed once the work is complete (:func:`prune`).

:func:`advance` continues one work from its folder for a time budget, a checkpoint after every chunk of steps; a work
continued over any number of leases equals one uninterrupted run on the same device with the same chunk (the state
is restored bit for bit and the chunks are the same compiled program). The steps' own metrics are kept per chunk
(mean loss, last streak and skip count), so a checkpoint stays small at 60,000 steps.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time
from pathlib import Path

import jax
import numpy as np

from compgen import bridge, catalog, checkpoint, devices, params, programs, recordfile, records, runner

LEDGER = "ledger.json"
PROGRESS = "progress.json"
PRUNE_COMPLETE = True  # a complete work's checkpoints are removed (prune); a test keeps them to compare states
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")  # a work's name: the name of its state folder


class OutOfTime(RuntimeError):
    """A budget ended a work before its last step; its checkpoint and progress are saved."""


def matching(configs, pick: dict) -> list:
    """The configs of ``configs`` whose fields equal ``pick``'s values (compared as text, as JSON keeps them)."""
    return [c for c in configs if all(str(getattr(c, k, None)) == str(v) for k, v in pick.items())]


@dataclasses.dataclass(frozen=True)
class Work:
    """One piece of long work: the configs of ``figure`` of ``section`` at ``preset`` (the paper's, or a point of the
    scale bridge, :mod:`compgen.bridge`) that ``select`` picks (each a ``{field: value}`` naming one config, in
    order), called ``labels`` on the page; ``estimate_s``: the seconds it was estimated to take on the machine that
    was to run it, before it ran."""

    name: str
    section: str
    figure: str
    preset: str
    select: tuple
    labels: tuple
    why: str = ""
    estimate_s: float | None = None

    def configs(self, preset: str | None = None, **knobs) -> list:
        """The selected configs at ``preset`` (default the work's), with the device ``knobs`` given
        (:data:`compgen.devices.KNOBS`); a selection naming no config, or configs of different shapes, is a
        :class:`compgen.params.ParameterError`."""
        preset = preset or self.preset
        sec = catalog.SECTIONS[self.section]
        every = bridge.figure_configs(sec, self.figure, preset, **knobs)
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
        known = {f.name for f in dataclasses.fields(Work)}
        for w in record["work"]:
            if not NAME.fullmatch(w["name"]):
                raise ValueError(f"work name {w['name']!r} is not a folder name (letters, digits, '.', '_', '-')")
            if unknown := sorted(set(w) - known):
                raise ValueError(f"work {w['name']!r} has field(s) {unknown} that a work does not hold")
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


def identity(work, preset: str, configs) -> dict:
    """What a state is of: the work's name, its preset and a hash of its configs' fields (the device's knobs apart).
    Written into every checkpoint and ``progress.json``; a state of another identity is never restored."""
    fields = json.dumps([programs.config_fields(c) for c in configs], sort_keys=True)
    return {"work": work.name, "preset": preset, "configs": hashlib.sha256(fields.encode()).hexdigest()[:16]}


def code_of(sec, configs) -> dict:
    """What the configs' runs compute, as ``{"key": ..., "versions": ...}``: a hash of their run keys
    (:func:`compgen.programs.run_key`: programs, inputs and configs) and the libraries' versions they were computed
    under. Two keys compare only under the same versions."""
    keys = "".join(programs.run_key(sec, c) for c in configs)
    return {"key": hashlib.sha256(keys.encode()).hexdigest()[:16], "versions": programs.versions()}


def staleness(record) -> list:
    """Why a ``paper_run`` record no longer shows what the current code computes (empty: current). A config that is
    no longer the one its selection names at its preset now (device knobs apart) is stale. The code is compared by
    what it computes (:func:`code_of`) where the record was made under the libraries' versions installed here, else
    by the source fingerprint of the section's code, which is all a record made under other versions can be compared
    by."""
    sec = catalog.SECTIONS[record.section]
    every = bridge.figure_configs(sec, record.figure, record.preset)
    why, configs = [], []
    for entry in record.configs:
        found = matching(every, entry["select"])
        if len(found) != 1:
            why.append(f"{entry['label']} is no longer in {record.figure} at {record.preset}")
            continue
        configs.append(found[0])
        now = programs.config_fields(found[0])
        changed = sorted(k for k in now.keys() | entry["config"].keys() if entry["config"].get(k) != now.get(k))
        if changed:
            why.append(f"{entry['label']}: its config changed ({', '.join(changed)})")
    code, code_why = record.code, []
    if code and code.get("versions") == programs.versions():
        if len(configs) == len(record.configs) and code.get("key") != code_of(sec, configs)["key"]:
            code_why.append(f"made by code that computes other programs (key {code.get('key')})")
    elif not code and recordfile.code_state(record.code_fingerprint, sec.fingerprint) != recordfile.CURRENT:
        code_why.append(f"made by other code (source fingerprint {record.code_fingerprint}, now {sec.fingerprint})")
    return code_why + why


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


def set_aside(folder, log=print) -> Path | None:
    """Move a work's state in ``folder`` (its ``progress.json`` and checkpoints) into ``folder/set-aside-<time>/``, so
    that it starts afresh without anything being deleted; the folder it went to, or ``None`` where there was none."""
    folder = Path(folder)
    files = [folder / PROGRESS, *checkpoint.Checkpointer(folder).paths()]
    files = [f for f in files if f.is_file()]
    if not files:
        return None
    aside = folder / f"set-aside-{time.strftime('%Y%m%d-%H%M%S')}"
    aside.mkdir()
    for f in files:
        f.replace(aside / f.name)
    log(f"[ledger] the earlier state of {folder} is kept in {aside}")
    return aside


def prune(folder, log=print) -> list:
    """Remove the checkpoints of a complete work in ``folder``: nothing resumes from them, and its ``progress.json``
    keeps every evaluation and training loss the book reads. The paths removed (none for a work in progress)."""
    record = read_progress(folder)
    if record is None or not record.complete:
        return []
    removed = checkpoint.Checkpointer(folder).paths()
    for path in removed:
        path.unlink()
    if removed:
        log(f"[ledger] {record.work}: complete; its checkpoints removed, its progress kept")
    return removed


def _refusal(folder, what: str) -> params.ParameterError:
    return params.ParameterError(f"{Path(folder) / PROGRESS}: {what}; to start this work afresh, pass --fresh")


def check_state(before, folder, ident, code, saver) -> None:
    """Refuse, in one line naming the files, a state in ``folder`` that is not this work's to continue: its progress
    (``before``) names another identity, was made by code that computes other programs (under the same versions),
    or says steps were done that no checkpoint holds."""
    if before is None:
        return
    if before.identity != ident:
        raise _refusal(folder, f"is the state of {before.identity}, not of {ident}")
    if before.code and before.code.get("versions") == code["versions"] and before.code.get("key") != code["key"]:
        raise _refusal(
            folder, f"was made by code that computes other programs (key {before.code.get('key')}, now {code['key']})"
        )
    if before.steps_done and not before.complete and not saver.paths():
        raise _refusal(
            folder, f"says {before.steps_done:,} steps are done, but no checkpoint (step-<10 digits>.ckpt) is beside it"
        )


def advance(work, folder, budget_s=math.inf, preset=None, chunk=None, knobs=None, log=print, fresh=False):
    """Continue ``work`` from the checkpoint in ``folder`` (from its start if there is none) until it is complete or
    ``budget_s`` seconds would be exceeded by the next chunk (at least one chunk runs), saving a checkpoint and then
    ``progress.json`` after every chunk, the lease so far included. ``preset`` overrides the work's (a rehearsal at
    ``smoke``); ``chunk``: outer steps per call (default: its last lease's, else :func:`chunk_for`); ``knobs``:
    device choices (:data:`compgen.devices.KNOBS`), recorded per lease. A state that is not this work's to continue
    (:func:`check_state`, :class:`compgen.checkpoint.ForeignCheckpoint`) is refused in one line, unless ``fresh``
    sets it aside first (:func:`set_aside`). Returns the progress record; raises :class:`OutOfTime` (after saving)
    where the budget ended it first."""
    clock = time.monotonic
    started, folder, preset = clock(), Path(folder), preset or work.preset
    if fresh:
        set_aside(folder, log)
    elif (done := read_progress(folder)) is not None and done.complete:
        log(f"[ledger] {work.name}: complete already ({done.steps_done:,} steps); nothing to train")
        return done
    run = _prepare(work, folder, preset, chunk, dict(knobs or {}), log, clock)

    def save(stopped):
        return _save_progress(run, work, preset, folder, stopped, clock() - started)

    stopped, record = _train(run, work.name, started + budget_s, log, clock, save)
    record = record or save(stopped)
    if record.complete and PRUNE_COMPLETE:
        prune(folder, log)
    done, total = record.steps_done, record.outer_steps
    log(f"[ledger] {work.name}: {done:,} of {total:,} steps; progress in {folder / PROGRESS}")
    if done < total and not record.diverged:
        raise OutOfTime(f"{work.name}: at {done:,} of {total:,} steps")
    return record


def _prepare(work, folder, preset, chunk, knobs, log, clock) -> dict:
    """What a lease of ``work`` trains with: its ``section``, ``configs``, ``runs``, ``program`` (and the ``knobs`` it
    was built with), the steps ``compiled`` for one ``chunk``, the ``saver`` of ``folder``, the ``state`` and
    ``progress`` restored from there or begun (with the evaluation at step 0), the earlier ``leases`` and ``diverged``
    configs, its ``identity`` and ``code``, and ``seconds`` spent so far."""
    sec = catalog.SECTIONS[work.section]
    configs = work.configs(preset, **knobs)
    ident, code = identity(work, preset, configs), code_of(sec, configs)
    before = read_progress(folder)
    saver = checkpoint.Checkpointer(folder, every=1, keep=1, log=log, compress=True, identity=ident)
    check_state(before, folder, ident, code, saver)
    if before is not None and before.code and before.code.get("versions") != code["versions"]:
        log(f"[ledger] {work.name}: made under {before.code.get('versions')}, continued under {code['versions']}")
    if chunk is None and before is not None and before.leases:
        chunk = before.leases[-1]["chunk"]
    chunk = chunk_for(configs[0].eval_every, chunk)
    runs = sec.run_arrays(configs)
    prog, chosen = runner.fitting_program(sec, configs[0], runs, log)
    state = prog.init(runs)
    try:
        restored = saver.restore(state)
    except checkpoint.ForeignCheckpoint as error:
        raise _refusal(folder, str(error)) from None
    seconds, t = {"compile": 0.0, "train": 0.0, "evaluate": 0.0}, clock()
    compiled = prog.steps.lower(runs, state, chunk).compile()
    seconds["compile"] = clock() - t
    log(f"[ledger] {work.name}: compiled {chunk} steps in {seconds['compile']:.1f} s")
    extra = {"leases": [], "diverged": {}}
    if restored is None:
        if before is not None and before.steps_done:
            raise _refusal(folder, f"says {before.steps_done:,} steps are done, but no checkpoint beside it reads back")
        t = clock()
        progress = {"done": 0, "steps": [], "evals": [jax.device_get(prog.evaluate(runs, state))], "eval_steps": [0]}
        seconds["evaluate"] = clock() - t
    else:
        state, progress = restored
        extra = progress.pop("extra", extra)
        if before is not None and progress["done"] < before.steps_done:
            raise _refusal(
                folder, f"says {before.steps_done:,} steps are done, its newest checkpoint holds {progress['done']:,}"
            )
        if progress["done"] % chunk:
            raise params.ParameterError(f"chunk must divide the {progress['done']:,} steps {work.name} has done")
    run = {"section": sec, "configs": configs, "runs": runs, "program": prog, "knobs": chosen, "chunk": chunk}
    run |= {"identity": ident, "code": code, "leases": extra["leases"], "diverged": extra["diverged"]}
    run |= {"first_step": progress["done"], "started": clock()}
    return run | {"compiled": compiled, "saver": saver, "state": state, "progress": progress, "seconds": seconds}


def _lease(run, wall) -> dict:
    """This lease's entry as it stands: device, versions, knobs, chunk, the steps it took and its seconds."""
    return {
        "date": time.strftime("%Y-%m-%d"),
        "device": str(jax.devices()[0].device_kind),
        "backend": devices.default_backend(),
        "jax_version": jax.__version__,
        "code_key": run["code"]["key"],
        "steps": [run["first_step"], run["progress"]["done"]],
        "knobs": run["knobs"],
        "matmul_precision": str(jax.config.jax_default_matmul_precision or "default"),
        "chunk": run["chunk"],
        "seconds": {k: round(v, 2) for k, v in run["seconds"].items()} | {"wall": round(wall, 2)},
    }


def _save_progress(run, work, preset, folder, stopped, wall) -> records.PaperRun:
    """Save the checkpoint and then ``progress.json`` of ``run`` as it stands, this lease included (a kill between
    the two leaves the progress one chunk behind its checkpoint, which the next lease reads first); the record."""
    diverged = dict(run["diverged"]) | {run["section"].label(c): why for c, why in stopped.items()}
    leases = [*run["leases"], _lease(run, wall)]
    run["saver"].save(run["state"], run["progress"], extra={"leases": leases, "diverged": diverged})
    record = progress_record(work, preset, run, leases, diverged)
    record.save(Path(folder) / PROGRESS)
    return record


def _train(run, name, deadline, log, clock, save) -> tuple:
    """Train ``run`` (:func:`_prepare`) chunk by chunk until its last step, until the next chunk would end after
    ``deadline`` (a time of ``clock``; the first chunk always runs), or until every config diverged, evaluating
    every ``eval_every`` steps and calling ``save(diverged)`` after every chunk (the checkpoint, then the progress).
    ``({config: why} of the configs that diverged, the last record saved or None)``."""
    sec, configs, progress, seconds = run["section"], run["configs"], run["progress"], run["seconds"]
    cfg, stopped, last, record = configs[0], {}, None, None
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
        record = save(stopped)
    return stopped, record


def _numbers(a, digits=7):
    """``a`` as nested lists of floats to ``digits`` significant digits, NaN and infinities as ``None``."""
    a = np.asarray(a, float)
    out = np.vectorize(lambda x: float(f"{x:.{digits}g}") if np.isfinite(x) else None, otypes=[object])(a)
    return out.tolist()


def progress_record(work, preset, run, leases, diverged) -> records.PaperRun:
    """The ``paper_run`` record of ``work`` at ``preset`` (its state folder's ``progress.json``) from a ``run``
    (:func:`_prepare`: its configs, chunk, identity and code, and its progress as
    :class:`compgen.checkpoint.Checkpointer` keeps it, one row of step metrics per chunk), with its ``leases`` and
    ``diverged`` configs."""
    sec = catalog.SECTIONS[work.section]
    configs, progress, chunk, ident, code = (run[k] for k in ("configs", "progress", "chunk", "identity", "code"))
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
                "config": programs.config_fields(c),
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
            "identity": ident,
            "code": code,
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


def forecast(works, root) -> dict:
    """What is left of ``works`` (their state folders under ``root``): ``works``, the number neither complete nor
    diverged; ``estimated_s``, the share of each one's estimate that its steps still to train make up (a work without
    an estimate counts none of it); ``pace``, the median over the complete works with an estimate of the seconds they
    took over the seconds estimated (None before any is complete); ``paced_s``, ``estimated_s`` at that pace."""
    left, paces, count = 0.0, [], 0
    for work in works:
        found = read_progress(Path(root) / work.name)
        if found is not None and found.complete:
            if work.estimate_s:
                paces.append(standing(found)["device_hours"] * 3600 / work.estimate_s)
            continue
        if found is not None and found.diverged:
            continue
        count += 1
        done = found.steps_done / found.outer_steps if found is not None else 0.0
        left += (work.estimate_s or 0.0) * (1 - done)
    pace = float(np.median(paces)) if paces else None
    return {"works": count, "estimated_s": left, "pace": pace, "paced_s": None if pace is None else left * pace}


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
