"""compare(): a learner defined outside the library judged by the paper's claims beside the paper's learners."""

import pytest

from compgen import results
from compgen.analysis import claims as C
from compgen.analysis.compare import Training, compare
from compgen.figures import compare as drawn
from compgen.params import ParameterError


def test_a_users_learner_gets_the_figures_claims_beside_the_papers_hypernetworks(store, importable):
    lines = []
    found = compare(
        "own_learner:gated_heads",
        "hyperteacher",
        "fig3b",
        "smoke",
        seeds=[5],
        training=Training(store=results.Store(store), log=lines.append),
        hidden=8,
        num_hidden=2,
    )
    # the learner's two Fig. 3B claims, then the two hypernetworks' on the same runs and seeds
    assert [c.claim.split(":")[0] for c in found.claims] == ["gated_heads", "gated_heads"]
    assert [c.claim.split(":")[0] for c in found.reference] == ["Linear hnet"] * 2 + ["Nonlinear hnet"] * 2
    assert all(c.verdict in (C.HOLDS, C.NOT_REPRODUCED) and c.seeds == (5,) for c in found.claims + found.reference)
    assert found.claims[0].paper == "–" and found.reference[0].paper != "–"  # the paper ran its own learners only
    assert "better of ANIL/MAML" in found.claims[0].criterion
    table = drawn.table(found).splitlines()
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
        training=Training(store=results.Store(store), log=lines.append),
        hidden=8,
        num_hidden=2,
    )
    assert again.claims == found.claims  # loaded from the store, judged the same


def test_compare_names_what_it_can_compare():
    with pytest.raises(ParameterError, match="section must be one of"):
        compare("maml", "theory", "fig3b")
    with pytest.raises(ParameterError, match="figure must be one of"):
        compare("maml", "hyperteacher", "fig3e")


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"outer_steps": 2}, "compare: outer_steps is not a learner's field .*hidden, num_hidden, inner_steps"),
        ({"meta_batch": 1, "eval_every": 1}, "compare: eval_every, meta_batch are not a learner's field"),
        ({"model": "anil"}, "compare: model is not a learner's field"),
    ],
)
def test_compare_keeps_the_paper_learners_budget_for_the_learner(store, importable, overrides, expected):
    with pytest.raises(ParameterError, match=expected) as error:
        compare(
            "own_learner:gated_heads",
            "hyperteacher",
            "fig3b",
            "smoke",
            training=Training(store=results.Store(store)),
            **overrides,
        )
    assert "\n" not in str(error.value) and not list(store.glob("**/*.result"))


def test_compare_at_the_paper_preset_on_a_cpu_is_refused_with_its_estimate(store, importable):
    with pytest.raises(ParameterError, match="compare: the \\d+ runs to train need at least [\\d,]+ hours on a CPU"):
        compare(
            "own_learner:gated_heads", "hyperteacher", "fig3b", "paper", training=Training(store=results.Store(store))
        )
    assert not list(store.glob("**/*.result"))
