"""The in-context comparison's claim (bottleneck vs transformer) on hand-made outputs."""

import numpy as np
import pytest

from compgen.analysis import claims as C
from compgen.analysis import incontext as A
from compgen.figures import incontext as F


def _accuracy(bottleneck_lead):
    def outputs(cfg, fake):
        n = len(cfg.seeds)
        key = "eval/accuracy" if cfg.environment == "hyperteacher" else "eval/acc"
        value = 0.5 + (bottleneck_lead / 100 if cfg.model == "bottleneck" else 0.0)
        return fake(
            cfg,
            {
                key: {name: np.full(n, value) for name in cfg.eval_set_names()},
                "eval/r2_ood_pooled": np.full(n, 0.5),
                "eval/r2_test_pooled": np.full(n, 0.6),
            },
        )

    return outputs


@pytest.mark.parametrize("lead, verdict", [(8.0, C.HOLDS), (1.0, C.NOT_REPRODUCED), (-5.0, C.NOT_REPRODUCED)])
def test_bottleneck_claim(runs_of, fake, lead, verdict):
    rule = _accuracy(lead)
    runs = runs_of("incontext", "quick", lambda c: rule(c, fake))
    assert {c.verdict for c in A.claims(runs)} == {verdict}


def test_figures_draw_with_captions_naming_preset_and_seeds(runs_of, fake):
    rule = _accuracy(8.0)
    runs = runs_of("incontext", "smoke", lambda c: rule(c, fake))
    paper = runs_of(
        "hyperteacher",
        "smoke",
        lambda c: fake(
            c,
            {
                "eval/accuracy": {name: np.full(len(c.seeds), 0.5) for name in c.eval_set_names()},
                "eval/r2_ood_pooled": np.full(len(c.seeds), 0.5),
                "eval/r2_test_pooled": np.full(len(c.seeds), 0.6),
            },
        ),
    )
    for result in (F.comparison(runs, paper), F.decodability(runs, paper), F.curves(runs)):
        assert "Preset smoke" in result.caption and "seed" in result.caption, result.caption
