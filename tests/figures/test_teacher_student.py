"""Fig. 2C/2D and Table A1 claims on hand-made outputs where they must hold and where they must fail."""

import dataclasses

import numpy as np
import pytest

from compgen.analysis import claims as C
from compgen.analysis import teacher_student as A
from compgen.figures import teacher_student as F
from compgen.figures import teacher_student_search as Search


def _alignment(connected_value, disconnected_value, discrete_drop=0.2, continuous_drop=0.0, wd_gain=0.0):
    def outputs(cfg, fake):
        n = len(cfg.seeds)
        if cfg.expect_connected is not None and cfg.masks != "0;1;2;3;4;5;01;12;23;34;45;50":
            value = connected_value if cfg.expect_connected else disconnected_value
        elif cfg.hidden_factor * cfg.module_factor > 4:  # an overparameterised student (Fig. 2D, Table A1)
            value = 0.95 - (discrete_drop if cfg.distribution == "discrete" else continuous_drop)
            value += wd_gain if cfg.weight_decay else 0.0
        else:
            value = connected_value
        m = cfg.n_modules
        return fake(
            cfg,
            {
                "eval/alignment": np.full(n, value),
                "eval/relative_loss": {"train": np.full(n, 0.01)},
                "eval/r2": np.full((n, m + 1, m), 0.9),
            },
        )

    return outputs


@pytest.mark.parametrize(
    "connected, disconnected, holds", [(0.97, 0.80, True), (0.97, 0.92, False), (0.85, 0.70, False)]
)
def test_fig2c_claims(runs_of, fake, connected, disconnected, holds):
    rule = _alignment(connected, disconnected)
    runs = runs_of("teacher_student", "smoke", lambda c: rule(c, fake))  # smoke runs every Table A9 column
    verdicts = {c.verdict for c in A.claims(runs) if c.figure == "Fig. 2C"}
    assert verdicts == ({C.HOLDS} if holds else {C.NOT_REPRODUCED})


def test_fig2c_at_quick_judges_a_discrete_and_a_continuous_pair(runs_of, fake):
    rule = _alignment(0.97, 0.8)
    runs = runs_of("teacher_student", "quick", lambda c: rule(c, fake))
    assert [c.verdict for c in A.claims(runs) if c.figure == "Fig. 2C"] == [C.HOLDS, C.HOLDS]
    columns = sorted(col.column for col, cfg in A.columns(runs) if cfg is not None)
    assert columns == [1, 2, 3, 5]  # the continuous pair has the discrete pair's ring pairs and triangles


@pytest.mark.parametrize(
    "discrete_drop, continuous_drop, holds", [(0.2, 0.0, True), (0.05, 0.0, False), (0.2, 0.2, False)]
)
def test_fig2d_claim(runs_of, fake, discrete_drop, continuous_drop, holds):
    rule = _alignment(0.97, 0.8, discrete_drop, continuous_drop)
    runs = runs_of("teacher_student", "quick", lambda c: rule(c, fake))
    (claim,) = [c for c in A.claims(runs) if c.figure == "Fig. 2D"]
    assert claim.verdict == (C.HOLDS if holds else C.NOT_REPRODUCED)


def test_table_a1_claim_fails_when_weight_decay_helps(runs_of, fake):
    for gain, verdict in ((0.0, C.HOLDS), (0.2, C.NOT_REPRODUCED)):
        rule = _alignment(0.97, 0.8, wd_gain=gain)
        runs = runs_of("teacher_student", "quick", lambda c: rule(c, fake))
        assert [c.verdict for c in A.claims(runs) if c.figure == "Table A1"] == [verdict]


def test_figures_draw_with_captions_naming_preset_and_seeds(runs_of, fake):
    rule = _alignment(0.97, 0.8)
    runs = runs_of("teacher_student", "smoke", lambda c: rule(c, fake))
    for result in (F.fig2c(runs), F.fig2d(runs), F.table_a1(runs), F.curves(runs)):
        assert "Preset smoke" in result.caption and "seeds 100" in result.caption
    assert "paper (4 columns)" in F.table_a1(runs).table


def test_table_a1_of_the_paper_is_read_from_the_data_file(runs_of, fake):
    assert list(F.PAPER_TABLE_A1) == [1e-3, 1e-4, 1e-5, 0.0]
    assert F.PAPER_TABLE_A1[1e-4] == (0.7699, 0.6752, 0.8483, 0.8043)
    rule = _alignment(0.97, 0.8)
    table = F.table_a1(runs_of("teacher_student", "quick", lambda c: rule(c, fake))).table
    assert "| 0.001 |" in table and "0.7704 · 0.7165 · 0.8369 · 0.8144" in table


