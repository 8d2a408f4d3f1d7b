"""One strict parameter layer: every bad input, through the command line, notebook parameters or a sweep file, is
a one-line error naming the field (and the file) before anything is compiled."""

import dataclasses
import re
import time

import jax
import pytest

from compgen import catalog, cli, notebook, params, results, runner, sweeps
from compgen import section as section_
from compgen.backends import workers
from compgen.section import Section, make_config

ORIGINAL_PROGRAM = Section.program

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


class Uncompiled:
    """A jitted function that may be traced and lowered (the memory check measures traced programs) but not run or
    compiled."""

    def __init__(self, jitted, why):
        self.trace, self.lower, self.why = jitted.trace, jitted.lower, why

    def __call__(self, *args, **kwargs):
        raise AssertionError(self.why)


def _traced_only(why):
    def program(section, cfg, mesh=None):
        prog = ORIGINAL_PROGRAM(section, cfg, mesh)
        return section_.Program(*(Uncompiled(f, why) for f in prog))

    return program


@pytest.fixture(autouse=True)
def nothing_compiles(monkeypatch, store):
    """A bad parameter must be refused before any program runs or compiles, in this process (one worker, so that
    these patches reach the code that refuses it)."""
    why = "a program was compiled for a bad parameter"
    monkeypatch.setattr(Section, "program", _traced_only(why))
    monkeypatch.setattr(jax.stages.Lowered, "compile", lambda *a, **k: (_ for _ in ()).throw(AssertionError(why)))
    monkeypatch.setenv("COMPGEN_WORKERS", "1")
    monkeypatch.setenv("COMPGEN_SHARD_TASKS", "0")


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
    field = assignment.split("=")[0]
    if field in catalog.get(section).preset("smoke").figures[experiment].varied():
        expected = f"{field} is set by experiment {experiment}"  # a field the figure fixes: refused as such
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
    assert exit_info.value.code == 2 and "must be an integer from 0 to 2147483647" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "teacher_student", "fig2c", "--checkpoint-every", "1" * 21])
    assert exit_info.value.code == 2 and "must be an integer from 0 to 2147483647" in capsys.readouterr().err
    for value in ("abc", "1" * 21):
        monkeypatch.setenv("COMPGEN_CHECKPOINT_EVERY", value)
        assert "COMPGEN_CHECKPOINT_EVERY must be an integer from 0 to 2147483647" in _cli_error(
            ["run", "teacher_student", "fig2c", "--preset", "smoke"], capsys
        )


