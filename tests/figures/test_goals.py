"""Fig. 4E/F, A9 and A10 claims on hand-made outputs where they must hold and where they must fail."""

import numpy as np
import pytest

from compgen.analysis import claims as C
from compgen.analysis import goals as A
from compgen.figures import FigureResult, FigureResults
from compgen.figures import goals as F


def _accuracies(hnet_lead, hnet_drop, mono_drop=2.0, exact=0.2):
    def outputs(cfg, fake):
        n = len(cfg.seeds)
        hnet = cfg.model.startswith("hnet")
        acc = 0.6 + hnet * hnet_lead / 100
        if cfg.split == "non_compositional":
            acc -= (hnet_drop if hnet else mono_drop) / 100
        sets = lambda v: {name: np.full(n, v) for name in cfg.eval_set_names()}
        return fake(
            cfg, {"eval/acc": sets(acc), "eval/acc_all": sets(exact * hnet + 0.01), "steps/acc": np.full((n, 10), 0.5)}
        )

    return outputs


@pytest.mark.parametrize("lead, drop, holds", [(10.0, 20.0, True), (1.0, 20.0, False), (10.0, 3.0, False)])
def test_fig4ef_claims(runs_of, fake, lead, drop, holds):
    rule = _accuracies(lead, drop)
    runs = runs_of("goals", "quick", lambda c: rule(c, fake))
    verdicts = {c.verdict for c in A.claims(runs) if c.figure in ("Fig. 4E", "Fig. 4F")}
    assert verdicts == {C.HOLDS} if holds else C.NOT_REPRODUCED in verdicts


def test_a_record_missing_one_monolithic_learner_is_not_judged(runs_of, fake):
    """A partial record (ANIL's runs not stored yet) must not pass "beats the better of ANIL and MAML" on MAML
    alone: the claims read the comparison as not run."""
    rule = _accuracies(10.0, 20.0)
    runs = runs_of("goals", "quick", lambda c: None if c.model == "anil" else rule(c, fake))
    verdicts = {c.verdict for c in A.claims(runs) if c.figure in ("Fig. 4E", "Fig. 4F")}
    assert C.HOLDS not in verdicts


def test_figa9_needs_a_non_trivial_fraction_of_exact_episodes(runs_of, fake):
    for exact, verdict in ((0.2, C.HOLDS), (0.0, C.NOT_REPRODUCED)):
        rule = _accuracies(10.0, 20.0, exact=exact)
        runs = runs_of("goals", "quick", lambda c: rule(c, fake))
        (first, *_) = [c for c in A.claims(runs) if c.figure == "Fig. A9"]
        assert first.verdict == verdict


def test_figures_draw_with_captions_naming_preset_and_seeds(runs_of, fake):
    rule = _accuracies(10.0, 20.0)
    runs = runs_of("goals", "smoke", lambda c: rule(c, fake))
    shown = (F.fig4ef(runs), F.figa9(runs), F.curves(runs), F.splits(runs), F.world(runs), F.figa10(runs))
    assert all(isinstance(r, (FigureResult, FigureResults)) for r in shown)  # one way to show a figure
    for result in (r for group in shown for r in (group if isinstance(group, FigureResults) else (group,))):
        assert "Preset smoke" in result.caption and "seed" in result.caption, result.caption


def test_diagnosis_reports_each_learners_curve_plateau_inner_loop_and_decodability(runs_of):
    """The diagnosis table reads each learner's OOD curve (a learner still improving shows its gain over the second
    half), the first and last step, the support loss before and after adaptation, and R² at the first and last
    evaluation, from the stored evaluations."""
    steps = np.array([0, 500, 1000, 1500, 2000])

    def outputs(cfg):
        n, ood = len(cfg.seeds), cfg.eval_set_names().index("ood")
        rising = cfg.model == "anil"  # ANIL still learning, the others flat after step 1,000
        curve = np.array([0.3, 0.5, 0.6, 0.7, 0.8]) if rising else np.array([0.3, 0.6, 0.7, 0.7, 0.7])
        per_set = lambda values: np.broadcast_to(np.asarray(values, float)[None, :, None], (n, 5, 3)).copy()
        acc = per_set(curve)
        out = {"eval_steps": steps, "eval/acc": acc, "eval/acc_first": per_set([0.9] * 5)}
        out["eval/acc_last"] = per_set([0.4] * 5)
        out["eval/inner_loss_init"], out["eval/inner_loss_final"] = per_set([2.0] * 5), per_set([0.25] * 5)
        out["eval/r2_ood_pooled"] = np.tile(np.linspace(-0.5, 0.5, 5), (n, 1))
        assert acc[0, -1, ood] == curve[-1]
        return out

    runs = runs_of("goals", "quick", outputs)
    table = F.diagnosis(runs).table
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[2:]}
    assert "steps 0, 500, 1,000, 1,500, 2,000" in table and "step 1,000 → 2,000" in table
    assert "30.0 → 50.0 → 60.0 → 70.0 → 80.0 | +20.0 |" in rows["ANIL"]
    assert "30.0 → 60.0 → 70.0 → 70.0 → 70.0 | +0.0 |" in rows["Linear hnet"]
    for row in rows.values():
        assert "90.0 ± 0.0 | 40.0 ± 0.0 | 2.000 → 0.250 | -0.50 → 0.50 |" in row
    assert set(rows) == {"ANIL", "MAML", "Linear hnet", "Nonlinear hnet"}


def test_a_size_sweep_with_a_whole_cell_missing_is_not_judged_and_does_not_stop_the_others(runs_of, fake):
    """A Fig. A10 (width, modules) cell with none of its runs stored raised (max of nothing) on the results page."""
    rule = _accuracies(10.0, 20.0)
    sweep = runs_of("goals", "quick", lambda c: None).configs("figa10")
    gone = (sweep[0].hidden, sweep[0].templates)
    missing = {c for c in sweep if (c.hidden, c.templates) == gone}
    runs = runs_of("goals", "quick", lambda c: None if c in missing else rule(c, fake))
    found = A.claims(runs)
    assert not [c for c in found if c.figure == "Fig. A10"]
    assert [c for c in found if c.figure == "Fig. 4E"][0].verdict == C.HOLDS
