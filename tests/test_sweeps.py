"""Sweep files and their backends: expansion, skipping stored runs, failures, devices and Ray."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from compgen import backends, cli, params, results, runner, sweeps
from compgen.catalog import get
from compgen.experiments import teacher_student as ts
from compgen.section import figure_configs

S = ts.SECTION

SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"

# Runs per sweep file (configs x seeds) as in spec §5.3 (experts_vs_hot: the 144 valid of 180 launched).
SPEC_RUNS = {
    "theory/overlap_continuous": 24,
    "theory/overlap_discrete": 33,
    "theory/overparam": 600,
    "hyperteacher/compositional": 24,
    "hyperteacher/connected": 12,
    "hyperteacher/experts_vs_hot": 144,
    "hyperteacher/experts_vs_ood": 180,
    "hyperteacher/experts_vs_shots": 120,
    "hyperteacher/experts_vs_steps": 252,
    "hyperteacher/overparam": 540,
    "preference/compositional": 48,
    "preference/connected": 24,
    "preference/overparam": 216,
    "compgrid/compositional": 24,
    "compgrid/overparam": 216,
}


def test_every_sweep_of_the_spec_has_a_file():
    assert sorted(str(p.relative_to(SWEEPS).with_suffix("")) for p in SWEEPS.glob("*/*.toml")) == sorted(SPEC_RUNS)


# Building a hyperteacher config with M = 16, K >= 3 enumerates millions of tasks (about 30 s per config):
# this sweep is counted from its grid but its configs are not built here.
SLOW_TO_BUILD = {"hyperteacher/experts_vs_steps"}


@pytest.mark.parametrize("name", sorted(SPEC_RUNS))
def test_sweep_file_has_the_spec_run_count(name):
    sweep = sweeps.load(SWEEPS / f"{name}.toml")
    assert sweep.preset == "paper"
    assert len(sweeps.grid_points(sweep, "paper")) * len(sweep.seeds) == SPEC_RUNS[name]


def test_paper_sweeps_build_and_hold_every_config_of_the_book():
    """Every config builds, and the book's experiments at preset paper are all among the sweeps' configs,
    so the book rebuilt at paper finds the sweeps' runs in the store."""
    by_section = {}
    for name in sorted(set(SPEC_RUNS) - SLOW_TO_BUILD):
        sweep = sweeps.load(SWEEPS / f"{name}.toml")
        points = sweeps.expand(sweep)
        assert [p.error for p in points if p.config is None] == [], name
        assert sum(len(p.config.seeds) for p in points) == SPEC_RUNS[name], name
        by_section.setdefault(sweep.section, set()).update(p.config for p in points)
    for section, configs in by_section.items():
        for experiment in get(section).figures("paper"):
            missing = [c for c in figure_configs(get(section), experiment, "paper") if c not in configs]
            assert missing == [], f"{section} {experiment}: {missing[:1]}"


@pytest.mark.parametrize(
    "name", ["theory/overlap_discrete", "hyperteacher/compositional", "preference/overparam", "compgrid/compositional"]
)
def test_sweep_file_builds_at_smoke(name):
    points = sweeps.expand(sweeps.load(SWEEPS / f"{name}.toml"), preset="smoke")
    assert [p.error for p in points if p.config is None] == [] and points


def test_clear_errors(tmp_path):
    def write(text):
        path = tmp_path / "s.toml"
        path.write_text(text)
        return path

    with pytest.raises(params.ParameterError, match=r"section must be one of .*'teacher_student'.*got 'theory'"):
        sweeps.load(write('section = "theory"'))
    with pytest.raises(ValueError, match=r"\[grid\]: unknown field\(s\) \['hiden'\]; allowed: .*'hidden'"):
        sweeps.load(write('section = "hyperteacher"\n[grid]\nhiden = [16]'))
    with pytest.raises(ValueError, match=r"top-level key: unknown field\(s\) \['seed'\]"):
        sweeps.load(write('section = "hyperteacher"\nseed = [1]'))
    with pytest.raises(ValueError, match=r"experiment must be one of \['fig2c', 'fig2d', 'table_a1'\], got 'fig9'"):
        sweeps.load(write('section = "teacher_student"\nexperiment = "fig9"'))
    with pytest.raises(ValueError, match=r"preset must be one of \['smoke', 'quick', 'paper'\], got 'huge'"):
        sweeps.load(write('section = "teacher_student"\npreset = "huge"'))
    with pytest.raises(ValueError, match=r"--set: unknown field\(s\) \['step'\]; allowed: .*'outer_steps'"):
        sweeps.expand(sweeps.load(write('section = "teacher_student"\n[grid]\nn_in = [4]')), overrides={"step": 3})
    with pytest.raises(ValueError, match=r"backend must be one of Local\(\), Devices\(\) or Ray\(...\) .*got 'slurm'"):
        sweeps.run_sweep(write('section = "teacher_student"\n[grid]\nn_in = [4]'), backend="slurm")
    with pytest.raises(ValueError, match=r"backend must be one of Local\(\), Devices\(\) or Ray\(...\) .*Workers"):
        sweeps.run_sweep(write('section = "teacher_student"\n[grid]\nn_in = [4]'), backend=backends.Workers(2))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["sweep", str(write('section = "teacher_student"')), "--backend", "slurm"])
    assert exit_info.value.code == 2


