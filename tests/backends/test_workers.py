"""The worker processes (compgen.backends.workers): jobs balanced over them, their numbers equal to this process's,
a worker's error raised again by the driver, and workers that end with their killed parent."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from compgen import backends, catalog, cores, devices, dispatch, params, results, runner, timing
from compgen.backends import workers
from compgen.experiments import teacher_student as ts
from compgen.section import make_config

S = ts.SECTION


def test_balance_keeps_programs_together_and_fills_the_workers(tiny):
    a, b = tiny(), tiny(masks="0;1", distribution="continuous")  # same program
    c = tiny(outer_steps=40)  # another program, costlier than a and b together
    assert S.cost(c) >= S.cost(a) + S.cost(b)
    jobs = workers.balance([a, b, c], 2, S)
    assert sorted(len(j) for j in jobs) == [1, 2] and [a, b] in jobs
    assert sorted(len(j) for j in workers.balance([a, b], 2, S)) == [1, 1]  # a lone group is split for two workers
    assert workers.balance([a, b], 1, S) == [[a, b]]


def test_balance_splits_a_program_group_larger_than_a_workers_share(tiny):
    group = [tiny(masks=m, distribution="continuous") for m in ("0;1", "0;01", "1;01", "01")]  # one program
    other = tiny(outer_steps=12)  # another, cheaper than the group
    jobs = workers.balance([*group, other], 2, S)
    assert [other] in jobs and sorted((c for j in jobs for c in j if c != other), key=group.index) == group
    cost = lambda job: sum(S.cost(c) for c in job)
    half = (cost(group) + cost([other])) / 2
    assert workers.makespan(map(cost, jobs), 2) <= half * workers.BALANCE_SLACK  # neither worker trains alone long
    assert len(jobs) <= 4  # halved only as far as that needs: the group's halves would leave one worker alone


def test_makespan_gives_the_costliest_job_first_to_the_first_free_worker():
    assert workers.makespan([3, 3, 2, 2, 2], 2) == 7  # 3+2+2 | 3+2
    assert workers.makespan([5, 1, 1], 3) == 5 and workers.makespan([], 2) == 0


def test_worker_count_follows_the_environment(monkeypatch):
    monkeypatch.setenv("COMPGEN_WORKERS", "3")
    assert workers.default_workers(10) == 3 and workers.default_workers(2) == 2
    for bad in ("0", "abc"):
        monkeypatch.setenv("COMPGEN_WORKERS", bad)
        with pytest.raises(params.ParameterError, match="COMPGEN_WORKERS"):
            workers.default_workers(4)
    monkeypatch.delenv("COMPGEN_WORKERS")
    assert 1 <= workers.default_workers(4) <= 4


def test_more_workers_than_configs_start_one_per_config_and_end(store, monkeypatch, tiny):
    """COMPGEN_WORKERS near the limit: the driver looped over that many slots and never ended."""
    monkeypatch.setenv("COMPGEN_WORKERS", str(workers.MAX_WORKERS))
    a, b = tiny(), tiny(outer_steps=9, eval_every=3)
    started, original = [], workers._start
    monkeypatch.setattr(workers, "_start", lambda *args, **kw: started.append(args[2]) or original(*args, **kw))
    dispatch.train_or_load(S, [a, b], log=lambda _: None)
    assert sorted(started) == [0, 1] and all(runner.load(S, c) is not None for c in (a, b))


def test_a_worker_reports_a_diverged_run_by_name_and_the_driver_raises_it(store, tmp_path, tiny):
    """A worker names its error in a file of its own (not on its last line of output): the driver raises the same
    error with the same message, and leaves no file behind."""
    cfg = tiny(outer_lr=1e30, outer_steps=120, eval_every=60)
    lines = []
    with pytest.raises(runner.TrainingDiverged, match=r"diverged at step .*outer_lr") as raised:
        workers.run_workers(S, [[cfg]], 1, workers.Settings(results.Store.default(), lines.append))
    assert "\n" not in str(raised.value) and not str(raised.value).startswith("TrainingDiverged")
    assert any("TrainingDiverged:" in line for line in lines)  # the log says it too
    assert runner.load(S, cfg) is None
    assert not list(Path(tempfile.gettempdir()).glob("compgen-job-*.error"))


def test_the_same_run_in_a_worker_process_and_in_this_one_is_identical(store, tiny, stored_bytes):
    a, b = tiny(), tiny(masks="01;1", distribution="continuous")
    lines = []
    dispatch.train_or_load(S, [a, b], backend=backends.Workers(2), log=lines.append)
    assert {line.split()[0] for line in lines if "[train]" in line} == {
        "[worker",
    }  # both trained in workers
    if len(cores.usable()) >= 2 and hasattr(os, "sched_setaffinity"):  # each worker on a core of its own
        pinned = [line.split("core(s) ")[1] for line in lines if "[cores]" in line]
        assert len(pinned) == 2 and len(set(pinned)) == 2, lines
    in_workers = [stored_bytes(S, c) for c in (a, b)]
    readings = {results.Store.default().load(S, c)[1].provenance["gemm_gflops"] for c in (a, b)}
    assert readings == {round(timing.gemm_gflops(), 1)}  # the workers record the reading this process took first
    dispatch.train_or_load(S, [a, b], force=True, backend=backends.Workers(1), log=lambda _: None)
    assert [stored_bytes(S, c) for c in (a, b)] == in_workers


@pytest.mark.parametrize(
    "section, model, fields",
    [("teacher_student", None, {}), ("goals", "anil", {"eval_tasks": 8})],
    ids=["teacher_student", "goals-anil"],
)
def test_a_quick_run_is_identical_in_a_worker_and_in_this_process(store, stored_bytes, section, model, fields):
    """Two outer steps of a quick config, whose matrix products are large enough that XLA splits them over the CPU
    backend's threads: a worker whose backend started after it was pinned to its core (one thread) stored other
    last bits than this process (every core), teacher-student's evaluation loss from step 0 and goals' ANIL from
    its first update. The tiny configs above cannot show it: their products are too small to be split."""
    sec = catalog.get(section)
    cfg = make_config(sec, "quick", model, outer_steps=2, eval_every=2, seeds=(2020,), **fields)
    dispatch.train_or_load(sec, [cfg], backend=backends.Workers(2), log=lambda _: None)
    in_worker = stored_bytes(sec, cfg)
    dispatch.train_or_load(sec, [cfg], backend=backends.Local(), force=True, log=lambda _: None)
    assert stored_bytes(sec, cfg) == in_worker


def test_a_large_run_trains_alone_with_its_tasks_split_and_stores_the_unsplit_numbers_up_to_round_off(
    store, monkeypatch, tiny
):
    """A config that ``devices.shard_count`` splits trains in a worker of two host devices, before the rest; its
    numbers equal the unsplit run's up to float32 round-off, and a config below the threshold is untouched."""

    large, small = tiny(), tiny(masks="01;1", distribution="continuous")
    dispatch.train_or_load(S, [large], backend=backends.Workers(1), log=lambda _: None)
    unsplit = runner.load(S, large)
    monkeypatch.setattr(devices, "shard_count", lambda section, cfg: 2 if cfg == large else 1)
    lines = []
    dispatch.train_or_load(S, [small, large], force=True, backend=backends.Workers(1), log=lines.append)
    split_lines = [line for line in lines if line.startswith("[worker 0]")]
    assert "[devices] every meta-batch sharded over 2 cpu device(s)" in split_lines[0]
    assert any("[train]" in line for line in lines if not line.startswith("[worker"))  # the small one, here
    assert lines.index(split_lines[0]) < min(
        i for i, line in enumerate(lines) if "[train]" in line and "worker" not in line
    )
    split = runner.load(S, large)
    assert set(split) == set(unsplit)
    for name in unsplit:
        np.testing.assert_allclose(split[name], unsplit[name], rtol=2e-3, atol=1e-5, err_msg=name)