def _record(regime, factors, distribution, values, weight_decay=0.0, connected=True, column=None, name=None):
    name = name or Search.OVERPARAM_NAME
    return dict(
        regime=regime,
        world=dict(n=8, h=8, outputs=4, M=6),
        budget=dict(outer_steps=4000, meta_batch=8, inner_steps=50),
        model=Search.search_model(*factors, weight_decay),
        split=Search.search_split(distribution, connected, name),
        factors=list(factors),
        weight_decay=weight_decay,
        distribution=distribution,
        connected=connected,
        **({"column": column} if column else {}),
        seeds=[1, 2, 3],
        values=list(values),
        extra=dict(peak=[max(values)] * 3),
        branch="probe/ts",
    )


def _regime(connected=0.95, disconnected=0.8, discrete_large=0.7, continuous_large=0.95, decayed=0.7):
    records = [
        _record("r", (2, 2), "discrete", [connected] * 3, column=1),
        _record("r", (2, 2), "discrete", [disconnected] * 3, connected=False, column=2, name="two triangles"),
        _record("r", (2, 2), "continuous", [0.95] * 3),
        _record("r", (8, 8), "discrete", [discrete_large] * 3),
        _record("r", (8, 8), "continuous", [continuous_large] * 3),
        _record("r", (8, 8), "discrete", [decayed] * 3, weight_decay=1e-3),
    ]
    return records


def test_search_checks_apply_the_chapters_criteria_to_a_regimes_records():
    checks = Search.search_checks(_regime())
    assert set(checks) == {"Fig. 2C discrete", "Fig. 2D", "Table A1"}  # no continuous Table A9 columns here
    assert all(check.holds for check, _ in checks.values())
    assert "connected 0.950" in checks["Fig. 2C discrete"][1] and "gain +0.000" in checks["Table A1"][1]
    failing = Search.search_checks(_regime(disconnected=0.9, discrete_large=0.95, decayed=0.95 + 0.2))
    assert not any(check.holds for check, _ in failing.values())


def test_search_records_name_each_stored_config_of_the_chapter(runs_of, fake, store):
    rule = _alignment(0.97, 0.8)
    runs = runs_of("teacher_student", "quick", lambda c: rule(c, fake))
    records = Search.search_records(runs, "main: quick")
    configs = {c for cs in runs.figures.values() for c in cs}
    # quick: Fig. 2C's discrete and continuous pairs in the paper's world, Fig. 2D's (2, 2) and (8, 8) students and
    # Table A1's decayed one in W1
    assert len(records) == len(configs) == 9
    by_name = {(r["world"]["n"], r["model"], r["split"]): r for r in records}
    assert by_name[(16, "f=(2,2)", "discrete connected: one-hots + ring pairs")]["column"] == 1
    assert by_name[(16, "f=(2,2)", "discrete disconnected: one-hots + two triangles")]["column"] == 2
    assert by_name[(16, "f=(2,2)", "discrete connected: one-hots + ring pairs")]["budget"]["inner_steps"] == 100
    assert "column" not in by_name[(8, "f=(8,8), wd=0.001", "discrete connected: one-hots + ring pairs")]
    assert "column" not in by_name[(8, "f=(2,2)", "discrete connected: one-hots + ring pairs")]  # Fig. 2D's student
    assert by_name[(8, "f=(8,8)", "discrete connected: one-hots + ring pairs")]["values"] == pytest.approx([0.75] * 3)
    assert {r["world"]["n"] for r in records} == {8, 16}
    assert by_name[(16, "f=(2,2)", "continuous connected: ring pairs")]["column"] == 3
    assert by_name[(16, "f=(2,2)", "continuous disconnected: two triangles")]["column"] == 5
    assert set(Search.search_checks(records)) == set(Search.SEARCH_CLAIMS)


def test_the_books_search_record_renders_with_a_verdict_per_regime():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "book" / "search" / "teacher_student.json"
    tables = Search.search_tables(path)
    assert tables.count("| W1, the book's seeds |") == 2 and "**Fig. 2C**" in tables
    verdicts = Search.search_verdicts(path)
    assert A.FIG2D.criterion in verdicts and verdicts.count("| W1 | 7, 8, 9 |") == 1
    findings = Search.search_findings(path)
    assert findings.count("\n* ") >= 3 and "regimes with its runs" in findings


def test_the_lookup_student_of_table_a9_column_1_differs_in_11_directions_5_of_them_not_affine_in_z():
    dims, share = F.lookup_reference("0;1;2;3;4;5;01;12;23;34;45;50", 6)
    assert dims == pytest.approx(11.0, rel=1e-5)
    assert share == pytest.approx(5 / 11, rel=1e-4)


