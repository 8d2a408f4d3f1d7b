"""The results-at-a-glance page is computed from the store: nothing stored, every claim "not run"."""

import dataclasses
import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from compgen import catalog, notebook, programs, recordfile, records, results
from compgen.analysis import chapters, finals
from compgen.analysis import claims as C
from compgen.analysis import twin as twin_layout
from compgen.figures import glance, twin


def test_an_empty_store_gives_not_run_everywhere(store):
    found = chapters.claims("smoke")
    assert set(found) == set(glance.CHAPTERS) and all(found.values())
    assert {c.verdict for group in found.values() for c in group} == {C.NOT_RUN}
    page = glance.page("smoke")
    assert "preset **`smoke`**" in page and "were not run" in page and '<table class="glance"' in page
    # one row per claim, each with its wording behind a <details> summary and its figure linked into its chapter
    every = [c for group in found.values() for c in group]
    assert page.count("<tr><td>") == len(every) and page.count("<details><summary>") == len(every)
    assert 'href="hyperteacher.html#fig3b"' in page


@pytest.mark.parametrize("name", list(glance.CHAPTERS))
def test_every_claim_is_declared_as_a_spec_of_its_chapter_and_states_its_rule(runs_of, name):
    chapter = glance.CHAPTERS[name]
    module = importlib.import_module(f"compgen.analysis.{name}")
    specs = list(chapter.specs)
    assert [v for v in vars(module).values() if isinstance(v, C.ClaimSpec)] == specs  # declared once, all listed
    found = chapter.claims(runs_of(name, "paper", lambda c: None))
    stated = {(s.section, f"{s.criterion}; {s.rule()}") for s in specs}
    assert found and {(c.section, c.criterion) for c in found} <= stated
    # a claim is named by its spec's id, once per chapter, and reads figures of its section
    ids = [c.id for c in found]
    assert len(set(ids)) == len(ids) and all(any(i.startswith(s.id.split("{")[0]) for s in specs) for i in ids)
    figures = set(catalog.get(name).figures("paper"))
    assert all(c.reads and set(c.reads) <= figures for c in found), [c.reads for c in found]
    assert not any("{" in text or "}" in text for c in found for text in (c.figure, c.claim, c.paper, c.anchor))
    assert not any("every seed" in s.criterion or "paired by seed" in s.criterion for s in specs)  # the rule says it


# Fig. 2C's final alignments per seed: connected columns at 0.97; disconnected ones as chosen per seed
def _alignment(disconnected):
    def output(cfg, fake):
        values = [0.97 if cfg.expect_connected else disconnected.get(s, 0.8) for s in cfg.seeds]
        return fake(cfg, {"eval/alignment": np.array(values)})

    return output


def _store_runs(name, seeds, output_of, fake):
    """Save hand-made outputs of the chapter's smoke configs on ``seeds`` into the test's store; their runs."""
    sec, by_figure = notebook.chapter_configs(name, "smoke", seeds)
    for cfg in dict.fromkeys(c for cs in by_figure.values() for c in cs):
        results.Store.default().save(sec, cfg, output_of(cfg, fake), 1.0)
    return notebook.stored(name, "smoke", seeds)


def _second_set(runs, key=None, preset="smoke"):
    name = runs.section.name
    return records.SeedSet(
        preset=preset,
        seeds=runs.seeds,
        commits={name: "0123456789abcdef"},
        keys={name: key or glance.code_keys()[name]},
        code_versions=programs.versions(),
        wall_s={name: 1.0},
        runs={name: finals.entries(runs)},
    )


def test_the_second_set_and_the_pooled_column_are_judged_from_per_seed_numbers(store, tmp_path, fake):
    """The book's seed (smoke: 100) holds; on 31-33 one seed's gap is small, so the set fails the 0.1 size; pooled
    over the four seeds the mean gap clears 0.1 by more than two standard errors."""
    _store_runs("teacher_student", None, _alignment({}), fake)
    path = tmp_path / "second.json"
    with_gaps = _alignment({31: 0.8, 32: 0.95, 33: 0.9})
    sec, by_figure = notebook.chapter_configs("teacher_student", "smoke", [31, 32, 33])
    outputs = {c: with_gaps(c, fake) for cs in by_figure.values() for c in cs}
    second = notebook.Runs(sec, "smoke", by_figure, outputs)
    _second_set(second).save(path)
    page = glance.page("smoke", seed_sets=[path])
    assert "<th>ours, 31–33</th>" in page and "<th>pooled</th>" in page
    assert page.count('">+0.170 (1/1)</span>') == 2  # both Fig. 2C claims on seed 100
    assert page.count('+0.087 ± 0.044 (3/3 seeds)">+0.087 (3/3)</span>') == 2  # every number on hover
    assert page.count('">+0.107 (4/4)</span>') == 2 and page.count(twin.MARK[C.NOT_REPRODUCED]) >= 2
    assert "Pooled over the book's seeds and the second seed set" in page and "(stale)" not in page
    _second_set(second, key="older").save(path)
    page = glance.page("smoke", seed_sets=[path])
    assert "The training code of Teacher and student (§3.3) has changed since" in page and "(stale)" in page
    _second_set(second, preset="quick").save(path)
    page = glance.page("smoke", seed_sets=[path])
    assert "ours, 31–33" not in page and "was made at preset `quick`; this page is at `smoke`" in page
    assert glance.load_seed_set(tmp_path / "missing.json", "smoke") is None


