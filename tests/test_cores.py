"""Each training worker on a share of the cores of its own."""

import os
import threading

import pytest

from compgen import cores, params

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")


def test_shares_give_each_worker_one_core_of_its_own(monkeypatch):
    monkeypatch.setattr(cores, "usable", lambda: (0, 1, 2, 3, 5))
    assert cores.shares(2) == [(0,), (1,)]  # one core each, also where there are more
    assert cores.shares(5) == [(0,), (1,), (2,), (3,), (5,)] and cores.shares(1) == [(0,)]
    assert cores.shares(6) is None  # more workers than cores: no pinning
    monkeypatch.setenv("COMPGEN_PIN_WORKERS", "0")
    assert cores.shares(2) is None
    monkeypatch.setenv("COMPGEN_PIN_WORKERS", "yes")
    with pytest.raises(params.ParameterError, match="COMPGEN_PIN_WORKERS"):
        cores.shares(2)


def test_pin_moves_every_thread_of_a_process_and_threads_started_later_inherit_it():
    before = os.sched_getaffinity(0)
    first = min(before)
    started, stop = threading.Event(), threading.Event()
    seen = {}

    def wait(name):
        seen[name] = threading.get_native_id()
        started.set()
        stop.wait()

    early = threading.Thread(target=wait, args=("early",))
    early.start()
    started.wait()
    try:
        assert cores.pin(os.getpid(), {first})
        assert os.sched_getaffinity(seen["early"]) == {first}  # a thread that was already running
        started.clear()
        late = threading.Thread(target=wait, args=("late",))
        late.start()
        started.wait()
        assert os.sched_getaffinity(seen["late"]) == {first}  # one started afterwards
    finally:
        stop.set()
        assert cores.pin(os.getpid(), before)
    assert os.sched_getaffinity(0) == before
    assert not cores.pin(2**22 + 12345, before)  # no such process


class _Worker:
    """A stand-in for a worker process that ends after ``polls`` polls."""

    def __init__(self, polls):
        self.polls, self.returncode = polls, None

    def poll(self):
        self.polls -= 1
        if self.polls < 0:
            self.returncode = 0
        return self.returncode


def _fake_start(given, lengths, tmp_path):
    def start(section, configs, slot, settings, on_cores=None):
        given.append((slot, on_cores))
        thread = threading.Thread(target=lambda: None)
        thread.start()
        return _Worker(next(lengths)), thread, str(tmp_path / f"job{len(given)}.json"), []

    return start


def test_each_worker_runs_on_the_cores_of_its_slot(monkeypatch, tmp_path):
    from compgen.backends import workers
    from compgen.experiments import teacher_student as ts

    monkeypatch.setattr(cores, "usable", lambda: (0, 1))
    given = []
    monkeypatch.setattr(workers, "_start", _fake_start(given, iter([1, 3, 2]), tmp_path))
    cfg = ts.SECTION.config()
    workers.run_workers(ts.SECTION, [[cfg], [cfg], [cfg]], 2, workers.Settings(store=None), poll_s=0)
    assert given == [(0, (0,)), (1, (1,)), (0, (0,))]  # the third job takes the first free slot, and its core
    given.clear()
    monkeypatch.setattr(workers, "_start", _fake_start(given, iter([0, 0]), tmp_path))
    workers.run_workers(ts.SECTION, [[cfg], [cfg]], 2, workers.Settings(store=None, shards=2), poll_s=0)
    assert given == [(0, None), (1, None)]  # a worker whose tasks are sharded over host devices has every core


def test_a_lone_config_trains_in_a_worker_on_one_core(monkeypatch, store):
    """The default number of workers on two cores or more: a config left alone trains as it would beside others."""
    from compgen import dispatch, runner, section
    from compgen.experiments import teacher_student as ts

    if len(cores.usable()) < 2:
        pytest.skip("needs two cores")
    monkeypatch.delenv("COMPGEN_WORKERS", raising=False)
    cfg = section.make_config(ts.SECTION, "smoke", outer_steps=4, eval_every=2, seeds=(100,))
    lines = []
    dispatch.train_or_load(ts.SECTION, [cfg], log=lines.append)
    assert any(line.startswith("[worker 0] [cores] this worker runs on core(s) ") for line in lines), lines
    assert runner.load(ts.SECTION, cfg) is not None
