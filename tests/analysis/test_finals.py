"""Records of final numbers: every chapter's claims read only the last evaluation, so a record of it judges them
exactly as the runs do; pooling joins seed sets, and the pooled rule asks for the mean above two standard errors."""

import zlib

import numpy as np
import pytest

from compgen import records
from compgen.analysis import claims as C
from compgen.analysis import finals
from compgen.figures import glance

# The metrics each chapter's claims read (a test below fails if one reads another)
METRICS = {
    "teacher_student": ("alignment",),
    "hyperteacher": ("accuracy", "r2_ood_pooled"),
    "preferences": ("loss",),
    "goals": ("acc", "acc_all"),
    "incontext": ("acc", "accuracy"),
}


def _outputs(name):
    """Hand-made outputs of every config: seeded per config, each metric's earlier evaluations NaN (a claim that read
    them would not match its record)."""

    def output(cfg):
        rng = np.random.default_rng(zlib.crc32(finals.config_key(cfg).encode()))
        n, sets = len(cfg.seeds), len(cfg.eval_set_names()) if hasattr(cfg, "eval_set_names") else 1
        out = {}
        for metric in METRICS[name]:
            shape = (n, 3) if metric in ("alignment", "r2_ood_pooled") else (n, 3, sets)
            values = rng.uniform(0.3, 0.9, shape)
            values[:, :-1] = np.nan
            out[f"eval/{metric}"] = values
        return out

    return output


@pytest.mark.parametrize("name", list(glance.CHAPTERS))
def test_a_record_of_final_numbers_judges_every_claim_as_the_runs_do(runs_of, name, tmp_path):
    runs = runs_of(name, "smoke", _outputs(name))
    written = records.SeedSet(preset="smoke", seeds=runs.seeds, runs={name: finals.entries(runs)})
    recorded = records.SeedSet.load(written.save(tmp_path / "set.json")).runs[name]  # as the book reads it back
    again = finals.runs_from_entries(name, "smoke", runs.seeds, recorded)
    direct, judged = glance.CHAPTERS[name].claims(runs), glance.CHAPTERS[name].claims(again)
    assert [(c.verdict, c.ours) for c in direct] == [(c.verdict, c.ours) for c in judged]
    assert any(c.verdict != C.NOT_RUN for c in direct) and not finals.missing(again)


def test_a_config_the_record_lacks_is_not_run_and_named(runs_of):
    runs = runs_of("teacher_student", "smoke", _outputs("teacher_student"))
    recorded = [e for e in finals.entries(runs) if e.figures != ("fig2d",)]  # (fig2c shares a config)
    again = finals.runs_from_entries("teacher_student", "smoke", runs.seeds, recorded)
    assert "fig2d" in finals.missing(again) and "fig2c" not in finals.missing(again)


def test_pooling_joins_seed_sets_and_the_pooled_rule_needs_two_standard_errors(runs_of, fake):
    def alignment(disconnected):
        return lambda cfg: fake(
            cfg, {"eval/alignment": np.full(len(cfg.seeds), 0.97 if cfg.expect_connected else disconnected)}
        )

    one = runs_of("teacher_student", "smoke", alignment(0.80))
    other = finals.runs_from_entries(
        "teacher_student", "smoke", [7], finals.entries(runs_of("teacher_student", "smoke", alignment(0.85)))
    )
    with pytest.raises(ValueError, match="overlap"):
        finals.pool(one, one)
    assert other.output(other.configs("fig2c")[0]) is None  # recorded on seed 100, asked on seed 7: not run
    # the same numbers on another seed set, laid out again for seeds 7
    entries = finals.entries(runs_of("teacher_student", "smoke", alignment(0.85)))
    for e in entries:
        e.config["seeds"] = [7]
    other = finals.runs_from_entries("teacher_student", "smoke", [7], entries)
    both = finals.pool(one, other)
    cfg = both.configs("fig2c")[0]
    assert cfg.seeds == (100, 7) and np.asarray(both.output(cfg)["eval/alignment"]).shape == (2, 1)
    assert both.pooled and not one.pooled  # pooling marks the runs: their claims are judged by the pooled rule
    pooled = glance.CHAPTERS["teacher_student"].claims(both)
    fig2c = [c for c in pooled if c.figure == "Fig. 2C"]
    assert [c.verdict for c in fig2c] == [C.HOLDS] * 2 and "pooled over seeds" in fig2c[0].criterion
    assert "(2/2 seeds)" in fig2c[0].ours