def test_show_checks_the_environment_as_run_does(capsys, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULT", "/tmp/x")  # a typo of COMPGEN_RESULTS
    assert "did you mean COMPGEN_RESULTS?" in _cli_error(["show", "teacher_student", "fig2c"], capsys)
    monkeypatch.delenv("COMPGEN_RESULT")
    monkeypatch.setenv("COMPGEN_WORKERS", "0")
    assert "COMPGEN_WORKERS must be an integer from 1 to" in _cli_error(["show", "teacher_student", "fig2c"], capsys)


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
        notebook.train(section, call["preset"], call["seeds"], call["force"], log=lambda _: None)


def test_booleans_have_one_rule_everywhere():
    """true/false/1/0 in any case, the integers 1 and 0, or a bool: in notebooks, --set and configs alike."""
    assert params.parse_bool("false", "force") is False and params.parse_bool(" True ", "force") is True
    assert params.parse_bool(False, "force") is False and params.parse_bool(0, "force") is False
    assert params.parse_bool("1", "force") is True and params.parse_bool(1, "force") is True
    for bad in ("no", 2, "yes", 0.0, None):
        with pytest.raises(params.ParameterError, match="force must be a boolean"):
            params.parse_bool(bad, "force")
    sec = catalog.get("hyperteacher")
    assert params.parse_assignments(["probe=true"], sec.config) == {"probe": "true"}
    assert make_config(sec, "smoke", "anil", probe="FALSE").probe is False


def test_integers_are_decimal_strings_stay_text_and_values_are_normalised_before_hashing():
    sec = catalog.get("teacher_student")
    read = lambda text: params.parse_assignments([text], sec.config)
    assert read("outer_steps=010") == {"outer_steps": 10} and read("outer_steps=1_000") == {"outer_steps": 1000}
    assert read("masks=012") == {"masks": "012"} and read("masks='01;12'") == {"masks": "01;12"}
    with pytest.raises(params.ParameterError, match="write integers in decimal digits.*0x10"):
        read("outer_steps=0x10")
    zero, minus_zero = (make_config(sec, "smoke", lr_final_fraction=v) for v in (0.0, -0.0))
    assert results.config_hash(zero, "f") == results.config_hash(minus_zero, "f")


def test_environment_values_are_read_alike_and_blanks_refused(monkeypatch, tmp_path):
    """One rule for every COMPGEN_* variable (params.env_text): blanks around a value ignored (COMPGEN_LANES ignored
    them, COMPGEN_MATMUL_PRECISION and COMPGEN_RESULTS refused them), blanks only refused; ~ expanded in a folder."""
    from compgen import precision

    monkeypatch.setenv("COMPGEN_WORKERS", " 2 ")
    monkeypatch.setenv("COMPGEN_SHARD_TASKS", " 1")
    monkeypatch.setenv("COMPGEN_LANES", "0\t")
    monkeypatch.setenv("COMPGEN_MATMUL_PRECISION", " highest ")
    monkeypatch.setenv("COMPGEN_RESULTS", " ~/store ")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert workers.default_workers(10) == 2 and params.env_flag("COMPGEN_SHARD_TASKS") is True
    assert params.env_flag("COMPGEN_LANES") is False and precision.requested() == "highest"
    assert params.env_path("COMPGEN_RESULTS") == str(tmp_path / "store")
    for name in params.ENVIRONMENT:
        monkeypatch.setenv(name, "   ")
        with pytest.raises(params.ParameterError, match=f"{name} is blank"):
            params.check_environment_names()
        with pytest.raises(params.ParameterError, match=f"{name} is blank"):
            params.env_text(name)
        monkeypatch.delenv(name)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "teacher_student", "fig2c", "--preset", "smoke"],
        ["sweep", "SWEEP", "--dry-run"],  # a hyperteacher config starts JAX's backend when it is built
        ["sweep", "SWEEP"],
        ["run", "hyperteacher", "fig3b", "--preset", "smoke"],  # its config starts the backend: checked first
        ["show", "hyperteacher", "fig3b", "--preset", "smoke"],
    ],
    ids=["run", "sweep --dry-run", "sweep", "run hyperteacher", "show hyperteacher"],
)
def test_bad_xla_flags_are_one_line_in_a_fresh_process(argv, tmp_path):
    """XLA_FLAGS garbage printed XLA's 94-line flag list and ended the process: refused before the backend starts."""
    import os
    import subprocess
    import sys

    sweep = tmp_path / "s.toml"
    sweep.write_text('section = "hyperteacher"\npreset = "smoke"\n[grid]\nmax_hot = [1, 2]\n')
    env = {**os.environ, "XLA_FLAGS": XLA_MATH + "maybe", "COMPGEN_RESULTS": str(tmp_path / "store")}
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "compgen", *(str(sweep) if a == "SWEEP" else a for a in argv)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1, out.stderr[-2000:]
    assert out.stderr.startswith("error: XLA_FLAGS='--xla_cpu_enable_fast_math=maybe' is refused by XLA: Couldn't")
    assert time.perf_counter() - start < 30 and not (tmp_path / "store").exists()


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
    for field, value in (("n_modules", 4.0), ("probe", "yes"), ("split", 3), ("inner_batch", 2.5), ("remat", 2)):
        with pytest.raises(params.ParameterError, match=field):
            dataclasses.replace(cfg, **{field: value})


