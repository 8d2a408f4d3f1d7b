"""Fig. 4B/4C and A8 claims on hand-made outputs where they must hold and where they must fail."""

import numpy as np
import pytest

from compgen import claims as C
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
    verdicts = {c.verdict for c in F.claims(runs) if c.figure in ("Fig. 4B", "Fig. 4C")}
    assert verdicts == {C.HOLDS} if holds else C.NOT_REPRODUCED in verdicts


def test_figures_draw_with_captions_naming_preset_and_seeds(runs_of, fake):
    rule = _losses(0.4, 0.5)
    runs = runs_of("preferences", "smoke", lambda c: rule(c, fake))
    for result in (F.fig4c(runs), F.fig4b(runs), F.curves(runs), F.splits(runs), *F.world(runs), *F.figa8(runs)):
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
