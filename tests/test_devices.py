"""Splitting a run's tasks over devices, and one config per device; two-device cases run in a subprocess with two
CPU host devices; the meta-batch sharded over devices and taken in chunks (train_chunk) equals it taken at once."""

import os
import subprocess
import sys
import textwrap

import jax
import pytest

from compgen import devices, params

# A few steps of the hyperteacher (smoke preset, meta-batch 4) trained with the meta-batch on one device and
# sharded over two; prints the largest relative difference of the meta-parameters and of the step losses.
TWO_DEVICE_SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    from compgen import devices, runner
    from compgen.experiments import hyperteacher as ht
    from compgen.section import make_config
    assert len(jax.devices()) == 2
    S = ht.SECTION

    def train(model, split, **fields):
        cfg = make_config(S, "smoke", model, seeds=(2020, 2021), **fields)
        runs = S.run_arrays([cfg])
        if split:
            with devices.shard_tasks():
                program = runner.program(S, cfg)  # the program keeps the split it was built under
        else:
            program = runner.program(S, cfg)
        state, metrics = program.steps(runs, program.init(runs), 3)
        return jax.device_get((state["meta"], metrics["loss"]))

    for model in ("hnet_linear", "anil"):
        (one, loss_one), (two, loss_two) = train(model, False), train(model, True)
        rel = max(float(np.max(np.abs(a - b)) / (np.max(np.abs(a)) + 1e-12))
                  for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two)))
        print(model, "params", rel, "loss", float(np.max(np.abs(loss_one - loss_two) / np.abs(loss_one))))
    # 8 tasks, 2 at a time: in 4 chunks on one device, in 2 on each of two, against all 8 at once
    (one, loss_one) = train("hnet_linear", False, meta_batch=8)
    for name, split in (("chunked", False), ("chunked-split", True)):
        two, loss_two = train("hnet_linear", split, meta_batch=8, train_chunk=2)
        rel = max(float(np.max(np.abs(a - b)) / (np.max(np.abs(a)) + 1e-12))
                  for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two)))
        print(name, "params", rel, "loss", float(np.max(np.abs(loss_one - loss_two) / np.abs(loss_one))))
    cfg = make_config(S, "smoke", "anil", meta_batch=3)
    with devices.shard_tasks():
        program = runner.program(S, cfg)
    runs = S.run_arrays([cfg])
    try:
        program.steps(runs, program.init(runs), 1)
    except ValueError as error:
        print("error:", error)
