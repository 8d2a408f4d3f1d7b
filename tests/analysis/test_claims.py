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
    spec = C.ClaimSpec("hyperteacher", "Fig. 3B", "hnets win", "≥ 5 points", anchor="#fig3b", id="w", reads=("fig3b",))
    claim = spec.judge(check, C.describe_difference(check, " pts", 1), seeds=(1, 2))
    assert claim.holds and claim.details["agreeing"] == 2 and "+10.5" in claim.ours
    assert claim.criterion == f"≥ 5 points; paired by seed, {C.SIGN_RULE}"
    missing = spec.judge(None, "–")
    assert missing.verdict == C.NOT_RUN
    table = verdicts.markdown_table([claim, missing])
    assert "[Fig. 3B](#fig3b)" in table and "holds" in table and "not run" in table
    with pytest.raises(ValueError, match="same non-empty shape"):
        C.paired([1.0], [1.0, 2.0])


def test_claim_specs_fill_their_templates():
    spec = C.ClaimSpec(
        "preferences",
        "Fig. 4C",
        "{model}: holding out a module raises the OOD loss",
        "non-compositional OOD loss ≥ 10% above the compositional one",
        paper="{paper:.1f} (Table {table})",
        anchor="#fig4c",
        id="fig4c/{model}",
        reads=("fig4c",),
    )
    check = C.paired([0.60, 0.66], [0.40, 0.42], 0.1, relative=True)
    claim = spec.judge(check, "ours", (1, 2), model="Linear hnet", paper=87.45, table="A6")
    assert claim.claim == "Linear hnet: holding out a module raises the OOD loss" and claim.paper == "87.5 (Table A6)"
    assert claim.holds and claim.seeds == (1, 2) and claim.figure == "Fig. 4C" and claim.anchor == "#fig4c"
    assert (
        claim.criterion
        == f"non-compositional OOD loss ≥ 10% above the compositional one; paired by seed, {C.SIGN_RULE}"
    )
    assert claim.ours == "ours" and claim.verdict == C.HOLDS
    fails = spec.judge(
        C.paired([0.41, 0.43], [0.40, 0.42], 0.1, relative=True), "ours", (1, 2), model="MAML", paper=1, table="–"
    )
    assert fails.verdict == C.NOT_REPRODUCED and fails.claim.startswith("MAML:")
    missing = spec.judge(None, "ignored", model="ANIL", paper=0, table="A2")
    assert missing.verdict == C.NOT_RUN and missing.ours == "–" and missing.seeds == ()
    with pytest.raises(KeyError, match="model"):
        spec.judge(None, "–", paper=0, table="A2")  # a template's field left out
    assert (
        C.ClaimSpec("s", "Fig. 1", "plain {{braces}}", "c", id="p", reads=("fig1",)).judge(None, "–").claim
        == "plain {braces}"
    )


# ------------------------------------------------------------------------------------- where a claim stands


def test_standing_places_the_mean_in_units_of_the_criterion():
    edge = C.paired([1.2, 1.0, 1.1], [0.0, 0.0, 0.0], margin=1.0)  # mean 1.1, se 0.058: the interval reaches 1
    standing = edge.standing()
    assert standing.position == pytest.approx(1.1) and standing.at_criterion
    assert (standing.low, standing.high) == pytest.approx((1.1 - 2 * 0.1 / 3**0.5, 1.1 + 2 * 0.1 / 3**0.5))
    clear = C.paired([1.2, 1.0, 1.1], [0.0, 0.0, 0.0], margin=0.5).standing()
    assert clear.position == pytest.approx(2.2) and not clear.at_criterion
    relative = C.lower([0.8, 0.8], [1.0, 1.0], margin=0.1, relative=True)  # 20 % below, asked 10 % of 1.0
    assert relative.standing().position == pytest.approx(2.0) and not relative.standing().at_criterion


def test_a_claim_without_a_margin_has_its_level_at_one():
    """Table A1's form: a quantity below a level (margin 0); the axis' unit is the level's size."""
    below = C.lower([0.02, 0.03, 0.025], [0.05, 0.05, 0.05], 0.0)
    assert below.threshold == 0 and below.scale == pytest.approx(0.05)
    assert below.standing().position == pytest.approx(1 + 0.025 / 0.05)
    at_level = C.lower([0.04, 0.06, 0.055], [0.05, 0.05, 0.05], 0.0).standing()  # mean 0.052, around the level
    assert at_level.at_criterion and at_level.position == pytest.approx(1 - 0.0016667 / 0.05, abs=1e-4)


def test_a_single_value_or_a_failed_level_is_never_at_the_criterion():
    assert not C.lower([1.0], [1.0]).standing().at_criterion  # one value: no interval
    failed = C.paired([1.2, 1.0, 1.1], [0.0, 0.0, 0.0], margin=1.0, level_ok=False)
    assert not failed.standing().at_criterion and not failed.holds
    nan = C.paired([float("nan"), 1.0], [0.0, 0.0], margin=1.0).standing()
    assert not nan.at_criterion and nan.position != nan.position


def test_outside_the_criterion_the_pooled_verdict_is_what_the_standing_shows():
    """Where a claim's interval does not contain the criterion, the pooled rule holds exactly when the mean is
    beyond it: so a reader of the plot reads every verdict that is not at the criterion off its position."""
    rng = np.random.default_rng(0)
    seen = {True: 0, False: 0}
    for _ in range(2000):
        n = int(rng.integers(2, 10))
        better, worse = rng.normal(rng.normal(0, 1), rng.uniform(0.05, 1.0), n), rng.normal(0, 0.1, n)
        check = C.paired(better, worse, margin=float(rng.uniform(0.0, 1.0)), relative=bool(rng.integers(2)))
        standing = check.standing()
        if standing.at_criterion:
            continue
        assert check.holds_under(pooled=True) == (standing.position > 1), (better, worse)
        seen[standing.position > 1] += 1
    assert min(seen.values()) > 100  # both sides met


def test_category_tally_and_words_agree():
    spec = C.ClaimSpec("§", "Fig. X", "a claim", "a criterion", id="x", reads=("x",))
    edge = spec.judge(C.paired([1.2, 1.0, 1.1], [0.0] * 3, margin=1.0), "ours", (1, 2, 3))
    clear = spec.judge(C.paired([1.2, 1.0, 1.1], [0.0] * 3, margin=0.5), "ours", (1, 2, 3))
    fails = spec.judge(C.paired([0.1, 0.2, 0.1], [0.0] * 3, margin=1.0), "ours", (1, 2, 3))
    missing = spec.judge(None, "–")
    claims = [edge, clear, fails, missing, clear]
    assert [C.category(c) for c in claims] == [C.AT_CRITERION, C.HOLDS_CLEARLY, C.FAILS_CLEARLY, C.NOT_RUN,
                                               C.HOLDS_CLEARLY]  # fmt: skip
    assert C.tally(claims) == {C.HOLDS_CLEARLY: 2, C.AT_CRITERION: 1, C.FAILS_CLEARLY: 1, C.NOT_RUN: 1}
    assert [C.verdict_words(c) for c in claims[:4]] == ["holds, at the criterion", "holds", "not reproduced",
                                                        "not run"]  # fmt: skip