def test_experiment_sweeps_and_dry_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    path = tmp_path / "fig2c.toml"
    path.write_text('section = "teacher_student"\nexperiment = "fig2c"\npreset = "smoke"\n')
    assert len(sweeps.expand(sweeps.load(path))) == 7  # the Table A9 columns
    assert cli.main(["sweep", str(path), "--dry-run"]) == 0
    assert "7 config(s), 7 runs" in capsys.readouterr().out


def _cli_error(argv, capsys) -> str:
    """The one line ``compgen-cli ARGV`` prints when it refuses ARGV with exit status 2, within 30 s."""
    start = time.perf_counter()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    message = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and message.count("\n") == 0 and len(message) < 2_000, message[:3000]
    assert time.perf_counter() - start < 30, argv
    return message


def _values(n):
    return "[" + ", ".join(str(i + 1) for i in range(n)) + "]"


TS = 'section = "teacher_student"\npreset = "smoke"\n'
ODD_FILES = [  # (what, file name, its bytes, what the one line says besides the file's name)
    (
        "a 100 x 100 x 100 grid",
        "big.toml",
        f"{TS}[grid]\nn_in = {_values(100)}\nteacher_hidden = {_values(100)}\nn_out = {_values(100)}\n",
        r"the grid has 1,000,000 points \(100 n_in x 100 teacher_hidden x 100 n_out\); a sweep may have at most 10,000",
    ),
    (
        "cases x grid",
        "cases.toml",
        TS + "[grid]\nn_in = " + _values(5001) + "\n" + '[[cases]]\nmasks = "0;1"\n' * 2,
        r"10,002 points \(2 cases x 5001 n_in\)",
    ),
    (
        "101 exclude rules",
        "exclude.toml",
        TS + "exclude = [" + ", ".join(f"{{n_in = {i}}}" for i in range(101)) + "]\n[grid]\nn_in = [1]\n",
        "101 exclude rules; a sweep may have at most 100",
    ),
    ("5,000 nested lists", "deep.toml", TS + "[grid]\nn_in = " + "[" * 5000 + "]" * 5000 + "\n", "nest too deep"),
    ("5,000 nested tables", "tables.toml", TS + "fixed = " + "{a = " * 5000 + "1" + "}" * 5000, "nest too deep"),
    ("5,000 dotted keys", "keys.toml", TS + "grid" + ".a" * 5000 + " = 1\n", "nest more than 10 deep"),
    ("20 nested lists", "deep20.toml", TS + "[grid]\nn_in = " + "[" * 20 + "]" * 20 + "\n", "nest more than 10"),
    (
        "5,000 nested JSON lists",
        "deep.json",
        '{"section": "teacher_student", "grid": {"n_in": ' + "[" * 5000 + "]" * 5000 + "}}",
        "nest too deep for the JSON reader",
    ),
    ("binary", "binary.toml", b"\xff\xfe\x00\x01 garbage", r"not TOML text \(not UTF-8 at byte 0\)"),
    ("2 MB", "huge.toml", TS + "# " + "x" * 2_000_000 + "\n", "larger than 1,000,000 bytes"),
    ("a list as section", "list.toml", 'section = ["teacher_student"]\n', "section must be one of"),
    ("a table as preset", "preset.toml", TS.replace('"smoke"', "{a = 1}"), "preset must be one of"),
]


