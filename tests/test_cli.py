import importlib
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from compgen import cli, programs

# a tiny run of Table A1: one seed, four outer steps
SMOKE_TABLE_A1 = (
    "run teacher_student table_a1 --preset smoke --set outer_steps=4 --set eval_every=4 --set seeds=[7]".split()
)


def test_list_names_sections_experiments_and_fields(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "teacher_student" in out and "fig2c" in out and "outer_steps: int >= 1" in out
    assert "model (hyperteacher, preferences, goals): one of ('hnet_linear'" in out and "package.module:build" in out


def test_unknown_names_are_rejected_with_allowed_values(capsys):
    for argv, message in (
        (["run", "nope", "fig2c"], "section must be one of"),
        (["run", "teacher_student", "fig9"], "experiment must be one of"),
        (["run", "teacher_student", "fig2c", "--preset", "huge"], "preset must be one of"),
        (["run", "teacher_student", "fig2c", "--preset", "smoke", "--set", "outer_steps=0"], "outer_steps"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


SHOW_FIG3B = ["show", "hyperteacher", "fig3b", "--preset", "smoke"]


def test_show_prints_every_config_of_a_figure_with_its_key_and_fields(capsys):
    from compgen import catalog, section

    sec = catalog.get("hyperteacher")
    configs = section.figure_configs(sec, "fig3b", "smoke")
    assert len(configs) == 8  # 4 models x 2 splits
    assert cli.main(SHOW_FIG3B) == 0
    out = capsys.readouterr().out
    for cfg in configs:
        assert f"{sec.label(cfg)}\n  key {programs.key_of(sec, cfg)}\n" in out
    assert out.count("\n  key ") == 8 and out.count("    split = 'random'") == 4
    assert "  * outer_steps = 20 (paper 200000)" in out  # smoke's budget, marked against the paper's


def test_show_json_round_trips_the_configs(capsys):
    import json

    from compgen import catalog, section

    sec = catalog.get("hyperteacher")
    assert cli.main([*SHOW_FIG3B, "--json"]) == 0
    dicts = json.loads(capsys.readouterr().out)
    assert [sec.config(**d) for d in dicts] == section.figure_configs(sec, "fig3b", "smoke")


def test_show_takes_set_and_rejects_a_bad_figure_in_one_line(capsys):
    import json

    assert cli.main([*SHOW_FIG3B, "--json", "--set", "outer_steps=12", "--set", "seeds=[1,2]"]) == 0
    dicts = json.loads(capsys.readouterr().out)
    assert len(dicts) == 8 and all(d["outer_steps"] == 12 and d["seeds"] == [1, 2] for d in dicts)
    assert cli.main([*SHOW_FIG3B, "--set", "outer_steps=12"]) == 0
    assert "  * outer_steps = 12 (paper 200000)" in capsys.readouterr().out
    for argv, message in (
        (["show", "hyperteacher", "fig9"], "experiment must be one of"),
        (["show", "hyperteacher", "fig3b", "--preset", "huge"], "preset must be one of"),
        ([*SHOW_FIG3B, "--set", "nope=1"], "nope"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and err.count("\n") == 1, err


def test_run_and_sweep_take_the_same_set_and_checkpoint_options():
    top = cli.parser()
    for command in (["run", "teacher_student", "fig2c"], ["sweep", "sweeps/hyperteacher/compositional.toml"]):
        args = top.parse_args([*command, "--set", "seeds=[1]", "--set", "outer_steps=4", "--checkpoint-every", "3"])
        assert args.set == ["seeds=[1]", "outer_steps=4"] and args.checkpoint_every == 3
        defaults = top.parse_args(command)
        assert defaults.set == [] and defaults.checkpoint_every is None


def test_run_writes_to_the_store(store, capsys):
    args = SMOKE_TABLE_A1
    assert cli.main(args) == 0
    assert len(list((store / "teacher_student").glob("*.result"))) == 2
    assert "| run | metric |" in capsys.readouterr().out
    assert cli.main(args) == 0
    assert "reusing" in capsys.readouterr().out


def test_store_lists_current_and_stale_runs_and_removes_the_stale_ones(store, capsys):
    from types import SimpleNamespace

    from compgen import catalog, results
    from compgen.section import make_config

    sec = catalog.get("teacher_student")
    cfg = make_config(sec, "smoke")
    old_code = SimpleNamespace(name=sec.name, key_of=lambda config: "0123456789abcdef")
    results.Store(store).save(sec, cfg, {"x": np.zeros(1)}, 1.0)
    stale = results.Store(store).save(old_code, cfg, {"x": np.zeros(1)}, 1.0)
    assert cli.main(["store", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "teacher_student: 1 current, 1 stale, 0 unknown" in out and f"{stale.stem}  computed by other code" in out
    assert "hyperteacher: 0 current, 0 stale, 0 unknown" in out
    assert cli.main(["store", "--remove-stale"]) == 0
    assert "removed 1 stale run(s)" in capsys.readouterr().out
    assert not stale.exists() and results.Store(store).load(sec, cfg) is not None


@pytest.mark.parametrize("sidecar", ["missing", "garbled", "a list", "another run's"])
def test_a_kill_between_the_entry_and_its_sidecar_never_makes_a_current_run_stale(store, capsys, sidecar):
    """The entry is the fact: a sidecar a kill left missing, garbled or stale is rebuilt from the entry, the run is
    listed as current and --remove-stale keeps it; a temporary file of a killed writer is removed, one of a running
    writer kept."""
    from types import SimpleNamespace

    from compgen import catalog, results
    from compgen.section import make_config

    sec = catalog.get("teacher_student")
    cfg = make_config(sec, "smoke")
    entry = results.Store(store).save(sec, cfg, {"x": np.zeros(1)}, 1.0)
    path = entry.with_suffix(".json")
    if sidecar == "missing":
        path.unlink()
    elif sidecar == "garbled":
        path.write_text('{"config": ')
    elif sidecar == "a list":
        path.write_text("[1, 2]")
    else:
        old_code = SimpleNamespace(name=sec.name, key_of=lambda config: "0123456789abcdef")
        other = results.Store(store).save(old_code, cfg, {"x": np.zeros(1)}, 1.0)
        shutil.copyfile(other.with_suffix(".json"), path)
        other.unlink()
        other.with_suffix(".json").unlink()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = entry.parent / f".{entry.name}.{int(dead.stdout)}.tmp"
    live = entry.parent / f".{entry.name}.{os.getpid()}.tmp"
    orphan.write_bytes(b"half")
    live.write_bytes(b"half")
    assert cli.main(["store", "--remove-stale"]) == 0
    out = capsys.readouterr().out
    assert "teacher_student: 1 current, 0 stale, 0 unknown" in out, out
    assert entry.exists() and json.loads(path.read_text())["config"] == results.config_dict(cfg)
    assert not orphan.exists() and live.exists()
    live.unlink()


def test_a_diverging_run_exits_non_zero_and_is_not_stored(store, capsys):
    args = [
        "run",
        "teacher_student",
        "table_a1",
        "--preset",
        "smoke",
        "--set",
        "outer_lr=1e30",
        "--set",
        "outer_steps=40",
        "--set",
        "eval_every=20",
        "--set",
        "seeds=[7]",
    ]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert "diverged at step 20" in err and "'outer_lr': 1e+30" in err and "not stored" in err
    assert not list((store / "teacher_student").glob("*.result"))


def test_shard_tasks_trains_on_one_cpu_device_per_core(tmp_path):
    # a subprocess: the CLI must set the host-device flag before jax starts its backend
    env = {**os.environ, "COMPGEN_RESULTS": str(tmp_path)}
    env.pop("XLA_FLAGS", None)
    args = [*SMOKE_TABLE_A1, "--shard-tasks"]
    out = subprocess.run(
        [sys.executable, "-m", "compgen.cli", *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"sharded over {os.cpu_count()} cpu device(s)" in out.stdout
    assert len(list((tmp_path / "teacher_student").glob("*.result"))) == 2


# The console script: `compgen` itself is a bash builtin (programmable completion), which would run instead.
COMMAND = "compgen-cli"
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@needs_bash
def test_the_command_is_not_a_shell_builtin_or_keyword():
    try:
        distribution = metadata.distribution("compgen")
    except metadata.PackageNotFoundError:  # e.g. tools/gpu_check.sh: the checkout's src/ on PYTHONPATH
        pytest.skip("compgen is not installed, so it has no console script to check")
    scripts = [e.name for e in distribution.entry_points if e.group == "console_scripts"]
    assert scripts == [COMMAND] and cli.parser().prog == COMMAND
    for name in scripts:
        kind = subprocess.run(["bash", "-c", f"type -t {name}"], capture_output=True, text=True).stdout.strip()
        assert kind not in ("builtin", "keyword"), f"{name} is a bash {kind}"
    assert subprocess.run(["bash", "-c", "type -t compgen"], capture_output=True, text=True).stdout.strip() == "builtin"


@needs_bash
def test_the_command_runs_in_an_activated_virtual_environment():
    activate = Path(sys.executable).parent / "activate"
    if not activate.is_file():
        pytest.skip(f"no activate script beside {sys.executable}: not a virtual environment")
    out = subprocess.run(
        ["bash", "-lc", f'source "{activate}" && {COMMAND} list'], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "teacher_student" in out.stdout and "hyperteacher" in out.stdout


def test_python_m_compgen_runs_the_command_line():
    out = subprocess.run([sys.executable, "-m", "compgen", "list"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "teacher_student" in out.stdout and "fig2c" in out.stdout


def test_a_store_that_cannot_take_the_result_is_one_line_and_keeps_nothing(store, capsys, monkeypatch):
    """A write that hits a file-size limit (``ulimit -f``) printed an OSError traceback."""
    from compgen import results

    def full(self, section, config, *args, **kwargs):
        raise OSError(27, "File too large", str(store / "x.result"))

    monkeypatch.setattr(results.Store, "save", full)
    monkeypatch.setenv("COMPGEN_WORKERS", "1")
    assert cli.main([*SMOKE_TABLE_A1[:-2], "--set", "seeds=[9]"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "could not be written: File too large" in err, err
    assert not list((store / "teacher_student").glob("*.result"))


def test_remove_stale_keeps_runs_whose_learner_this_process_cannot_resolve(store, capsys, monkeypatch, tmp_path):
    """A learner registered by a script, or named by an import path this process cannot import: its runs are
    "unknown" (their fingerprint cannot be computed here), listed with how to resolve them, and never removed."""
    import shutil
    from pathlib import Path

    from compgen import catalog, models, results
    from compgen.models import learners
    from compgen.section import make_config

    shutil.copy(Path(__file__).parent / "own_learner.py", tmp_path / "elsewhere_learner.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    sec, tiny = catalog.get("hyperteacher"), dict(hidden=8, num_hidden=2, seeds=[3])
    script = importlib.import_module("elsewhere_learner")
    models.register("scripted", script.gated_heads, replace=True)
    saved = [
        results.Store(store).save(sec, make_config(sec, "smoke", model, **tiny), {"x": np.zeros(1)}, 1.0)
        for model in ("scripted", "elsewhere_learner:gated_heads")
    ]
    assert cli.main(["store"]) == 0 and "hyperteacher: 2 current, 0 stale, 0 unknown" in capsys.readouterr().out
    monkeypatch.delitem(learners._REGISTRY, "scripted")  # the command line's process: neither is known there
    monkeypatch.delitem(sys.modules, "elsewhere_learner")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    assert cli.main(["store", "--remove-stale"]) == 0
    out = capsys.readouterr().out
    assert "hyperteacher: 0 current, 0 stale, 2 unknown" in out and "kept 2 unknown run(s)" in out
    assert "got 'scripted'" in out and "cannot import elsewhere_learner" in out and "PYTHONPATH" in out
    assert all(path.exists() for path in saved)


@pytest.mark.parametrize(
    "assignment, expected",
    [
        ("model=", "model must be one of .* got ''"),
        ("model=os:system", "model 'os:system': system must be a Learner or a build\\(cfg\\) function defined in os"),
        ("model=builtins:print", "print must be a Learner or a build\\(cfg\\) function defined in builtins"),
        ("model=a b", "got 'a b'"),
    ],
)
def test_a_model_that_is_not_a_learner_is_one_line_and_nothing_is_called(assignment, expected, capsys):
    with pytest.raises(SystemExit) as status:
        cli.main(["show", "hyperteacher", "fig3b", "--preset", "smoke", "--set", assignment])
    err = capsys.readouterr().err
    assert status.value.code == 2 and len(err.strip().splitlines()) == 1
    import re

    assert re.search(expected, err)