def _recorded_set(tmp_path, seeds, gaps, fake, name="second.json"):
    """A seed-set record of Fig. 2C's smoke configs on ``seeds``, the disconnected alignment per seed given."""
    sec, by_figure = notebook.chapter_configs("teacher_student", "smoke", seeds)
    output = _alignment(gaps)
    runs = notebook.Runs(sec, "smoke", by_figure, {c: output(c, fake) for cs in by_figure.values() for c in cs})
    path = tmp_path / name
    _second_set(runs).save(path)
    return path


def test_every_recorded_set_gets_a_column_and_the_pooled_one_counts_edges_apart(store, tmp_path, fake):
    """Seeds 100 (gap 0.17), 31-33 (0.17, 0.02, 0.07) and 51-53 (0.3 each): pooled over seven seeds the mean gap is
    0.190 ± 0.043, clear of the 0.1 margin; over the first four alone it is 0.107 ± 0.037, at the criterion.
    The headline counts and the forest plot come from the same categories."""
    _store_runs("teacher_student", None, _alignment({}), fake)
    second = _recorded_set(tmp_path, [31, 32, 33], {31: 0.8, 32: 0.95, 33: 0.9}, fake)
    third = _recorded_set(tmp_path, [51, 52, 53], {51: 0.67, 52: 0.67, 53: 0.67}, fake, "third.json")
    page = glance.page("smoke", seed_sets=[second])
    assert page.count("at the criterion</span>") == 2  # both Fig. 2C claims, in the pooled column
    assert "**1 holds clearly, 2 are at the criterion, 1 is clearly not reproduced and 23 were not run**" in page
    assert page.count('class="forest-row"') == sum(len(v) for v in chapters.claims("smoke").values())
    page = glance.page("smoke", seed_sets=[second, third])
    assert "<th>ours, 31–33</th>" in page and "<th>ours, 51–53</th>" in page and "at the criterion</span>" not in page
    assert "Pooled over the book's seeds and 2 further seed sets (7 seeds per claim" in page
    assert "**3 hold clearly, 1 is clearly not reproduced and 23 were not run**" in page
    assert "○ the book's seeds, □ seeds 31–33, △ seeds 51–53" in page  # the legend names each set's mark
    assert page.count('">+0.190 (7/7)</span>') == 2
    overlapping = _recorded_set(tmp_path, [33, 34, 35], {}, fake, "overlapping.json")
    found = chapters.judged_sets("teacher_student", notebook.stored("teacher_student", "smoke", None),
                               glance.load_seed_sets([second, overlapping, third], "smoke"))  # fmt: skip
    assert list(found) == ["100", "31,32,33", "51,52,53", "pooled"]  # a set sharing a seed with one before is left out


def test_a_chapters_findings_word_verdicts_as_the_page_and_draw_its_claims(store, tmp_path, fake):
    _store_runs("teacher_student", None, _alignment({}), fake)
    second = _recorded_set(tmp_path, [31, 32, 33], {31: 0.8, 32: 0.95, 33: 0.9}, fake)
    text = glance.findings(notebook.stored("teacher_student", "smoke", None), [second])
    assert "pooled over 4 seeds: **holds, at the criterion** (" in text
    assert "Pooled over every seed set, 1 holds clearly, 2 are at the criterion and 1 is clearly not reproduced" in text
    assert text.count('class="forest-row"') == len(chapters.claims("smoke")["teacher_student"])
    assert '<a href="#fig2c">' in text  # the chapter's own figures


