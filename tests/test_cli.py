import os
import subprocess
import sys

import pytest

from compgen import cli


def test_list_names_sections(capsys):
    assert cli.main(["list"]) == 0
    assert "teacher_student" in capsys.readouterr().out


def test_unknown_names_are_rejected_with_allowed_values():
    with pytest.raises(SystemExit, match="section must be one of"):
        cli.main(["run", "nope", "fig2c"])
    with pytest.raises(SystemExit, match="experiment must be one of"):
        cli.main(["run", "teacher_student", "fig9"])
    with pytest.raises(SystemExit, match="preset must be one of"):
        cli.main(["run", "teacher_student", "fig2c", "--preset", "huge"])
    with pytest.raises(SystemExit, match="outer_steps"):
        cli.main(["run", "teacher_student", "fig2c", "--preset", "smoke", "--set", "outer_steps=0"])


def test_run_writes_to_the_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    args = ["run", "teacher_student", "table_a1", "--preset", "smoke", "--set", "outer_steps=4", "--set",
            "eval_every=4", "--set", "seeds=[7]"]
    assert cli.main(args) == 0
    assert len(list((tmp_path / "teacher_student").glob("*.npz"))) == 2
    assert "| masks |" in capsys.readouterr().out
    assert cli.main(args) == 0
    assert "reusing stored run" in capsys.readouterr().out


def test_split_tasks_trains_on_one_cpu_device_per_core(tmp_path):
    # a subprocess: the CLI must set the host-device flag before jax starts its backend
    env = {**os.environ, "COMPGEN_RESULTS": str(tmp_path)}
    env.pop("XLA_FLAGS", None)
    args = ["run", "teacher_student", "table_a1", "--preset", "smoke", "--set", "outer_steps=4", "--set",
            "eval_every=4", "--set", "seeds=[7]", "--split-tasks"]
    out = subprocess.run([sys.executable, "-m", "compgen.cli", *args], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"split over {os.cpu_count()} cpu device(s)" in out.stdout
    assert len(list((tmp_path / "teacher_student").glob("*.npz"))) == 2