def test_the_pooled_rule_is_the_mean_above_two_standard_errors():
    two_against = ([0.3, 0.25, -0.05, 0.28, -0.02, 0.27], [0.0] * 6)  # the mean well above two standard errors
    assert not C.paired(*two_against, margin=0.1).sign_ok  # "every seed, or all but one": fails with two against
    assert C.paired(*two_against, margin=0.1).holds_under(pooled=True)
    assert not C.paired([0.5, -0.4, 0.45, -0.3], [0.0] * 4, margin=0.01).sign_ok_under(pooled=True)  # within 2 SE
    spec = C.ClaimSpec("teacher_student", "Fig. 2C", "a claim", "a criterion", id="c", reads=("fig2c",))
    check = C.paired(*two_against, margin=0.1)
    assert spec.judge(check, "ours").verdict == C.NOT_REPRODUCED and "paired by seed" in spec.judge(check, "").criterion
    assert spec.judge(check, "ours", pooled=True).verdict == C.HOLDS
    assert "pooled over seeds" in spec.judge(check, "ours", pooled=True).criterion


def test_configs_that_differ_only_in_their_seeds_stay_apart(runs_of, fake):
    """Goals' Fig. A10 trains the fields of a Fig. 4E/F config on one seed of three: a record keeps both, and pooling
    pairs each with its own."""
    import dataclasses

    runs = runs_of("teacher_student", "smoke", lambda c: fake(c, {"eval/alignment": np.full(len(c.seeds), 0.5)}))
    cfg = runs.configs("fig2c")[0]
    wide = dataclasses.replace(cfg, seeds=(100, 101))
    runs.figures["extra"] = [wide]
    runs.outputs[wide] = fake(wide, {"eval/alignment": np.array([0.1, 0.2])})
    keys = [finals.config_key(c) for c in (cfg, wide)]
    assert keys[0] != keys[1]
    entries = finals.entries(runs)
    assert sum(e.seeds == (100, 101) for e in entries) == 1


def test_seed_sets_whose_configs_differ_pool_as_not_run(runs_of, fake):
    """At smoke, the goals world's demonstration length follows the seeds (51 steps on the book's seed, 57 on 31-33):
    the figure's configs cannot be paired, and its pooled claims are not run instead of stopping the page."""
    from compgen import notebook

    book = runs_of("goals", "smoke", lambda c: fake(c, {"eval/acc": np.full((len(c.seeds), 3), 0.5)}))
    sec, by_figure = notebook.chapter_configs("goals", "smoke", [31, 32, 33])
    assert [c.demo_length for c in by_figure["fig4ef"]] != [c.demo_length for c in book.figures["fig4ef"]]
    second = notebook.Runs(sec, "smoke", by_figure, {c: None for cs in by_figure.values() for c in cs})
    pooled = finals.pool(book, second)
    assert "fig4ef" in finals.missing(pooled)
    assert all(pooled.output(c) is None for c in pooled.configs("fig4ef"))
    assert pooled.configs("fig4ef") == book.figures["fig4ef"]  # the book's configs, not run
    found = glance.CHAPTERS["goals"].claims(pooled)
    assert {c.verdict for c in found if c.figure.startswith("Fig. 4E")} == {C.NOT_RUN}


def test_an_entry_whose_config_the_code_no_longer_builds_is_not_run(runs_of):
    runs = runs_of("teacher_student", "smoke", _outputs("teacher_student"))
    recorded = finals.entries(runs)
    for e in recorded:
        e.config["renamed_since"] = 3  # a field the config class does not have
    again = finals.runs_from_entries("teacher_student", "smoke", runs.seeds, recorded)
    assert set(finals.missing(again)) == set(runs.figures)