# ------------------------------------------------------------------------------------- every bad input, one table
# (id, command line, environment, what the one-line message must say). Each must exit 2 before anything compiles.
FULLWIDTH = "\uff10;\uff11;\uff10\uff11"  # full-width digits: not module indices
XLA_MATH, XLA_LEVEL = "--xla_cpu_enable_fast_math=", "--xla_backend_optimization_level="
BAD_INPUTS = [
    ("model not in the figure", ["hyperteacher", "fig3cd", "model=anil"], {}, "model must be one of the experiment's"),
    ("model of a section without", ["teacher_student", "fig2c", "model=anil"], {}, r"unknown field\(s\) \['model'\]"),
    ("masks a figure varies", ["teacher_student", "fig2c", "masks=0;1"], {}, "masks is set by experiment fig2c"),
    ("masks a figure fixes", ["teacher_student", "fig2d", "masks=0;1;2;3;4;5;012345"], {}, "masks is set by"),
    ("n_modules fixed", ["hyperteacher", "fig3b", "n_modules=5", "paper"], {}, "n_modules is set by experiment fig3b"),
    ("max_hot fixed", ["hyperteacher", "fig3b", "max_hot=3", "paper"], {}, "max_hot is set by experiment fig3b"),
    ("world fixed by a figure", ["preferences", "fig4b", "max_hot=3"], {}, "max_hot is set by experiment fig4b"),
    ("seed 2**32 aliases 0", ["hyperteacher", "fig3b", "seeds=[0, 4294967296]"], {}, r"below 2\*\*32"),
    ("seed 2**64", ["goals", "fig4ef", "seeds=[18446744073709551616]"], {}, r"below 2\*\*32"),
    ("4.9 KB of seeds", ["hyperteacher", "fig3b", f"seeds={list(range(1001))}"], {}, r"seeds .*\(4898 characters\)"),
    ("min_distance too far", ["goals", "fig4ef", "min_distance=100"], {}, "min_distance=100 is too far"),
    ("grid too large", ["goals", "fig4ef", "grid=201"], {}, "grid .* odd integer from 5 to 31, got 201"),
    ("grid even", ["goals", "fig4ef", "grid=8"], {}, "grid .* odd integer"),
    ("many mazes", ["goals", "fig4ef", "n_mazes=1000"], {}, "n_mazes must be an integer >= 1 and <= 100"),
    ("warm-up unused", ["hyperteacher", "fig3b", "warmup_steps=5"], {}, "warmup_steps must be 0 with outer_schedule"),
    ("more modules than colours", ["preferences", "fig4c", "n_modules=9"], {}, "n_modules must be at most n_colours"),
    ("one colour", ["preferences", "fig4c", "n_colours=1"], {}, "n_colours must be at least 2"),
    ("40 KB value", ["hyperteacher", "fig3b", "outer_lr=" + "1;" * 20_000], {}, r"outer_lr .*\(40002 characters\)"),
    ("40 KB text", ["goals", "fig4ef", "gradient=" + "x" * 40_000], {}, "gradient must be at most 1000 characters"),
    ("train_chunk", ["hyperteacher", "fig3b", "train_chunk=3"], {}, r"train_chunk \(3\) must divide meta_batch"),
    ("workers 0", ["teacher_student", "fig2c"], {"COMPGEN_WORKERS": "0"}, "WORKERS must be an integer from 1"),
    ("workers -1", ["teacher_student", "fig2c"], {"COMPGEN_WORKERS": "-1"}, "WORKERS must be an integer from 1"),
    ("workers abc", ["teacher_student", "fig2c"], {"COMPGEN_WORKERS": "abc"}, "WORKERS must be an integer from 1"),
    ("workers full-width", ["goals", "fig4ef"], {"COMPGEN_WORKERS": "\uff12"}, "WORKERS must be an integer from 1"),
    ("checkpoints -1", ["goals", "fig4ef"], {"COMPGEN_CHECKPOINT_EVERY": "-1"}, "EVERY must be an integer from"),
    ("split maybe", ["hyperteacher", "fig3b"], {"COMPGEN_SHARD_TASKS": "maybe"}, "COMPGEN_SHARD_TASKS must be 0"),
    ("pin maybe", ["preferences", "fig4c"], {"COMPGEN_PIN_WORKERS": "maybe"}, "COMPGEN_PIN_WORKERS must be 0"),
    ("store is a file", ["teacher_student", "fig2c"], {"COMPGEN_RESULTS": "FILE"}, "COMPGEN_RESULTS: cannot write"),
    ("store below a file", ["goals", "fig4ef"], {"COMPGEN_RESULTS": "FILE/sub"}, "COMPGEN_RESULTS: cannot write"),
    ("preset as a field", ["teacher_student", "fig2c", "preset=quick"], {}, r"unknown field\(s\) \['preset'\]"),
    ("section as a field", ["hyperteacher", "fig3b", "section=goals"], {}, r"unknown field\(s\) \['section'\]"),
    ("figure as a field", ["goals", "fig4ef", "figure=fig4c"], {}, r"unknown field\(s\) \['figure'\]"),
    ("models=5", ["hyperteacher", "fig3b", "models=5"], {}, r"unknown field\(s\) \['models'\]"),
    ("models replaced", ["hyperteacher", "fig3b", "models=('anil',)"], {}, r"unknown field\(s\) \['models'\]"),
    ("a field twice", ["teacher_student", "fig2c", "outer_steps=4", "outer_steps=5"], {}, "given twice, as 4 and 5"),
    ("eval after the end", ["teacher_student", "fig2c", "eval_every=50"], {}, r"eval_every \(50\) must be at most"),
    ("cannot finish", ["goals", "fig4ef", "outer_steps=1000000000000"], {}, "cannot finish: about .* years"),
    ("hexadecimal", ["teacher_student", "fig2c", "outer_steps=0x10"], {}, "write integers in decimal digits"),
    ("a size beyond int32", ["teacher_student", "fig2c", "hidden_factor=1000000000000"], {}, "too large to build"),
    (
        "typo RESULT",
        ["teacher_student", "fig2c"],
        {"COMPGEN_RESULT": "/x"},
        "COMPGEN_RESULT: did you mean COMPGEN_RESULTS",
    ),
    ("blank RESULTS", ["teacher_student", "fig2c"], {"COMPGEN_RESULTS": "   "}, "COMPGEN_RESULTS is blank"),
    ("typo WORKER", ["teacher_student", "fig2c"], {"COMPGEN_WORKER": "2"}, "did you mean COMPGEN_WORKERS"),
    ("typo SHARD_TASK", ["hyperteacher", "fig3b"], {"COMPGEN_SHARD_TASK": "0"}, "did you mean COMPGEN_SHARD_TASKS"),
    ("typo PINWORKERS", ["goals", "fig4ef"], {"COMPGEN_PINWORKERS": "0"}, "did you mean COMPGEN_PIN_WORKERS"),
    ("workers 10**20", ["teacher_student", "fig2c"], {"COMPGEN_WORKERS": "99999999999999999999"}, "from 1 to 1024"),
    ("home of no user", ["goals", "fig4ef"], {"COMPGEN_RESULTS": "~no_such_user_7/x"}, "~no_such_user_7 names no user"),
    ("blank LANES", ["teacher_student", "fig2c"], {"COMPGEN_LANES": " \t "}, "COMPGEN_LANES is blank"),
    ("blank PRECISION", ["teacher_student", "fig2c"], {"COMPGEN_MATMUL_PRECISION": "  "}, "MATMUL_PRECISION is blank"),
    ("LANES yes", ["teacher_student", "fig2c"], {"COMPGEN_LANES": " yes "}, "COMPGEN_LANES must be 0 .off. or 1"),
    # XLA_FLAGS: XLA ended the process printing its list of ~90 flags; refused in one line before its backend starts
    ("XLA_FLAGS a word", ["teacher_student", "fig2c"], {"XLA_FLAGS": "garbage"}, "XLA_FLAGS must be flags such as"),
    ("XLA_FLAGS blank", ["teacher_student", "fig2c"], {"XLA_FLAGS": "   "}, "XLA_FLAGS is blank"),
    ("XLA_FLAGS stray word", ["teacher_student", "fig2c"], {"XLA_FLAGS": XLA_LEVEL + " 2"}, "got '2' in"),
    ("XLA_FLAGS open quote", ["teacher_student", "fig2c"], {"XLA_FLAGS": '--xla_dump_to="/tmp/a b'}, "got '--xla_dump"),
    (
        "XLA_FLAGS bad value",
        ["teacher_student", "fig2c"],
        {"XLA_FLAGS": XLA_MATH + "maybe"},
        "Couldn't interpret value",
    ),
    ("XLA_FLAGS bad int", ["teacher_student", "fig2c"], {"XLA_FLAGS": XLA_LEVEL + "abc"}, "refused by XLA: Couldn't"),
    ("XLA_FLAGS unknown", ["teacher_student", "fig2c"], {"XLA_FLAGS": "--xla_no_such=1"}, "Unknown flag in XLA_FLAGS"),
    ("XLA_FLAGS no file", ["teacher_student", "fig2c"], {"XLA_FLAGS": "/no/such/flags"}, "a file of flags.*neither"),
]


