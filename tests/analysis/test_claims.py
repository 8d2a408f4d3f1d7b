"""The claim criterion: the paper's sign on every seed (or all but one with a two-standard-error mean) and a size."""

import numpy as np
import pytest

from compgen.analysis import claims as C
from compgen.figures import verdicts


@pytest.mark.parametrize(
    "better, worse, margin, holds",
    [
        ([0.95, 0.93, 0.97], [0.80, 0.82, 0.79], 0.1, True),  # every seed, large enough
        ([0.95, 0.93, 0.97], [0.90, 0.90, 0.90], 0.1, False),  # every seed but too small
        ([0.95, 0.80, 0.97], [0.80, 0.82, 0.79], 0.1, False),  # one seed reversed, mean not 2 SE above 0
        ([0.95, 0.93, 0.97, 0.96, 0.85], [0.80, 0.82, 0.79, 0.81, 0.86], 0.1, True),  # 4 of 5 and a clear mean
        ([0.60], [0.40], 0.1, True),  # one seed: that seed decides
        ([np.nan, 0.9], [0.5, 0.5], 0.1, False),  # a non-finite value never holds
    ],
)
def test_paired(better, worse, margin, holds):
    assert C.paired(better, worse, margin).holds is holds


def test_lower_and_relative_margins():
    ours, theirs = np.array([0.40, 0.42, 0.38]), np.array([0.50, 0.52, 0.49])
    assert C.lower(ours, theirs, 0.1, relative=True).holds  # 20 % lower, 10 % asked
    assert not C.lower(ours, theirs, 0.3, relative=True).holds  # 30 % asked
    assert not C.lower(theirs, ours).holds
    assert not C.paired(ours, theirs, 0.0, level_ok=False).holds


def test_claims_record_the_verdict_and_render():
    check = C.paired([60.0, 62.0], [50.0, 51.0], 5.0)
    claim = C.judge(
        "hyperteacher",
        "Fig. 3B",
        "hnets win",
        "≥ 5 points",
        check,
        C.describe_difference(check, " pts", 1),
        seeds=(1, 2),
        anchor="#fig3b",
    )
    assert claim.holds and claim.details["agreeing"] == 2 and "+10.5" in claim.ours
    missing = C.judge("hyperteacher", "Fig. 3B", "hnets win", "≥ 5 points", None, "–")
    assert missing.verdict == C.NOT_RUN
    table = verdicts.markdown_table([claim, missing])
    assert "[Fig. 3B](#fig3b)" in table and "holds" in table and "not run" in table
    with pytest.raises(ValueError, match="same non-empty shape"):
        C.paired([1.0], [1.0, 2.0])


def test_claim_specs_fill_their_templates_and_judge_like_judge():
    spec = C.ClaimSpec(
        "preferences",
        "Fig. 4C",
        "{model}: holding out a module raises the OOD loss",
        "non-compositional OOD loss ≥ 10% above the compositional one",
        paper="{paper:.1f} (Table {table})",
        anchor="#fig4c",
    )
    check = C.paired([0.60, 0.66], [0.40, 0.42], 0.1, relative=True)
    claim = spec.judge(check, "ours", (1, 2), model="Linear hnet", paper=87.45, table="A6")
    assert claim.claim == "Linear hnet: holding out a module raises the OOD loss" and claim.paper == "87.5 (Table A6)"
    assert claim.holds and claim.seeds == (1, 2) and claim.figure == "Fig. 4C" and claim.anchor == "#fig4c"
    assert claim == C.judge(
        "preferences",
        "Fig. 4C",
        "Linear hnet: holding out a module raises the OOD loss",
        f"non-compositional OOD loss ≥ 10% above the compositional one; paired by seed, {C.SIGN_RULE}",
        check,
        "ours",
        (1, 2),
        paper="87.5 (Table A6)",
        anchor="#fig4c",
    )
    fails = spec.judge(
        C.paired([0.41, 0.43], [0.40, 0.42], 0.1, relative=True), "ours", (1, 2), model="MAML", paper=1, table="–"
    )
    assert fails.verdict == C.NOT_REPRODUCED and fails.claim.startswith("MAML:")
    missing = spec.judge(None, "ignored", model="ANIL", paper=0, table="A2")
    assert missing.verdict == C.NOT_RUN and missing.ours == "–" and missing.seeds == ()
    with pytest.raises(KeyError, match="model"):
        spec.judge(None, "–", paper=0, table="A2")  # a template's field left out
    assert C.ClaimSpec("s", "Fig. 1", "plain {{braces}}", "c").judge(None, "–").claim == "plain {braces}"
