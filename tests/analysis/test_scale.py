"""Where each claim appears along the scale bridge: the claims that need it are computed from the records, its
ledger is the computed plan, a claim's standing at each point is read from the works' progress records, and the
words for its path follow the numbers."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from compgen import bridge, catalog, ledger, records
from compgen.analysis import claims as C
from compgen.analysis import scale

ROOT = Path(__file__).resolve().parents[2]


def _point(multiple, positions, verdict=None, state="complete"):
    """A point whose per-seed positions are ``positions`` (its standing their mean, two standard errors either side,
    judged as the per-seed rule would: every seed's difference positive and the mean at least the criterion)."""
    x = np.asarray(positions, float)
    se = x.std(ddof=1) / math.sqrt(len(x)) if len(x) > 1 else 0.0
    standing = C.Standing(x.mean(), x.mean() - 2 * se, x.mean() + 2 * se, abs(x.mean() - 1) < 2 * se)
    holds = bool(x.mean() >= 1 and (x > 0).all())
    verdict = verdict or (C.HOLDS if holds else C.NOT_REPRODUCED)
    judged = state == "complete"
    return scale.Point(
        f"×{multiple}",
        float(multiple),
        multiple / 1000,
        tuple(x) if judged else (),
        standing if judged else None,
        verdict if judged else C.NOT_RUN,
        (1, 2, 3),
        state,
    )


def test_a_claim_that_crosses_its_criterion_holds_from_the_first_point_past_it():
    path = [_point(1, [0.2, 0.3, 0.25]), _point(4, [0.6, 0.7, 0.65]), _point(16, [1.6, 1.7, 1.65])]
    assert scale.words(path) == "holds from ×16"
    path = [_point(1, [1.5, 1.6, 1.55]), _point(4, [1.6, 1.7, 1.65]), _point(16, [1.6, 1.7, 1.65])]
    assert scale.words(path) == "holds from ×1"


def test_a_rising_effect_below_its_criterion_grows_and_its_crossing_is_extrapolated():
    path = [_point(1, [0.1, 0.2, 0.15]), _point(4, [0.4, 0.5, 0.45]), _point(16, [0.7, 0.8, 0.75])]
    assert scale.words(path) == "grows: +0.30 criterion per ×4, below it at ×16"
    assert scale.crossing(path) == pytest.approx(16 * 4 ** (0.25 / 0.3))
    falling = [_point(1, [0.9, 0.8, 0.85]), _point(4, [0.5, 0.6, 0.55]), _point(16, [0.2, 0.3, 0.25])]
    assert scale.words(falling).startswith("shrinks: -0.30 criterion per ×4") and scale.crossing(falling) is None


def test_no_trend_where_the_slope_is_within_two_standard_errors_and_no_verdict_where_runs_are_in_progress():
    flat = [_point(1, [0.2, 0.9, 0.5]), _point(4, [0.8, 0.3, 0.5]), _point(16, [0.4, 0.7, 0.5])]
    assert scale.words(flat) == "no trend over ×1–×16"
    pending = [_point(1, [0.2, 0.3, 0.25]), _point(4, [0.6, 0.7, 0.65]), _point(16, [9, 9, 9], state="in progress")]
    assert scale.words(pending) == "grows: +0.40 criterion per ×4, below it at ×4; ×16 in progress"
    assert scale.words([_point(1, [0.2], state="not started")]) == "not yet judged at any point; ×1 not started"


def test_the_committed_bridge_ledger_is_the_computed_plan():
    sets = scale.load_seed_sets(ROOT / "book")
    book_time = records.BookTime.load(ROOT / "book" / "records" / "book_time.json")
    text = scale.plan_text(scale.plan(sets, book_time=book_time))
    assert (ROOT / "book" / "records" / "bridge" / "ledger.json").read_text() == text
    works = ledger.read(ROOT / "book" / "records" / "bridge" / "ledger.json")
    assert works[0].preset == "bridge-x4" and {w.section for w in works} <= set(scale.unresolved(sets))
    assert all(w.configs() for w in works)  # each names its configs, of one shape
    for preset in dict.fromkeys(w.preset for w in works):  # within a point, the cheapest figure first, each together
        figures = [w.figure for w in works if w.preset == preset]
        order = list(dict.fromkeys(figures))
        assert figures == sorted(figures, key=order.index)
        costs = [sum(w.estimate_s for w in works if w.preset == preset and w.figure == f) for f in order]
        assert costs == sorted(costs) and len(costs) > 1


def test_a_bridge_point_is_judged_from_its_works_progress_records_once_complete(fake_bridge):
    """A fake progress record of Fig. 2C at ×4 whose connected columns align at 0.99 and disconnected at 0.7 on every
    seed: the discrete claim holds at ×4, and its path says so; while the record is short of its last step the point
    gets no verdict."""
    sec = catalog.SECTIONS["teacher_student"]
    sets = scale.load_seed_sets(ROOT / "book")
    total = fake_bridge(100)
    claim = scale.unresolved(sets)["teacher_student"][0]  # Fig. 2C, discrete tasks
    start = scale.pooled_runs("teacher_student", sets)
    read = {scale.unseeded(c) for c in bridge.figure_configs(sec, "fig2c", "quick")}
    works, folder = [fake_bridge.work], fake_bridge.folder
    path = scale.claim_path("teacher_student", claim, start, works, folder, multiples=(4,), read=read)
    assert path[1].state == "in progress" and not path[1].judged and "×4 in progress" in scale.words(path)
    fake_bridge(total)
    path = scale.claim_path("teacher_student", claim, start, works, folder, multiples=(4,), read=read)
    assert path[1].judged and path[1].verdict == C.HOLDS and scale.words(path) == "holds from ×4"
    assert path[1].positions == pytest.approx([1 + (0.29 - 0.1) / 0.1] * 3)
    q = bridge.figure_configs(sec, "fig2c", "quick")[0]
    assert path[0].fraction == pytest.approx(1 / bridge.paper_multiple(sec, q))


def test_works_by_point_counts_the_complete_works_of_each_point(fake_bridge):
    """A work short of its last step is counted at its point but not as complete; a work of another preset (the
    paper's ledger) is no point's."""
    total = fake_bridge(100)
    paper = dataclasses.replace(fake_bridge.work, name="fig2c", preset="paper")
    works = [fake_bridge.work, paper]
    assert scale.works_by_point(works, fake_bridge.folder) == {4: (0, 1)}
    fake_bridge(total)
    assert scale.works_by_point(works, fake_bridge.folder) == {4: (1, 1)}


def test_the_authors_code_at_a_bridge_point_is_its_twin_record_judged_by_the_chapters_claims(tmp_path):
    """The committed twin record of Fig. 2C at ×4: each claim it holds the runs of is judged on every seed pooled,
    as the twin tables judge it, and sits at our ×4 point's fraction; a claim it does not read, and a record of a
    point the path does not have, give none."""
    from compgen.analysis import twin

    record_path = ROOT / "book" / "records" / "bridge-twin" / "teacher_student_x4.json"
    record = records.Twin.load(record_path)
    sets = scale.load_seed_sets(ROOT / "book")
    theirs = {c.id: c for c in twin.pooled([record], "authors'")}
    ours = [_point(1, [0.5, 0.6, 0.7]), _point(4, [1.0, 1.1, 1.2])]
    found = 0
    for claim in scale.unresolved(sets)["teacher_student"]:
        points = scale.authors_points("teacher_student", claim, ours, record_path.parent)
        if theirs[claim.id].verdict == C.NOT_RUN:
            assert points == ()
            continue
        (point,) = points
        found += 1
        assert (point.multiple, point.fraction, point.verdict) == (4.0, ours[1].fraction, theirs[claim.id].verdict)
        assert point.standing == theirs[claim.id].details["standing"] and point.seeds == tuple(record.seed_sets[0])
        assert point.positions == scale.positions(theirs[claim.id]) and len(point.positions) == 3
        assert scale.authors_points("teacher_student", claim, ours[:1], record_path.parent) == ()  # no ×4 of ours
    assert found == 2  # Fig. 2C, discrete and continuous tasks


def test_the_authors_points_are_drawn_and_tabled_beside_ours():
    from compgen.figures import scale as figure

    result = figure.chapter("teacher_student", book=ROOT / "book", folder=ROOT / "book" / "records" / "bridge",
                            twins=ROOT / "book" / scale.TWINS)  # fmt: skip
    header, _, *rows = result.table.splitlines()
    assert header.endswith("| ×4, the authors' code | along the path |")
    assert sum(row.split(" | ")[-2] != "–" for row in rows) == 2  # the two claims of Fig. 2C
    assert "An open square is the claim judged on the authors' code" in result.caption
    work = next(
        w for w in ledger.read(ROOT / "book" / "records" / "bridge" / ledger.LEDGER) if w.section == "teacher_student"
    )
    trained = ", ".join(map(str, work.configs()[0].seeds))
    assert f"the bridge's points train seeds {trained} (×4 complete" in result.caption
    labels = [t.get_text() for ax in result.figure.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert labels.count("the authors' code") == 2