@pytest.mark.parametrize("what, args, env, expected", BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS])
def test_every_bad_input_is_one_line_before_anything_compiles(what, args, env, expected, capsys, monkeypatch, tmp_path):
    section, experiment, *rest = args
    preset = rest.pop() if rest and rest[-1] in ("smoke", "quick", "paper") else "smoke"
    afile = tmp_path / "afile"
    afile.write_text("")
    for name, value in env.items():
        monkeypatch.setenv(name, value.replace("FILE", str(afile)))
    argv = ["run", section, experiment, "--preset", preset, *(x for s in rest for x in ("--set", s))]
    start = time.perf_counter()
    message = _cli_error(argv, capsys)
    assert re.search(expected, message), message
    assert len(message) < 2_000 and time.perf_counter() - start < 30, (len(message), what)


def test_a_workers_value_is_refused_even_when_everything_is_stored(monkeypatch, capsys):
    """COMPGEN_WORKERS=0 was ignored when nothing had to be trained."""
    monkeypatch.setattr(runner.results.Store, "load", lambda *a, **k: ({}, {"provenance": {}}))
    monkeypatch.setenv("COMPGEN_WORKERS", "0")
    assert "COMPGEN_WORKERS" in _cli_error(["run", "teacher_student", "fig2c", "--preset", "smoke"], capsys)


