"""Shared fixtures: a private results store per test; full float32 products for tests that compare two
formulations of one function; the tiny teacher-student config and stored bytes of the runner and backend tests."""

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# One key cache for every test and worker process of a session, and for the next session (compgen.programs.KeyCache:
# a key is kept under the source fingerprint it was computed at, so one kept from other code is never read): a run's
# key is lowered once per program, not once per test's private store. A test of the cache itself sets its own.
os.environ.setdefault("COMPGEN_KEY_CACHE", str(TESTS.parent / "_build" / "test-key-cache.json"))


@pytest.fixture
def importable(monkeypatch):
    """tests/ importable here and in worker processes, as a user's package on PYTHONPATH is: its own_learner.py is
    a learner defined outside the library (``own_learner:gated_heads``)."""
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("PYTHONPATH", str(TESTS))


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh, empty results store (``COMPGEN_RESULTS``) for the test."""
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path / "store"))
    return tmp_path / "store"


# A teacher-student config that trains in a second: the runner's and the backends' tests (tests/test_runner.py,
# tests/backends/) vary it field by field.
TINY = dict(
    n_modules=2,
    n_in=4,
    teacher_hidden=4,
    n_out=2,
    hidden_factor=1,
    module_factor=1,
    outer_steps=6,
    eval_every=3,
    inner_steps=2,
    meta_batch=2,
    batch=4,
    eval_tasks=4,
    eval_inputs=8,
    seeds=(100, 101),
    masks="0;1;01",
)


@pytest.fixture
def tiny_fields():
    """:data:`TINY`, a copy (fields a child process is given as JSON)."""
    return dict(TINY)


@pytest.fixture
def tiny(tiny_fields):
    """``tiny(**fields)``: the teacher-student smoke config with :data:`TINY` and ``fields`` set."""
    from compgen.experiments import teacher_student
    from compgen.section import make_config

    return lambda **fields: make_config(teacher_student.SECTION, "smoke", **{**tiny_fields, **fields})


@pytest.fixture
def stored_bytes():
    """``stored_bytes(section, cfg)``: every array the default store holds for ``cfg``, as raw bytes (the
    provenance aside)."""
    import numpy as np

    from compgen import results

    def read(section, cfg):
        arrays, _ = results.Store.default().load(section, cfg)
        return {k: np.asarray(v).tobytes() for k, v in arrays.items()}

    return read


@pytest.fixture
def full_precision():
    """Run the test with JAX's float32 matrix products at full precision (``jax.default_matmul_precision
    ("highest")``). A test that compares two formulations of one function (a model against its written-out
    equation, a fast path against the naive one, an order of the support set against another) to float32
    round-off uses it: on an NVIDIA GPU the default is TensorFloat-32, whose products differ from float32 ones in
    the fourth digit (8.4e-4 against atol=1e-5 on an H100). On a CPU it changes nothing. Use it with
    ``@pytest.mark.usefixtures("full_precision")`` (or ``pytestmark`` for a whole module)."""
    import jax

    with jax.default_matmul_precision("highest"):
        yield


def fake_output(cfg, seeds_values: dict, evals=2, steps=10):
    """A stored-run-shaped dict for ``cfg`` whose final evaluation gives ``seeds_values``: {key: value or (seeds,)
    per set or scalar}; keys are ``eval/<name>`` (with a set dimension when the value is a dict {set: values})."""
    import numpy as np

    n = len(cfg.seeds)
    out = {
        "eval_steps": np.arange(evals) * steps,
        "steps/loss": np.ones((n, steps)),
        "steps/skipped": np.zeros((n, steps), np.int32),
    }
    names = cfg.eval_set_names() if hasattr(cfg, "eval_set_names") else ()
    for key, value in seeds_values.items():
        if key.startswith("steps/"):  # per training step: given as is
            array = np.asarray(value, float)
        elif isinstance(value, dict):  # per evaluation set
            array = np.zeros((n, evals, len(names)))
            for name, v in value.items():
                array[:, :, names.index(name)] = np.asarray(v, float)[:, None] * np.ones(evals)
        else:
            array = np.repeat(np.asarray(value, float)[:, None], evals, axis=1)  # (seeds, evals, ...)
        out[key] = array
    return out


@pytest.fixture
def fake():
    """:func:`fake_output`: a stored-run-shaped dict with chosen final values."""
    return fake_output


@pytest.fixture
def runs_of():
    """``runs_of(section name, preset, outputs_for)``: a :class:`compgen.runs.Runs` whose outputs come from
    ``outputs_for(cfg)`` (None: not stored)."""
    from compgen import notebook

    def make(section_name, preset, outputs_for):
        sec, by_figure = notebook.chapter_configs(section_name, preset)
        configs = list(dict.fromkeys(c for cs in by_figure.values() for c in cs))
        return notebook.Runs(sec, preset, by_figure, {c: outputs_for(c) for c in configs})

    return make


def paper_run_record(connected, disconnected, seeds=(100, 101, 102), evals=3, steps_done=None):
    """A ledger record of Fig. 2C (``progress.json`` of :mod:`compgen.ledger`) at the paper's configuration with
    chosen final alignments, by support: complete unless ``steps_done`` is given."""
    import numpy as np

    from compgen import devices, records, results, section
    from compgen.experiments import teacher_student as ts
    from compgen.tasks import support

    every = {(c.masks, c.distribution): c for c in section.figure_configs(ts.SECTION, "fig2c", "paper")}
    total, n = 60000, len(seeds)
    entries = []
    for col in support.TABLE_A9:
        if col.column not in (1, 2, 3, 5):
            continue
        final = np.asarray(connected if col.connected else disconnected, float)
        config = results.config_dict(every[(col.spec, col.distribution)])
        entries.append(
            {
                "label": f"Table A9 column {col.column}: {col.name}",
                "select": {"masks": col.spec, "distribution": col.distribution},
                "seeds": list(seeds),
                "config": {k: v for k, v in config.items() if k not in devices.KNOBS},
                "eval": {
                    "alignment": (np.linspace(0.2, 1.0, evals)[None, :] * final[:, None]).tolist(),
                    "relative_loss": np.full((n, evals, 7), 0.01).tolist(),
                    "r2": np.full((n, evals, 7, 6), 0.9).tolist(),
                },
                "train_loss": np.full((n, evals - 1), 0.02).tolist(),
            }
        )
    done = total if steps_done is None else steps_done
    lease = {
        "date": "2026-11-30",
        "device": "NVIDIA H100 80GB HBM3",
        "jax_version": "0.11.2",
        "steps": [0, done],
        "knobs": {"fused_inner": True},
        "chunk": 100,
        "seconds": {"wall": 300.0},
    }
    return records.PaperRun(
        **{
            "work": "fig2c",
            "section": "teacher_student",
            "figure": "fig2c",
            "preset": "paper",
            "outer_steps": total,
            "eval_every": 1000,
            "steps_done": done,
            "complete": done == total,
            "eval_steps": np.linspace(0, done, evals).astype(int).tolist(),
            "configs": entries,
            "diverged": {},
            "leases": [lease],
        },
        code_fingerprint=ts.SECTION.fingerprint,
    )


@pytest.fixture
def paper_record():
    """:func:`paper_run_record`: a ledger record of Fig. 2C with chosen final alignments."""
    return paper_run_record


@pytest.fixture
def fake_bridge(tmp_path):
    """``save(done) -> total``: a bridge folder (``tmp_path / "bridge"``, its ``ledger.json`` naming one work, Fig. 2C's
    four quick columns at ×4) whose progress record says ``done`` steps, connected students at alignment 0.99 and
    disconnected ones at 0.7 on every seed at the last evaluation. ``save.folder`` and ``save.work`` name them."""
    from compgen import ledger, programs, records
    from compgen.tasks import support

    columns = {c.column: c for c in support.TABLE_A9}
    picks = tuple({"masks": columns[n].spec, "distribution": columns[n].distribution} for n in (1, 2, 3, 5))
    work = ledger.Work("fig2c-x4", "teacher_student", "fig2c", "bridge-x4", picks, ("1", "2", "3", "5"))
    configs, folder = work.configs(), tmp_path / "bridge"
    folder.mkdir()
    (folder / ledger.LEDGER).write_text(ledger.dumps_ledger([work]))

    def save(done):
        entries = [
            {
                "label": label,
                "select": pick,
                "seeds": list(cfg.seeds),
                "config": programs.config_fields(cfg),
                "eval": {"alignment": [[0.5, 0.99 if cfg.expect_connected else 0.7]] * len(cfg.seeds)},
                "train_loss": [[0.1]] * len(cfg.seeds),
            }
            for label, pick, cfg in zip(work.labels, work.select, configs)
        ]
        total = configs[0].outer_steps
        lease = {"date": "d", "device": "cpu", "jax_version": "j", "steps": [0, done], "knobs": {}, "chunk": 100}
        records.PaperRun(
            work=work.name,
            section="teacher_student",
            figure="fig2c",
            preset=work.preset,
            outer_steps=total,
            eval_every=configs[0].eval_every,
            steps_done=done,
            complete=done == total,
            eval_steps=(0, done),
            configs=tuple(entries),
            diverged={},
            leases=(lease | {"seconds": {"wall": 1.0}},),
        ).save(folder / work.name / ledger.PROGRESS)
        return total

    save.folder, save.work = folder, work
    return save
