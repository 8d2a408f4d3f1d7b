"""Fig. 2C/2D and Table A1 claims on hand-made outputs where they must hold and where they must fail."""

import numpy as np
import pytest

from compgen import claims as C
from compgen.figures import teacher_student as F


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
    runs = runs_of("teacher_student", "quick", lambda c: rule(c, fake))
    verdicts = {c.verdict for c in F.claims(runs) if c.figure == "Fig. 2C"}
    assert verdicts == ({C.HOLDS} if holds else {C.NOT_REPRODUCED})


@pytest.mark.parametrize(
    "discrete_drop, continuous_drop, holds", [(0.2, 0.0, True), (0.05, 0.0, False), (0.2, 0.2, False)]
)
def test_fig2d_claim(runs_of, fake, discrete_drop, continuous_drop, holds):
    rule = _alignment(0.97, 0.8, discrete_drop, continuous_drop)
    runs = runs_of("teacher_student", "quick", lambda c: rule(c, fake))
    (claim,) = [c for c in F.claims(runs) if c.figure == "Fig. 2D"]
    assert claim.verdict == (C.HOLDS if holds else C.NOT_REPRODUCED)


def test_table_a1_claim_fails_when_weight_decay_helps(runs_of, fake):
    for gain, verdict in ((0.0, C.HOLDS), (0.2, C.NOT_REPRODUCED)):
        rule = _alignment(0.97, 0.8, wd_gain=gain)
        runs = runs_of("teacher_student", "quick", lambda c: rule(c, fake))
        assert [c.verdict for c in F.claims(runs) if c.figure == "Table A1"] == [verdict]


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
