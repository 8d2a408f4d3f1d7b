"""compare(): a learner defined outside the library judged by the paper's claims beside the paper's learners."""

import pytest

from compgen import results
from compgen.figures import claims as C
from compgen.figures.compare import compare
from compgen.params import ParameterError


def test_a_users_learner_gets_the_figures_claims_beside_the_papers_hypernetworks(store, importable):
    lines = []
    found = compare(
        "own_learner:gated_heads",
        "hyperteacher",
        "fig3b",
        "smoke",
        seeds=[5],
        store=results.Store(store),
        log=lines.append,
        hidden=8,
        num_hidden=2,
    )
    # the learner's two Fig. 3B claims, then the two hypernetworks' on the same runs and seeds
    assert [c.claim.split(":")[0] for c in found.claims] == ["gated_heads", "gated_heads"]
    assert [c.claim.split(":")[0] for c in found.reference] == ["Linear hnet"] * 2 + ["Nonlinear hnet"] * 2
    assert all(c.verdict in (C.HOLDS, C.NOT_REPRODUCED) and c.seeds == (5,) for c in found.claims + found.reference)
    assert found.claims[0].paper == "–" and found.reference[0].paper != "–"  # the paper ran its own learners only
    assert "better of ANIL/MAML" in found.claims[0].criterion
    table = found.table().splitlines()
    assert len(table) == 2 + 6 and "gated_heads: higher OOD accuracy" in table[2] and "Linear hnet" in table[4]
    # the paper learners' runs keep their preset's hyper-parameters: the overrides are the learner's own
    own = [c for c in found.runs.configs("fig3b") if c.model == "own_learner:gated_heads"]
    assert len(own) == 2 and all(c.hidden == 8 for c in own)
    assert all(c.hidden != 8 for c in found.runs.configs("fig3b", model="maml"))
    again = compare(
        "own_learner:gated_heads",
        "hyperteacher",
        "fig3b",
        "smoke",
        seeds=[5],
        store=results.Store(store),
        log=lines.append,
        hidden=8,
        num_hidden=2,
    )
    assert again.claims == found.claims  # loaded from the store, judged the same


def test_compare_names_what_it_can_compare():
    with pytest.raises(ParameterError, match="section must be one of"):
        compare("maml", "theory", "fig3b")
    with pytest.raises(ParameterError, match="figure must be one of"):
        compare("maml", "hyperteacher", "fig3e")