def test_students_table_lists_each_fig2d_student_beside_identification_and_the_lookup(runs_of, fake):
    def outputs(cfg):
        n, big = len(cfg.seeds), cfg.hidden_factor * cfg.module_factor > 4
        arrays = {"eval/alignment": np.full(n, 0.9), "eval/latent_dims": np.full(n, 9.0 if big else 5.0)}
        arrays.update({"eval/teacher_latent_dims": np.full(n, 5.5), "eval/latent_nonaffine": np.full(n, 0.2)})
        arrays.update(
            {"steps/inner_loss_init": np.full((n, 600), 0.5), "steps/inner_loss_final": np.full((n, 600), 1e-4)}
        )
        return fake(cfg, arrays)

    result = F.students(runs_of("teacher_student", "quick", outputs))
    rows = [line for line in result.table.splitlines() if line.startswith("| discrete |")]
    assert len(rows) == 2 + 2  # the (2, 2) and (8, 8) students, identification, the look-up student
    assert "| (64, 48) | 0.900 ± 0.000 | 9.00 ± 0.00 (5.50) | 0.200 ± 0.000 | 0.5 → 0.0001 |" in result.table
    assert "look-up student (12 modules, one per task) | low | 11.00 | 0.455 | – |" in result.table
    assert "Preset quick" in result.caption
    # runs stored before these metrics existed show dashes
    steps = {"steps/inner_loss_init": np.ones((1, 9)), "steps/inner_loss_final": np.ones((1, 9))}
    legacy = F.students(runs_of("teacher_student", "quick", lambda c: fake(c, {"eval/alignment": np.ones(1), **steps})))
    assert "| – | – | 1 → 1 |" in legacy.table


@pytest.mark.parametrize(
    "connected, disconnected, holds",
    [([0.99, 0.97, 0.98], [0.8, 0.95, 0.7], True), ([0.99, 0.97, 0.98], [0.8, 0.95, 0.93], False)],
)
def test_fig2c_at_the_paper_scale_is_judged_from_the_ledgers_per_seed_numbers(
    paper_record, connected, disconnected, holds
):
    """A complete ledger record's last evaluation per seed feeds the chapter's Fig. 2C claims: a mean gap of 0.163
    over three seeds of the paper's sign holds, one of 0.087 does not; the table, caption name the columns, device
    and leases."""
    result = F.paper_scale(paper_record(connected, disconnected))
    assert [c.verdict for c in result.claims] == [C.HOLDS if holds else C.NOT_REPRODUCED] * 2
    assert "(3/3 seeds)" in result.claims[0].ours
    assert "NVIDIA H100" in result.caption and "1 lease(s)" in result.caption and ", complete (" in result.caption
    assert result.table.count("\n| ") == 4  # a row per column


def test_a_run_in_progress_gets_no_verdict_only_where_it_stands(paper_record):
    """Before its last step the record draws its curves so far and each claim says "at N of 60,000 steps", not run."""
    result = F.paper_scale(paper_record([0.99] * 3, [0.5] * 3, steps_done=12000))
    assert [c.verdict for c in result.claims] == [C.NOT_RUN] * 2
    assert all(c.ours.startswith("at 12,000 of 60,000 steps: connected") for c in result.claims)
    assert all(c.details["progress"] == (12000, 60000) for c in result.claims)
    assert "in progress: 12,000 of 60,000 outer steps" in result.caption
    assert "alignment at step 12,000" in result.table


def test_a_stale_paper_record_says_why(tmp_path, paper_record):
    from compgen import ledger

    record = paper_record([0.99] * 3, [0.7] * 3)
    assert ledger.staleness(record) == []
    record.configs[1]["config"]["inner_lr"] = 0.1
    record = dataclasses.replace(record, code_fingerprint="older")
    why = ledger.staleness(record)
    assert why[0].startswith("made by other code (source fingerprint older")
    assert why[1:] == ["Table A9 column 2: one-hots + two triangles: its config changed (inner_lr)"]
    folder = tmp_path / "fig2c"
    assert "Not run yet" in F.paper_scale_section(folder)
    folder.mkdir()
    record.save(folder / "progress.json")
    assert "Recorded by older code" in F.paper_scale_section(folder).notes
    from compgen import programs

    keyed = dataclasses.replace(record, code={"key": "0ld", "versions": programs.versions()})
    assert ledger.staleness(keyed)[0] == "made by code that computes other programs (key 0ld)"
    elsewhere = dataclasses.replace(record, code={"key": "0ld", "versions": {"jax": "9"}})
    assert ledger.staleness(elsewhere) == why[1:]  # keys of other library versions are not compared