def test_a_config_too_large_for_memory_is_refused_after_tracing_without_compiling(monkeypatch, capsys):
    """meta_batch=100000000 compiled, then failed with RESOURCE_EXHAUSTED; now its traced programs are measured
    (:func:`nothing_compiles` lets a program be traced, never run or compiled)."""
    monkeypatch.setattr(runner.memory, "device_bytes", lambda: 2 * 10**9)  # the test does not depend on this machine
    message = _cli_error(
        ["run", "hyperteacher", "fig3b", "--preset", "smoke", "--set", "meta_batch=100000000", "--set", "model=anil"],
        capsys,
    )
    assert re.search(r"meta_batch=100000000 is too large for this machine: .* needs at least [\d,.]+ GB", message)


SWEEP_BODIES = [
    ("empty grid", "[grid]\n", r"\[grid\] must list at least one field"),
    ("no grid", "", r"\[grid\] must list at least one field"),
    ("all excluded", "[grid]\nmax_hot = [1, 2]\n[[exclude]]\nn_modules = 4\n", "exclude leaves out every grid point"),
]


@pytest.mark.parametrize("what, body, expected", SWEEP_BODIES, ids=[row[0] for row in SWEEP_BODIES])
def test_sweeps_that_train_nothing_or_one_default_config_are_refused(what, body, expected, tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('section = "hyperteacher"\npreset = "smoke"\n[fixed]\nn_modules = 4\n' + body)
    assert re.search(expected, _cli_error(["sweep", str(path), "--dry-run"], capsys))


@pytest.mark.parametrize(
    "masks, expected",
    [("0;" * 20_000, "masks must be at most 1000 characters"), (FULLWIDTH, "ASCII digits"), ("0;1;9", "module 9")],
)
def test_mask_text_is_bounded_and_ascii(masks, expected, tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(f'section = "teacher_student"\npreset = "smoke"\n[grid]\nmasks = ["{masks}"]\n')
    assert cli.main(["sweep", str(path), "--dry-run"]) == 1  # the invalid point is listed, one line
    out = capsys.readouterr().out
    assert re.search(expected, out) and len(out.splitlines()) == 2, out[:500]


@pytest.mark.parametrize(
    "names, expected",
    [
        (dict(preset="smoke", presett="smoke"), r"unknown notebook parameter\(s\) \['presett'\]"),
        (dict(preset="smok"), "preset must be one of"),
        (dict(preset="smoke", seeds=2020), "seeds must be a list"),
        (dict(preset="smoke", seeds="[2020"), "seeds must be a list"),
        (dict(preset="smoke", seeds="[4294967296]"), r"below 2\*\*32"),
        (dict(preset="smoke", force="maybe"), "force must be a boolean"),
    ],
)
def test_notebook_parameters_are_checked_where_the_notebook_sees_them(names, expected):
    import subprocess as a_module

    with pytest.raises(params.ParameterError, match=expected):
        notebook.check_parameters({"In": [], "_": None, "subprocess": a_module, **names})


def test_notebook_seeds_given_as_text_are_a_list():
    """papermill -p seeds '[2020]' passes the string "[2020]"; it was read character by character."""
    notebook.check_parameters({"preset": "smoke", "seeds": "[2020, 2021]", "force": "false", "repository": None})
    assert params.seeds_parameter("[2020, 2021]") == (2020, 2021) and params.seeds_parameter("None") is None
    with pytest.raises(params.ParameterError, match="at most 1000 seeds"):
        params.seeds_parameter(list(range(1001)))
    sec, by_figure = notebook.chapter_configs("hyperteacher", "smoke", "[7]")
    assert {c.seeds for cs in by_figure.values() for c in cs} == {(7,)}
    notebook.check_parameters({"preset": "smoke", "seed": 0}, "seed")  # the theory chapter's own parameter


def test_an_exclude_rule_that_matches_nothing_is_refused(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('section = "hyperteacher"\npreset = "smoke"\n[grid]\nmax_hot = [1, 2]\n[[exclude]]\nmax_hot = 3\n')
    assert re.search(r"exclude rule \{'max_hot': 3\} matches no grid point", _cli_error(["sweep", str(path)], capsys))


def test_the_store_command_refuses_a_file_and_a_typo(tmp_path, monkeypatch, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv("COMPGEN_RESULTS", str(afile))
    assert "which is a file, not a folder" in _cli_error(["store"], capsys)
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    monkeypatch.setenv("COMPGEN_RESULTSS", "x")
    assert "did you mean COMPGEN_RESULTS" in _cli_error(["store"], capsys)


def test_version_and_a_closed_pipe_end_quietly():
    import subprocess
    import sys

    from compgen import __version__

    version = subprocess.run([sys.executable, "-m", "compgen", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == f"compgen {__version__}"
    shown = subprocess.run(
        f"{sys.executable} -m compgen show teacher_student fig2c --preset smoke | head -1",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert shown.stdout.startswith("teacher_student fig2c at preset smoke") and shown.stderr == "", shown.stderr
