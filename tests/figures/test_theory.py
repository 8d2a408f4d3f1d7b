"""The theory chapter's constructions and figures at the smoke preset."""

import pytest

from compgen import params
from compgen.figures import theory as F


def test_constructions_and_figures():
    built = F.constructions("smoke", seed=0)
    assert built["two"]["train_loss"].max() < 1e-6  # every counterexample fits its training tasks
    for result in (
        F.support_graphs(built),
        F.two_modules(built),
        F.permutation(built),
        F.disconnected_losses(built),
        F.lookup(built),
    ):
        assert result.figure is not None and "Preset smoke, seed 0" in result.caption
    assert "one module per task" in F.summary(built)
    with pytest.raises(params.ParameterError, match="preset must be one of"):
        F.constructions("huge")