def test_the_twin_columns_judge_both_codes_at_the_same_world(store, tmp_path, fake):
    """A twin record at the preset's own world: ours are the book's runs, the authors' are the record's per-seed
    numbers, each judged now, a mark per seed set and the pooled one."""
    _store_runs("teacher_student", None, _alignment({}), fake)
    commit = "c0ffee"
    runs = {}
    for seeds, disconnected in (([100], 0.8), ([31], 0.95)):
        for cfg in twin_layout.claim_configs("teacher_student", "smoke", seeds)[1]["fig2c"]:
            value = 0.97 if cfg.expect_connected else disconnected
            run = {"seed": seeds[0], "final": {"alignment": value}, "row": {}, "wall_s": 1.0}
            runs[twin_layout.run_key(cfg, seeds[0], commit)] = {**run, "translation": {"unmatched": []}}
    record = {
        "chapter": "teacher_student",
        "preset": "smoke",
        "reference": {"commit": commit},
        "seed_sets": [[100], [31]],
        "matched_world": {},
        "runs": runs,
    }
    (tmp_path / "twin_teacher_student.json").write_text(json.dumps(record))
    page = glance.page("smoke", twins=tmp_path)
    assert "<th>twin: ours</th>" in page and "<th>twin: authors'</th>" in page
    link = '<a href="teacher_student.html#twin-teacher-student">'
    holds, fails = twin.MARK[C.HOLDS], twin.MARK[C.NOT_REPRODUCED]
    assert page.count(f"{link}{holds} {fails}") == 2  # the authors' code: holds on 100, not on 31
    assert page.count(f"{link}{holds}</a>") == 3  # ours: the book's seed only (no second set), Table A1 too
    assert page.count(">n/a</span></td>") == 2 * len(chapters.claims("smoke")["incontext"])
    record["preset"] = "quick"  # a record of another preset is not shown
    (tmp_path / "twin_teacher_student.json").write_text(json.dumps(record))
    assert "#twin-teacher-student" not in glance.page("smoke", twins=tmp_path)


def test_the_paper_scale_column_judges_fig2c_from_the_ledger_at_build(store, tmp_path, paper_record):
    """Only the two Fig. 2C claims get a paper-scale cell, judged now from the ledger's per-seed numbers once the run
    is complete, "at N of 60,000 steps" before; without a record the page says that nothing ran at that scale and
    adds no column."""
    folder = tmp_path / "fig2c"
    assert "No claim has been trained at the paper's configuration yet" in glance.page("smoke", paper_scale=folder)
    assert "<th>paper scale</th>" not in glance.page("smoke", paper_scale=folder)
    folder.mkdir()
    paper_record([0.99, 0.97, 0.98], [0.8, 0.95, 0.7]).save(folder / "progress.json")
    page = glance.page("smoke", paper_scale=folder)
    assert "<th>paper scale</th>" in page and "lease(s) on NVIDIA H100 80GB HBM3" in page
    assert page.count('">+0.163 (3/3)</span>') == 2 and "(stale)" not in page
    paper_record([0.99] * 3, [0.8] * 3, steps_done=3000).save(folder / "progress.json")
    page = glance.page("smoke", paper_scale=folder)
    assert page.count(">at 3,000 of 60,000 steps</span>") == 2 and "in progress: 3,000 of 60,000 outer steps" in page
    assert "+0.19" not in page  # no difference shown as a verdict


# ------------------------------------------------------------------------ damaged, stale and mismatched records


@pytest.mark.parametrize(
    "what, text, expected",
    [
        ("truncated", '{"preset": "smoke", "runs": {', "is not valid JSON"),
        ("empty", "", "is empty"),
        ("a list", "[]", "holds list"),
        ("runs oops", '{"preset": "smoke", "seeds": [31], "runs": "oops"}', "runs must be an object, got 'oops'"),
        ("verdicts", '{"preset": "smoke", "seeds": [31], "claims": []}', "the record has no 'runs'"),
        ("future", '{"schema": 9, "preset": "smoke", "seeds": [31], "runs": {}}', "written by a newer compgen"),
    ],
)
def test_a_damaged_second_set_stops_the_page_in_one_line_naming_it(what, text, expected, tmp_path):
    path = tmp_path / "second_set.json"
    path.write_text(text)
    with pytest.raises(recordfile.RecordError) as error:
        glance.page("smoke", seed_sets=[path])
    message = str(error.value)
    assert message.startswith(f"{path}: second-seed-set record") and expected in message and "\n" not in message
    assert "tools/second_set.py" in message


def test_damaged_twin_and_paper_scale_records_stop_the_page_in_one_line(tmp_path):
    (tmp_path / "twin_goals_2.json").write_text('{"chapter": "goals", "preset": "smoke", "runs": {"k": {"seed": -1')
    with pytest.raises(recordfile.RecordError, match=r"twin_goals_2\.json: twin record is not valid JSON"):
        glance._twin_records(tmp_path, "smoke")
    record = {"chapter": "nowhere", "preset": "smoke", "reference": {"commit": "c"}, "seed_sets": [], "runs": {}}
    (tmp_path / "twin_goals_2.json").write_text(json.dumps(record))
    with pytest.raises(recordfile.RecordError, match="chapter 'nowhere' is not one of"):
        glance._twin_records(tmp_path, "smoke")
    (tmp_path / "progress.json").write_text('{"work": "fig2c", "section": "teacher_student", "figure": "fig2c"')
    with pytest.raises(recordfile.RecordError, match=r"progress\.json: paper-scale run's progress is not valid JSON"):
        glance._paper_scale_claims(tmp_path)