""")


def test_shard_tasks_equals_one_device_and_checks_the_meta_batch():
    env = {**os.environ, "XLA_FLAGS": devices.host_devices_flag(2)}
    out = subprocess.run(
        [sys.executable, "-c", TWO_DEVICE_SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    for model in ("hnet_linear", "anil", "chunked", "chunked-split"):
        _, params, _, loss = lines[model].split()
        assert float(params) < 1e-4 and float(loss) < 1e-5, lines[model]  # float32 round-off only
    assert "meta_batch (3) must be a multiple of the devices" in lines["error:"]


def test_shard_tasks_on_one_device_changes_nothing():
    with devices.shard_tasks(jax.devices()[:1]) as mesh:
        assert mesh is None and devices.task_mesh() is None
    with pytest.raises(ValueError, match="at least one device"):
        with devices.shard_tasks([]):
            pass


def test_train_on_devices_runs_every_job_and_reports_failures():
    done, lines = [], []

    def train_one(job, log):
        if job == "bad":
            raise RuntimeError("deliberate")
        done.append((job, str(jax.config.jax_default_device)))
        log(f"trained {job}")

    failed = devices.train_on_devices(train_one, ["a", "bad", "b"], log=lines.append)
    assert sorted(j for j, _ in done) == ["a", "b"]
    assert [(j, str(e)) for j, e in failed] == [("bad", "deliberate")]
    assert any(line.startswith("[device 0]") for line in lines)


def test_shard_count_splits_only_large_configs_on_a_multicore_cpu(monkeypatch):
    """The default split reads the config and the machine: paper sizes on a CPU with several cores, never quick."""
    from compgen import catalog
    from compgen.section import figure_configs, make_config

    monkeypatch.delenv(devices.SHARD_ENV, raising=False)
    sec = catalog.get("hyperteacher")
    paper = make_config(sec, "paper", "hnet_linear", n_modules=4, max_hot=2)
    assert devices.shard_count(sec, paper, cores=2, backend="cpu") == 2
    assert devices.shard_count(sec, paper, cores=1, backend="cpu") == 1
    assert devices.shard_count(sec, paper, cores=2, backend="gpu") == 1
    assert devices.shard_count(sec, paper, cores=3, backend="cpu") == 1  # 128 tasks do not split in three
    monkeypatch.setenv(devices.SHARD_ENV, "0")
    assert devices.shard_count(sec, paper, cores=2, backend="cpu") == 1
    monkeypatch.delenv(devices.SHARD_ENV)
    for name in catalog.SECTIONS:  # every quick config runs as before, every paper config is split on 2 cores
        section = catalog.get(name)
        for preset, count in (("quick", 1), ("paper", 2)):
            for figure in section.figures(preset):
                for cfg in figure_configs(section, figure, preset):
                    assert devices.shard_count(section, cfg, cores=2, backend="cpu") == count, (name, preset, figure)


def test_train_chunk_adapts_a_large_meta_batch_a_few_tasks_at_a_time_on_a_cpu_only():
    assert devices.train_chunk(128, backend="cpu") == devices.CPU_TRAIN_CHUNK == 8
    assert devices.train_chunk(96 + 4, backend="cpu") == 5  # the largest divisor up to 8
    assert devices.train_chunk(16, backend="cpu") is None  # the quick presets' meta-batches: all at once
    assert devices.train_chunk(128, backend="gpu") is None
    assert devices.train_chunk(128, chosen=32, backend="gpu") == 32  # a config's train_chunk wins
    mesh = type("Mesh", (), {"size": 32})()  # each of 32 devices adapts 4 tasks
    assert devices.train_chunk(128, backend="cpu", mesh=mesh) == 4


# --------------------------------------------------------------------------------------------- the device's knobs


def _every_config():
    from compgen import catalog, section

    for name in catalog.SECTIONS:
        sec = catalog.get(name)
        for preset in section.PRESET_NAMES:
            for figure in sec.figures(preset):
                for cfg in section.figure_configs(sec, figure, preset):
                    yield sec, preset, cfg


def test_no_preset_carries_a_device_knob_and_no_cpu_choice_reaches_a_gpu():
    """Presets hold the science; remat, train_chunk and xla_opt_level are chosen for the device a program runs on."""
    count = 0
    for sec, preset, cfg in _every_config():
        assert all(getattr(cfg, knob, None) is None for knob in devices.KNOBS), (sec.name, preset, cfg)
        gpu = devices.resolve(sec, cfg, backend="gpu")
        assert getattr(gpu, "xla_opt_level", None) is None and getattr(gpu, "train_chunk", None) is None
        assert getattr(gpu, "remat", False) is False
        assert devices.train_chunk(getattr(cfg, "meta_batch", 1), getattr(gpu, "train_chunk", None), "gpu") is None
        cpu = devices.resolve(sec, cfg, backend="cpu")
        if preset != "paper":  # what every smoke and quick run was trained with before the knobs left the presets
            assert (getattr(cpu, "xla_opt_level", None), getattr(cpu, "remat", False)) == (1, False)
            assert getattr(cpu, "train_chunk", None) is None
        count += 1
    assert count > 500


def test_the_cpu_keeps_its_measured_choices_and_a_forced_knob_is_kept():
    from compgen import catalog, section

    prefs = catalog.get("preferences")
    linear = section.figure_configs(prefs, "fig4c", "paper", model="hnet_linear")[0]
    assert devices.resolve(prefs, linear, backend="cpu").train_chunk == 32  # CPU_TRAIN_CHUNKS
    assert devices.resolve(prefs, linear, backend="gpu").train_chunk is None
    assert devices.resolve(prefs, linear, backend="cpu").xla_opt_level is None  # paper-sized: XLA's default
    forced = section.figure_configs(prefs, "fig4c", "paper", model="hnet_linear", train_chunk=4, remat=True)[0]
    gpu = devices.resolve(prefs, forced, backend="gpu")
    assert (gpu.train_chunk, gpu.remat) == (4, True)
    assert devices.lighter(gpu, forced) == []  # nothing the user forced is changed to make it fit


def test_a_config_that_does_not_fit_runs_lighter_and_is_stored_as_given(monkeypatch):
    """On a device with too little memory, remat and then smaller chunks are tried before the config is refused."""
    from compgen import catalog, memory, params, runner, section

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # an accelerator, as the device rules see it
    sec = catalog.get("hyperteacher")
    cfg = section.figure_configs(
        sec, "fig3b", "smoke", model="anil", meta_batch=256, outer_steps=2, eval_every=2, eval_tasks=4, eval_chunk=1
    )[0]
    assert devices.lighter(devices.resolve(sec, cfg, "cpu"), cfg, backend="cpu") == []  # a CPU's chunk is measured
    runs = sec.run_arrays([cfg])
    full = memory.estimate(devices.resolve(sec, cfg), runner.program(sec, devices.resolve(sec, cfg)), runs)
    lightest = devices.lighter(devices.resolve(sec, cfg), cfg)[-1]
    small = memory.estimate(lightest, runner.program(sec, lightest), runs)
    assert small.peak * 2 < full.peak - 1, (small, full)
    monkeypatch.setattr(memory, "device_bytes", lambda: full.peak - 1)  # a lighter version must fit twice over
    lines = []
    prog, knobs = runner.fitting_program(sec, cfg, runs, lines.append)
    assert knobs["remat"] is True or knobs["train_chunk"] is not None
    assert lines and "[memory]" in lines[0]
    monkeypatch.setattr(memory, "device_bytes", lambda: small.peak // 4)
    with pytest.raises(params.ParameterError, match="too large for this machine"):
        runner.fitting_program(sec, cfg, runs, lines.append)


def test_huge_pages_follow_the_config_size_on_a_cpu_and_reach_the_worker_that_trains_it(monkeypatch):
    from compgen import allocator, catalog, results, section
    from compgen.backends import workers

    sec = catalog.get("hyperteacher")
    paper = section.figure_configs(sec, "fig3b", "paper", model="hnet_linear")[0]
    quick = section.figure_configs(sec, "fig3b", "quick", model="hnet_linear")[0]
    assert devices.huge_pages(sec, paper, "cpu") and not devices.huge_pages(sec, quick, "cpu")
    assert not devices.huge_pages(sec, paper, "gpu")
    started = []

    class Started(Exception):
        pass

    def popen(*args, env=None, **kwargs):
        started.append(env)
        raise Started

    monkeypatch.setattr(workers.subprocess, "Popen", popen)
    for cfg in (paper, quick):
        with pytest.raises(Started):
            workers._start(sec, [cfg], 0, workers.Settings(results.Store.default()))
    assert allocator.has_huge_pages(started[0])
    assert started[1].get("GLIBC_TUNABLES") == os.environ.get("GLIBC_TUNABLES")  # a quick worker's is left alone


XLA_GOOD = [
    "",
    devices.host_devices_flag(2),
    "  --xla_cpu_enable_fast_math=false\t--xla_backend_optimization_level=1 ",
    '--xla_dump_to="/tmp/a b" --xla_cpu_enable_fast_math',  # a quoted value, a bare boolean flag
    "--xla_gpu_autotune_level=0 --xla_gpu_deterministic_ops=true",  # a GPU's flags are known on a CPU too
]
XLA_BAD = [
    ("garbage", "XLA_FLAGS must be flags such as .*or the name of a file of flags.*neither"),
    (" \t", "XLA_FLAGS is blank"),
    ("--xla_backend_optimization_level 2", "got '2' in"),
    ("--xla_dump_to=/tmp/x -v", "got '-v' in"),
    ('--xla_dump_to="/tmp/a b', r"got '--xla_dump_to=\"/tmp/a b'"),
    ("--xla_cpu_enable_fast_math=maybe", "refused by XLA: Couldn't interpret value maybe for flag xla_cpu_enable_fast"),
    ("--xla_force_host_platform_device_count=two", "Couldn't interpret value two for flag xla_force_host_platform"),
    ("--xla_no_such_flag=1", "refused by XLA: Unknown flag in XLA_FLAGS: --xla_no_such_flag=1; fix or unset it$"),
]


@pytest.mark.parametrize("flags", XLA_GOOD)
def test_xla_flags_that_xla_takes_pass(flags, tmp_path):
    devices.check_xla_flags({"XLA_FLAGS": flags})
    flag_file = tmp_path / "flags"  # XLA also reads its flags from a file named by XLA_FLAGS
    flag_file.write_text(flags or "--xla_cpu_enable_fast_math=false")
    devices.check_xla_flags({"XLA_FLAGS": str(flag_file)})


@pytest.mark.parametrize("flags, expected", XLA_BAD, ids=[flags for flags, _ in XLA_BAD])
def test_xla_flags_that_xla_refuses_are_one_line_before_the_backend_starts(flags, expected):
    """XLA ends the process on such flags, printing its list of ~90 flags: refused here in one line instead, by XLA's
    own reading of them in a child process that starts no backend."""
    with pytest.raises(params.ParameterError, match=expected) as error:
        devices.check_xla_flags({"XLA_FLAGS": flags})
    assert "\n" not in str(error.value) and len(str(error.value)) < 600


def test_the_backend_is_asked_for_after_the_flags_are_checked(monkeypatch):
    jax.devices()  # started here: XLA_FLAGS no longer matters to this process, and is not read again
    monkeypatch.setenv("XLA_FLAGS", "garbage")
    assert devices.default_backend() == jax.default_backend()
    monkeypatch.setattr(devices, "_backend_started", lambda: False)
    with pytest.raises(params.ParameterError, match="XLA_FLAGS must be flags"):
        devices.default_backend()
    with pytest.raises(params.ParameterError, match="XLA_FLAGS must be flags"):
        devices.huge_pages(None, None)