@pytest.mark.parametrize("what, name, text, expected", ODD_FILES, ids=[row[0] for row in ODD_FILES])
def test_odd_and_oversized_sweep_files_are_one_line_naming_the_file(what, name, text, expected, tmp_path, capsys):
    """A 100 x 100 x 100 grid printed nothing for minutes, a file nested 5,000 deep a 3,000-line RecursionError."""
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    for extra in (["--dry-run"], []):
        message = _cli_error(["sweep", str(path), *extra], capsys)
        assert message.startswith(f"error: {path}") and re.search(expected, message), message


def test_a_pipe_is_not_a_sweep_file(tmp_path, capsys):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    assert "is not a regular file" in _cli_error(["sweep", str(fifo), "--dry-run"], capsys)


def test_the_largest_grid_allowed_streams_its_dry_run(tmp_path, monkeypatch):
    """A dry run prints each point as soon as its config is built: the first line comes after one config, not after
    the whole grid (10,000 points, the most a sweep may have)."""
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path / "store"))
    path = tmp_path / "s.toml"
    path.write_text(f"{TS}[grid]\nn_in = {_values(100)}\nteacher_hidden = {_values(100)}\n")
    sweep = sweeps.load(path)
    assert len(sweeps.grid_points(sweep, "smoke")) == sweeps.MAX_POINTS
    built, original = [], sweeps.make_config
    monkeypatch.setattr(sweeps, "make_config", lambda *a, **k: built.append(1) or original(*a, **k))

    class Enough(Exception):
        pass

    def out(line):
        assert line == "n_in=1, teacher_hidden=1: to train" and len(built) == 1
        raise Enough

    start = time.perf_counter()
    with pytest.raises(Enough):
        sweeps.dry_run(sweep, out=out)
    assert time.perf_counter() - start < 30  # the first line came after one config, not after the sweep (len(built))


RAY_OPTIONS = [
    (["--ray-gpus", "-1"], "--ray-gpus must be a finite number >= 0 per Ray task: .* got -1.0"),
    (["--ray-gpus", "nan"], "--ray-gpus must be a finite number >= 0 .* got nan"),
    (["--ray-gpus", "1e999"], "--ray-gpus must be a finite number >= 0 .* got inf"),
    (["--ray-gpus", "1.5"], r"--ray-gpus .*a fraction below 1 \(such as 0.5\) or a whole number, got 1.5"),
    (["--ray-gpus", "abc"], "argument --ray-gpus: invalid float value: 'abc'"),
    (["--ray-address", "garbage"], "--ray-address must be auto, local, host:port or ray://host:port"),
    (["--ray-address", "head 6379"], "--ray-address must be auto, local, host:port"),
]


@pytest.mark.parametrize("options, expected", RAY_OPTIONS, ids=[" ".join(o) for o, _ in RAY_OPTIONS])
def test_bad_ray_options_are_refused_before_ray_starts(options, expected, tmp_path, capsys, monkeypatch):
    """--ray-gpus -1 started Ray, then failed in Ray's traceback."""
    from compgen.backends import ray as ray_backend

    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path / "store"))
    monkeypatch.setattr(ray_backend, "train_on_ray", lambda *a, **k: pytest.fail("Ray was started"))
    path = _tiny(tmp_path, 'masks = ["0;1"]\n')
    for extra in (["--backend", "ray"], ["--backend", "ray", "--dry-run"], []):
        assert re.search(expected, _cli_error(["sweep", str(path), *extra, *options], capsys))
    with pytest.raises(params.ParameterError, match="cpus must be a finite number >= 0"):
        backends.Ray(cpus=-2)
    assert not (tmp_path / "store").exists()


# A teacher-student sweep small enough to compile in seconds (3 chunks of 2 steps, 3 seeds per config).
TINY = """
section = "teacher_student"
preset = "smoke"
seeds = [100, 101, 102]
[fixed]
n_modules = 2
n_in = 4
teacher_hidden = 4
n_out = 2
hidden_factor = 1
module_factor = 1
outer_steps = 6
eval_every = 2
inner_steps = 2
meta_batch = 2
batch = 4
eval_tasks = 4
eval_inputs = 8
"""


def _tiny(tmp_path, grid):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY + "[grid]\n" + grid)
    return path


