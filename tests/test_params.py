"""One strict parameter layer: every bad input, through the command line, notebook parameters or a sweep file, is
a one-line error naming the field (and the file) before anything is compiled."""

import dataclasses

import pytest

from compgen import cli, figures, params, runner, sweeps

# (section, experiment) of every section, and a field each experiment fixes
EXPERIMENTS = {
    "teacher_student": ("fig2c", "masks"),
    "hyperteacher": ("fig3b", "split"),
    "preferences": ("fig4c", "split"),
    "goals": ("fig4ef", "split"),
    "incontext": ("comparison", "environment"),
}

# (--set FIELD=VALUE, what the message must say) for every section
BAD_SETS = [
    ("outer_steps=25.5", "outer_steps must be an integer"),
    ("outer_steps=1e3", "outer_steps must be an integer"),
    ('meta_batch="4"', "meta_batch must be an integer"),
    ("meta_batch=True", "meta_batch must be an integer"),
    ("outer_lr=nan", "outer_lr must be a finite number"),
    ("outer_lr=1e999", "outer_lr must be a finite number"),
    ("outer_lr=-1.0", "outer_lr must be a number > 0"),
    ("seeds=abc", "seeds must be a list of non-negative integers"),
    ("seeds=[1.7, 1.2]", "seeds must be a list of non-negative integers"),
    ("seeds=5", "seeds must be a list of non-negative integers"),
    ("seeds=[3, 3]", "seeds must not repeat"),
    ("seeds=[-1]", "seeds must be a list of non-negative integers"),
    ("eval_every=0", "eval_every must be an integer >= 1"),
    ("ouer_steps=5", "unknown field.*allowed: .*outer_steps"),
]


@pytest.fixture(autouse=True)
def nothing_compiles(monkeypatch, store):
    """A bad parameter must be refused before any program is built."""

    def refuse(*args, **kwargs):
        raise AssertionError("a program was compiled for a bad parameter")

    monkeypatch.setattr(runner, "program", refuse)


def _cli_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip()
    assert message.count("\n") == 0, message  # one line
    return message


@pytest.mark.parametrize("section", list(EXPERIMENTS))
@pytest.mark.parametrize("assignment, expected", BAD_SETS)
def test_command_line_refuses_bad_values_in_one_line(section, assignment, expected, capsys):
    experiment, _ = EXPERIMENTS[section]
    message = _cli_error(["run", section, experiment, "--preset", "smoke", "--set", assignment], capsys)
    assert pytest.importorskip("re").search(expected, message), message


@pytest.mark.parametrize("section", list(EXPERIMENTS))
def test_command_line_names_what_is_allowed(section, capsys):
    experiment, fixed = EXPERIMENTS[section]
    assert "preset must be one of ('smoke', 'quick', 'paper'), got 'nosuch'" in _cli_error(
        ["run", section, experiment, "--preset", "nosuch"], capsys
    )
    assert "experiment must be one of" in _cli_error(["run", section, "fig99", "--preset", "smoke"], capsys)
    message = _cli_error(["run", section, experiment, "--preset", "smoke", "--set", f"{fixed}=x"], capsys)
    assert f"{fixed} is set by experiment {experiment}" in message, message


def test_command_line_refuses_bad_names_and_checkpoint_intervals(capsys, monkeypatch):
    assert "section must be one of" in _cli_error(["run", "nope", "fig2c"], capsys)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "teacher_student", "fig2c", "--checkpoint-every", "-5"])
    assert exit_info.value.code == 2 and "non-negative integer" in capsys.readouterr().err
    monkeypatch.setenv("COMPGEN_CHECKPOINT_EVERY", "abc")
    assert "COMPGEN_CHECKPOINT_EVERY must be a non-negative integer" in _cli_error(
        ["run", "teacher_student", "fig2c", "--preset", "smoke"], capsys
    )


@pytest.mark.parametrize("section", list(EXPERIMENTS))
@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(preset="nosuch"), "preset must be one of"),
        (dict(seeds="abc"), "seeds must be a list"),
        (dict(seeds=[1.5]), "seeds must be a list"),
        (dict(force="maybe"), "force must be a boolean"),
    ],
)
def test_notebook_parameters_are_checked(section, kwargs, expected):
    call = {"preset": "smoke", "seeds": None, "force": False, **kwargs}
    with pytest.raises(params.ParameterError, match=expected):
        figures.train(section, call["preset"], call["seeds"], call["force"], log=lambda _: None)


def test_boolean_strings_are_parsed_exactly():
    assert params.parse_bool("false", "force") is False and params.parse_bool("True", "force") is True
    assert params.parse_bool(False, "force") is False
    with pytest.raises(params.ParameterError, match="force must be a boolean"):
        params.parse_bool("no", "force")
    with pytest.raises(params.ParameterError, match="force must be a boolean"):
        params.parse_bool(0, "force")


SWEEP = 'section = "{section}"\npreset = "smoke"\n'


@pytest.mark.parametrize("section", list(EXPERIMENTS))
@pytest.mark.parametrize(
    "body, expected",
    [
        ("seeds = [1.7, 1.2]", "seeds must be a list of non-negative integers"),
        ("seeds = 5", "seeds must be a list of non-negative integers"),
        ("grid = [1, 2]", r"\[grid\] must be a table"),
        ("[grid]\nouter_steps = 5", "grid.outer_steps must be a non-empty list"),
        ("[fixed]\nouterr_steps = 5", "unknown field"),
    ],
)
def test_sweep_files_are_checked_and_name_the_file(section, body, expected, tmp_path):
    path = tmp_path / f"{section}.toml"
    path.write_text(SWEEP.format(section=section) + body + "\n")
    with pytest.raises(params.ParameterError, match=expected) as error:
        sweeps.load(path)
    assert str(path) in str(error.value)


def test_sweep_file_errors_name_the_file(tmp_path, capsys):
    with pytest.raises(params.ParameterError, match="is a directory"):
        sweeps.load(tmp_path)
    broken = tmp_path / "broken.toml"
    broken.write_text('section = "hyperteacher\n')
    with pytest.raises(params.ParameterError, match=f"{broken}: not valid TOML"):
        sweeps.load(broken)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["sweep", str(broken)])
    assert exit_info.value.code == 2 and str(broken) in capsys.readouterr().err


def test_dry_run_fails_when_a_config_is_invalid(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('section = "hyperteacher"\npreset = "smoke"\n[grid]\nmax_hot = [2, 9]\n')
    assert cli.main(["sweep", str(path), "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert "1 invalid" in out and "max_hot" in out


def test_configs_validate_types_on_construction():
    from compgen.experiments.hyperteacher import HyperteacherConfig

    cfg = HyperteacherConfig(seeds=[5, 6])
    assert cfg.seeds == (5, 6) and isinstance(cfg.outer_lr, float)
    for field, value in (("n_modules", 4.0), ("probe", "yes"), ("split", 3), ("inner_batch", 2.5), ("remat", 1)):
        with pytest.raises(params.ParameterError, match=field):
            dataclasses.replace(cfg, **{field: value})