def test_a_second_set_without_code_keys_is_flagged_never_current(runs_of, fake):
    runs = runs_of("teacher_student", "smoke", lambda c: fake(c, {"eval/alignment": np.full(len(c.seeds), 0.5)}))
    record = dataclasses.replace(_second_set(runs), keys={})
    assert glance.stale_chapters(record) == ["teacher_student"]
    text = glance._seed_sets_summary([record], {})
    assert "names no code key comparable here for Teacher and student (§3.3)" in text and "(stale)" in text
    assert glance.stale_chapters(_second_set(runs)) == []
    assert glance.stale_chapters(_second_set(runs, key="older")) == ["teacher_student"]


def test_a_second_set_on_the_books_own_seeds_is_not_compared(runs_of, fake):
    runs = runs_of("teacher_student", "smoke", lambda c: fake(c, {"eval/alignment": np.full(len(c.seeds), 0.5)}))
    record = _second_set(runs)  # the book's seeds
    assert list(chapters.judged_sets("teacher_student", runs, record)) == [records.seed_set_name(runs.seeds)]
    text = glance._seed_sets_summary([record], {"teacher_student": runs})
    assert "This build's seeds of Teacher and student (§3.3) are among seed 100, so those are not compared" in text


def test_a_smoke_second_set_whose_configs_follow_its_seeds_shows_not_run(store, tmp_path, fake):
    """At smoke, the goals world's demonstration length follows the seeds: the book's seed and 31-33 give configs
    that cannot be pooled, so the pooled column is not run (it once stopped the page)."""
    sec, by_figure = notebook.chapter_configs("goals", "smoke", [31, 32, 33])

    def output(cfg):
        per_set = {n: np.full(len(cfg.seeds), 0.5) for n in cfg.eval_set_names()}
        return fake(cfg, {"eval/acc": per_set, "eval/acc_all": per_set})

    second = notebook.Runs(sec, "smoke", by_figure, {c: output(c) for cs in by_figure.values() for c in cs})
    path = tmp_path / "second.json"
    _second_set(second).save(path)
    record = glance.load_seed_set(path, "smoke")
    book = notebook.stored("goals", "smoke", None)
    found = chapters.judged_sets("goals", book, record)
    assert found["31,32,33"] and {c.verdict for c in found["pooled"]} == {C.NOT_RUN}
    page = glance.page("smoke", seed_sets=[path])
    assert "<th>ours, 31–33</th>" in page and "<th>pooled</th>" in page


def test_twin_records_of_other_code_or_naming_none_are_said(tmp_path):
    current = twin_layout.code_key("goals")
    record = records.Twin(chapter="goals", preset="quick", reference={"commit": "c"}, seed_sets=(), runs={})
    assert "name no code key" in glance._twin_summary({"goals": [record]})
    stale = glance._twin_summary({"goals": [dataclasses.replace(record, code_key="0ld")]})
    assert "Our code of Compositional goals (§4.3) has changed since" in stale
    fresh = glance._twin_summary({"goals": [dataclasses.replace(record, code_key=current)]})
    assert "changed since" not in fresh and "code key" not in fresh


def test_the_bridge_column_words_where_each_claim_stands_from_the_records(fake_bridge):
    """The results page's column for the scale bridge: a claim that holds clearly at quick is not on it ("–"), one
    whose fake ×4 record crosses the criterion "holds from ×4", linked to its chapter's figure."""
    total = fake_bridge(100)
    book = Path(__file__).resolve().parents[2] / "book"
    seed_sets = [book / p for p in glance.SEED_SETS]
    paths = glance._bridge_paths("teacher_student", None, seed_sets, fake_bridge.folder)
    discrete = "fig2c/discrete"
    assert "×4 in progress" in glance._bridge_cell("teacher_student", paths[discrete])
    fake_bridge(total)
    paths = glance._bridge_paths("teacher_student", None, seed_sets, fake_bridge.folder)
    cell = glance._bridge_cell("teacher_student", paths[discrete])
    assert cell == '<a class="path" href="teacher_student.html#bridge-teacher-student">holds from ×4</a>'
    assert ">–<" in glance._bridge_cell("teacher_student", None)


def test_the_bridge_summary_says_how_far_its_ledger_has_come(fake_bridge):
    """The page's paragraph on the column along the path counts the ledger's works by point, and says when all are
    complete."""
    total = fake_bridge(100)
    text = glance._bridge_summary(fake_bridge.folder)
    assert "**holds from ×N**" in text and "×4: 0 of 1 complete; 1 left." in text
    fake_bridge(total)
    assert "Every work of its ledger is complete (×4: 1 of 1 complete)." in glance._bridge_summary(fake_bridge.folder)