@pytest.fixture(scope="module")
def local_store(tmp_path_factory):
    """A local sweep of 4 points: one trains, one raises during training, two cannot be built.

    Returns ``(store, sweep file, report, report of the rerun)``.
    """
    tmp = tmp_path_factory.mktemp("local")
    path = _tiny(tmp, 'masks = ["0;1", "0;7"]\nweight_decay = [0.0, 0.5]\n')
    original = runner.train_lanes

    def train_lanes(section, configs, log=print, saver=None):
        if any(cfg.weight_decay == 0.5 for cfg in configs):
            raise RuntimeError("deliberate failure")
        return original(section, configs, log, saver)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPGEN_RESULTS", str(tmp / "store"))
        patch.setattr(runner, "train_lanes", train_lanes)
        lines = []
        with pytest.raises(params.ParameterError, match=r"2 of 4 grid points cannot be built, so nothing is trained"):
            sweeps.run_sweep(path, backends.Local(), log=lines.append)
        assert not (tmp / "store").exists()
        report = sweeps.run_sweep(path, backends.Local(), log=lines.append, keep_going=True)
        again = sweeps.run_sweep(path, backends.Local(), log=lines.append, keep_going=True)
    return tmp / "store", path, report, again


def test_failed_runs_are_reported_and_the_others_complete(local_store):
    store, _, report, again = local_store
    assert [c.masks for c in report.trained] == ["0;1"] and report.trained[0].weight_decay == 0.0
    failures = dict(report.failed)
    assert failures["masks=0;1, weight_decay=0.5"] == "RuntimeError: deliberate failure"
    assert "invalid" in failures["masks=0;7, weight_decay=0.0"]
    assert len(failures) == 3 and "3 failed" in report.summary()
    stored = list((store / "teacher_student").glob("*.result"))
    assert len(stored) == 1
    # rerunning skips what is stored and retries only the failures
    assert again.trained == [] and again.stored == report.trained and len(again.failed) == 3


def _stored_arrays(store, config):
    old = os.environ.get("COMPGEN_RESULTS")
    os.environ["COMPGEN_RESULTS"] = str(store)
    try:
        return results.Store.default().load(S, config)[0]
    finally:
        os.environ.pop("COMPGEN_RESULTS") if old is None else os.environ.__setitem__("COMPGEN_RESULTS", old)


def _assert_same(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name], equal_nan=True), name


def test_devices_backend_matches_local(local_store, tmp_path):
    store, _, report, _ = local_store
    path = _tiny(tmp_path, 'masks = ["0;1"]\n')
    env = {
        **os.environ,
        "COMPGEN_RESULTS": str(tmp_path / "store"),
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
    }
    out = subprocess.run(
        [sys.executable, "-m", "compgen.cli", "sweep", str(path), "--backend", "devices"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # one config per device at a time: the 2 host devices of XLA_FLAGS on a CPU, the accelerators elsewhere
    cpu = jax.default_backend() == "cpu"
    assert f"over {2 if cpu else jax.local_device_count()} device(s)" in out.stdout, out.stdout
    config = report.trained[0]
    a, b = _stored_arrays(tmp_path / "store", config), _stored_arrays(store, config)
    if cpu:  # XLA's CPU programs are deterministic: the same bytes in another process, on another device
        _assert_same(a, b)
    else:
        # On a GPU two processes may differ in the last bits: XLA picks each product's kernel by timing it in the
        # process (autotuning) and some reductions sum with atomics, in no fixed order (the appendix "Running it
        # yourself", "Identical bytes"). Training carries round-off on: the tolerance of
        # tests/backends/test_workers.py's shard-tasks run, the same numbers summed in another order.
        assert sorted(a) == sorted(b)
        for name in a:
            np.testing.assert_allclose(a[name], b[name], rtol=2e-3, atol=1e-5, equal_nan=True, err_msg=name)


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Ray starts its processes with fork + exec
def test_ray_backend_stores_every_run(local_store, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'compgen[cluster]')")
    store, _, report, _ = local_store
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path / "store"))
    path = _tiny(tmp_path, 'masks = ["0;1", "1;01"]\n')
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024**2, log_to_driver=False)
    try:
        ray_report = sweeps.run_sweep(path, backends.Ray(), log=lambda _: None)
    finally:
        ray.shutdown()
    assert ray_report.failed == [] and sorted(c.masks for c in ray_report.trained) == ["0;1", "1;01"]
    for config in ray_report.trained:
        assert results.Store.default().load(S, config) is not None
    _assert_same(_stored_arrays(tmp_path / "store", report.trained[0]), _stored_arrays(store, report.trained[0]))
