"""Fig. 4B/4C and A8 claims on hand-made outputs where they must hold and where they must fail."""

import numpy as np
import pytest

from compgen.analysis import claims as C
from compgen.analysis import preferences as A
from compgen.figures import FigureResult, FigureResults
from compgen.figures import preferences as F


def _losses(hnet_comp, mono, noncomp_factor=1.6, disconnected_factor=1.3):
    def outputs(cfg, fake):
        n = len(cfg.seeds)
        value = hnet_comp if cfg.model.startswith("hnet") else mono
        if cfg.split == "non_compositional":
            value *= noncomp_factor
        if cfg.split == "disconnected":
            value *= disconnected_factor
        return fake(cfg, {"eval/loss": {name: np.full(n, value) for name in cfg.eval_set_names()}})

    return outputs


@pytest.mark.parametrize(
    "hnet, mono, noncomp, disconnected, holds",
    [
        (0.40, 0.50, 1.6, 1.3, True),
        (0.48, 0.50, 1.6, 1.3, False),
        (0.40, 0.50, 1.02, 1.3, False),
        (0.40, 0.50, 1.6, 1.05, False),
    ],
)
def test_fig4b_and_fig4c_claims(runs_of, fake, hnet, mono, noncomp, disconnected, holds):
    rule = _losses(hnet, mono, noncomp, disconnected)
    runs = runs_of("preferences", "quick", lambda c: rule(c, fake))
    verdicts = {c.verdict for c in A.claims(runs) if c.figure in ("Fig. 4B", "Fig. 4C")}
    assert verdicts == {C.HOLDS} if holds else C.NOT_REPRODUCED in verdicts


def test_figures_draw_with_captions_naming_preset_and_seeds(runs_of, fake):
    rule = _losses(0.4, 0.5)
    runs = runs_of("preferences", "smoke", lambda c: rule(c, fake))
    shown = (F.fig4c(runs), F.fig4b(runs), F.curves(runs), F.splits(runs), F.world(runs), F.figa8(runs))
    assert all(isinstance(r, (FigureResult, FigureResults)) for r in shown)  # one way to show a figure
    for result in (r for group in shown for r in (group if isinstance(group, FigureResults) else (group,))):
        assert "Preset smoke" in result.caption and "seed" in result.caption, result.caption
    assert "k = 4" in F.more_modules(runs)


def test_diagnosis_shows_which_learner_is_still_improving(runs_of):
    """A learner whose OOD loss still falls over the second half of training shows that fall; one that has
    plateaued shows none; runs without a probe show no R²."""

    def outputs(cfg):
        n = len(cfg.seeds)
        curve = [0.6, 0.3, 0.1] if cfg.model == "hnet_deepmlp" else [0.6, 0.2, 0.2]
        per_set = lambda values: np.broadcast_to(np.asarray(values, float)[None, :, None], (n, 3, 3)).copy()
        return {
            "eval_steps": np.array([0, 400, 800]),
            "eval/loss": per_set(curve),
            "eval/inner_loss_init": per_set([0.8] * 3),
            "eval/inner_loss_final": per_set([0.1] * 3),
        }

    table = F.diagnosis(runs_of("preferences", "quick", outputs)).table
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[2:]}
    assert "| 0.600 → 0.300 → 0.100 | -0.200 | 0.800 → 0.100 | – |" in rows["Nonlinear hnet"]
    assert "| 0.600 → 0.200 → 0.200 | +0.000 | 0.800 → 0.100 | – |" in rows["ANIL"]


def test_fig4b_diagnosis_compares_the_supports_of_each_hypernetwork(runs_of):
    """One row per support, with the loss on training combinations beside the OOD loss: a support whose OOD loss
    stands far above its test loss shows it, one that composes shows both close."""

    def outputs(cfg):
        n = len(cfg.seeds)
        ood = 0.4 if cfg.split == "disconnected" else 0.2
        per_set = np.zeros((n, 3, len(cfg.eval_set_names())))
        per_set[:, :, cfg.eval_set_names().index("test")] = 0.15
        per_set[:, :, cfg.eval_set_names().index("ood")] = [0.9, 0.5, ood]
        return {
            "eval_steps": np.array([0, 400, 800]),
            "eval/loss": per_set,
            "eval/inner_loss_init": per_set + 0.5,
            "eval/inner_loss_final": per_set,
            "eval/r2_ood_pooled": np.full((n, 3), 0.3),
        }

    result = F.fig4b_diagnosis(runs_of("preferences", "quick", outputs))
    assert result.table.startswith("**Linear hnet**")  # quick's Fig. 4B runs the linear hypernetwork only
    rows = {line.split(" | ")[0].strip("| "): line for line in result.table.splitlines() if line.startswith("| ")}
    assert "| split | OOD loss at steps 0, 400, 800 | change, step 400 → 800 | loss on test tasks |" in result.table
    assert "| 0.900 → 0.500 → 0.200 | -0.300 | 0.150 ± 0.000 | 0.700 → 0.200 | 0.30 → 0.30 |" in rows["connected"]
    assert "| 0.900 → 0.500 → 0.400 | -0.100 | 0.150 ± 0.000 | 0.900 → 0.400 |" in rows["disconnected"]