# --------------------------------------------------------------------------------------------- faults

CHILD = """
import json, sys
from compgen import backends, dispatch
from compgen.experiments import teacher_student as ts
from compgen.section import make_config

configs = [make_config(ts.SECTION, "smoke", **fields) for fields in json.loads(sys.argv[1])]
backend = backends.Workers(checkpoint_every=int(sys.argv[2]))
dispatch.train_or_load(ts.SECTION, configs, backend=backend, log=lambda line: print(line, flush=True))
"""


def _child(fields: list, store, checkpoint_every=0, **env):
    env = {**os.environ, "COMPGEN_RESULTS": str(store), **env}
    env.pop("COMPGEN_CHECKPOINTS", None)
    args = [sys.executable, "-c", CHILD, json.dumps(fields), str(checkpoint_every)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie left for a non-reaping init does not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _pids_mentioning(text: str) -> list:
    """The processes whose command line contains ``text``."""
    found = []
    for folder in Path("/proc").iterdir():
        if folder.name.isdigit():
            try:
                if text in (folder / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(folder.name))
            except OSError:
                pass
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the workers through /proc")
def test_workers_end_with_their_killed_parent_and_leave_no_job_or_lock_files(tmp_path, tiny_fields):
    jobs, store = tmp_path / "jobs", tmp_path / "store"
    jobs.mkdir()
    # two jobs whose first chunk takes many seconds: a worker says nothing for that long (it used to live on until
    # it printed into the dead parent's pipe)
    endless = [
        {**tiny_fields, "seeds": [100], "outer_steps": 10**6, "eval_every": 10**5, "masks": m} for m in ("0;1", "01")
    ]
    parent = _child(endless, store, checkpoint_every=1, TMPDIR=str(jobs), COMPGEN_WORKERS="2")
    worker_pids = []
    try:
        started = 0
        for line in parent.stdout:  # until both workers train (each holding its config's lock)
            started += "[train]" in line
            if started == 2:
                break
        worker_pids = [p for p in _pids_mentioning(str(jobs)) if p != parent.pid]
        assert len(worker_pids) == 2, worker_pids
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while any(map(_alive, worker_pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(_alive, worker_pids)), "a worker outlived its parent by 5 s"
    finally:
        for pid in [parent.pid, *worker_pids]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        parent.stdout.close()
    assert list(jobs.iterdir()) == []  # the job files
    assert [p for p in store.rglob("*") if p.is_file()] == []  # the locks' files
