"""Fig. 3B-F claims on hand-made outputs where they must hold and where they must fail, and the figures draw."""

import numpy as np
import pytest

from compgen.analysis import claims as C
from compgen.analysis import hyperteacher as A
from compgen.experiments.fewshot import MODELS
from compgen.figures import FigureResult, FigureResults
from compgen.figures import hyperteacher as F


def _accuracies(cfg, lead, noncomp_lead, r2_gap=0.5, gap_k1=30.0):
    """OOD accuracy: ANIL/MAML at 50 %, the hypernetworks ``lead`` above under random support and ``noncomp_lead``
    under non-compositional support; test accuracy 10 points above OOD except at K = 1 (``gap_k1``)."""
    n = len(cfg.seeds)
    hnet = cfg.model.startswith("hnet")
    ood = 50.0 + (lead if cfg.split == "random" else noncomp_lead) * hnet
    if cfg.max_hot == 1:
        ood = 30.0
    test = ood + (gap_k1 if cfg.max_hot == 1 else 10.0)
    sets = {name: np.full(n, ood / 100) for name in cfg.eval_set_names()}
    sets["test"] = np.full(n, test / 100)
    r2_value = 0.9 if cfg.split in ("random", "connected") else 0.9 - r2_gap
    return {
        "eval/accuracy": sets,
        "eval/r2_ood_pooled": np.full(n, r2_value),
        "eval/r2_test_pooled": np.full(n, 0.95),
        "steps/accuracy": np.full((n, 10), 0.6),
    }


@pytest.mark.parametrize("lead, noncomp_lead, holds", [(10.0, -8.0, True), (-2.0, -8.0, False), (10.0, 9.0, False)])
def test_fig3b_claims(runs_of, fake, lead, noncomp_lead, holds):
    runs = runs_of("hyperteacher", "quick", lambda c: fake(c, _accuracies(c, lead, noncomp_lead)))
    claims = [c for c in A.claims(runs) if c.figure == "Fig. 3B"]
    assert len(claims) == 4 and all(c.seeds for c in claims)
    verdicts = [c.verdict for c in claims]
    if holds:
        assert set(verdicts) == {C.HOLDS}
    else:
        assert C.NOT_REPRODUCED in verdicts


def test_fig3cd_and_fig3e_claims(runs_of, fake):
    good = runs_of("hyperteacher", "quick", lambda c: fake(c, _accuracies(c, 10.0, -8.0)))
    assert {c.verdict for c in A.claims(good) if c.figure in ("Fig. 3C/D", "Fig. 3E")} == {C.HOLDS}
    bad = runs_of("hyperteacher", "quick", lambda c: fake(c, _accuracies(c, 10.0, -8.0, r2_gap=0.02, gap_k1=10.0)))
    verdicts = {c.figure: c.verdict for c in A.claims(bad) if c.figure in ("Fig. 3C/D", "Fig. 3E")}
    assert verdicts == {"Fig. 3C/D": C.NOT_REPRODUCED, "Fig. 3E": C.NOT_REPRODUCED}


def test_missing_runs_are_not_run(runs_of):
    runs = runs_of("hyperteacher", "quick", lambda c: None)
    assert {c.verdict for c in A.claims(runs)} == {C.NOT_RUN}


def test_figures_draw_with_captions_naming_preset_and_seeds(runs_of, fake):
    runs = runs_of("hyperteacher", "smoke", lambda c: fake(c, _accuracies(c, 10.0, -8.0)))
    shown = (F.fig3b(runs), F.fig3cd(runs), F.fig3e(runs), F.curves(runs), F.fig3f(runs), F.splits(runs))
    assert all(isinstance(r, (FigureResult, FigureResults)) for r in shown)  # one way to show a figure
    results = [r for group in shown for r in (group if isinstance(group, FigureResults) else (group,))]
    for result in results:
        assert result.figure is not None
        assert "Preset smoke" in result.caption and "seed" in result.caption, result.caption
    assert "Train" in F.fig3e(runs).table and "OOD (K=4)" in F.fig3e(runs).table


def test_the_paper_tables_are_read_from_the_data_file():
    names = {(4, 1): "A2", (4, 2): "A3", (4, 4): "A4", (8, 1): "A5", (8, 2): "A6", (8, 4): "A7", (8, 8): "A8"}
    assert A.PAPER_TABLE_NAMES == names and list(A.PAPER_TABLES) == list(names)
    for (m, _), table in A.PAPER_TABLES.items():
        assert list(table) == ["train", "test", "ood", *(f"ood_{k}" for k in (1, 2, 4, 8) if k <= m)]
        assert all(list(row) == list(MODELS) for row in table.values())
    assert A.PAPER_TABLES[(8, 2)]["ood"] == {"anil": 59.76, "maml": 60.6, "hnet_linear": 87.45, "hnet_deepmlp": 96.05}


def test_fig3b_claims_quote_the_paper_table_a6(runs_of):
    claims = [c for c in A.claims(runs_of("hyperteacher", "quick", lambda c: None)) if c.figure == "Fig. 3B"]
    assert [c.paper for c in claims] == [
        "87.5 vs 60.6 % (A6)",
        "hnets below ANIL/MAML",
        "96.0 vs 60.6 % (A6)",
        "hnets below ANIL/MAML",
    ]
    assert claims[0].claim == "Linear hnet: higher OOD accuracy than ANIL and MAML under compositional support"


def test_fig3cd_diagnosis_lists_each_run_with_its_test_ood_gap_and_both_r2(runs_of, fake):
    runs = runs_of("hyperteacher", "quick", lambda c: fake(c, _accuracies(c, 10.0, -8.0)))
    table = F.fig3cd_diagnosis(runs).table.splitlines()
    rows = {line.split(" | ")[1]: line for line in table[2:]}
    assert set(rows) == {c.split for c in runs.configs("fig3cd")} == {"connected", "disconnected"}
    # test accuracy is 10 points above OOD in the fake outputs; R² test 0.95, OOD 0.9 (connected) / 0.4
    assert all("| 10.0 ± 0.0 |" in row and "| 0.95 ± 0.00 |" in row for row in rows.values())
    assert rows["connected"].endswith("| 0.90 ± 0.00 |") and rows["disconnected"].endswith("| 0.40 ± 0.00 |")
    missing = runs_of("hyperteacher", "quick", lambda c: None)
    assert "not run at this preset" in F.fig3cd_diagnosis(missing).table
