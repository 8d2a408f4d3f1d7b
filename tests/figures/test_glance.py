"""The results-at-a-glance page is computed from the store: nothing stored, every claim "not run"."""

import json

import pytest

from compgen.figures import claims as C
from compgen.figures import glance


def test_an_empty_store_gives_not_run_everywhere(store):
    found = glance.claims("smoke")
    assert set(found) == set(glance.CHAPTERS) and all(found.values())
    assert {c.verdict for group in found.values() for c in group} == {C.NOT_RUN}
    page = glance.page("smoke")
    assert "preset **`smoke`**" in page and "were not run" in page and '<table class="glance"' in page
    # one row per claim, each with its wording behind a <details> summary and its figure linked into its chapter
    every = [c for group in found.values() for c in group]
    assert page.count("<tr><td>") == len(every) and page.count("<details><summary>") == len(every)
    assert 'href="hyperteacher.html#fig3b"' in page


@pytest.mark.parametrize("name", list(glance.CHAPTERS))
def test_every_claim_is_declared_as_a_spec_of_its_chapter(runs_of, name):
    chapter = glance.CHAPTERS[name]
    specs = [value for value in vars(chapter).values() if isinstance(value, C.ClaimSpec)]
    found = chapter.claims(runs_of(name, "paper", lambda c: None))
    assert found and {(c.section, c.criterion) for c in found} <= {(s.section, s.criterion) for s in specs}
    assert not any("{" in text or "}" in text for c in found for text in (c.figure, c.claim, c.paper, c.anchor))


def _record(found, verdict_of, preset="smoke", fingerprints=None):
    return {
        "preset": preset,
        "seeds": [31, 32, 33],
        "commit": "0123456789abcdef",
        "fingerprints": fingerprints or {},
        "claims": [
            {"section": c.section, "figure": c.figure, "claim": c.claim, "verdict": verdict_of(c), "ours": "+1.0 (3/3)"}
            for group in found.values()
            for c in group
        ],
    }


def test_the_second_seed_set_adds_a_column_with_its_verdicts(store, tmp_path):
    found = glance.claims("smoke")
    first = next(iter(found.values()))[0]
    record = _record(found, lambda c: C.HOLDS if c == first else C.NOT_REPRODUCED)
    record["claims"] = record["claims"][:-1]  # the last claim is missing from the record
    path = tmp_path / "second.json"
    path.write_text(json.dumps(record))
    page = glance.page("smoke", second_set=path)
    assert "<th>seeds 31, 32, 33</th>" in page
    assert page.count('title="holds">✓</span> +1.0 (3/3)') == 1 and 'reproduced at this preset">✗</span> +1.0' in page
    assert "– not recorded" in page
    assert "0 also hold there" in page  # nothing holds on the book's seeds of an empty store
    assert "has changed since" not in page


def test_a_second_set_of_another_preset_or_older_code_is_flagged_or_ignored(store, tmp_path):
    found = glance.claims("smoke")
    path = tmp_path / "second.json"
    path.write_text(json.dumps(_record(found, lambda c: C.HOLDS, preset="quick")))
    assert "seeds 31, 32, 33" not in glance.page("smoke", second_set=path)
    assert glance.load_second_set(tmp_path / "missing.json", "smoke") is None
    path.write_text(json.dumps(_record(found, lambda c: C.HOLDS, fingerprints={"goals": "not-the-code"})))
    page = glance.page("smoke", second_set=path)
    assert "The training code of Compositional goals (§4.3) has changed since" in page


def test_the_twin_column_shows_the_references_verdict_per_seed_set(store, tmp_path):
    found = glance.claims("smoke")
    first = found["hyperteacher"][0]
    entry = lambda verdict: [{"figure": first.figure, "claim": first.claim, "verdict": verdict, "ours": "x"}]
    record = {"preset": "smoke", "claims": {"1,2,3": entry(C.HOLDS), "31,32,33": entry(C.NOT_REPRODUCED)}, "runs": {}}
    (tmp_path / "twin_hyperteacher.json").write_text(json.dumps(record))
    page = glance.page("smoke", twins=tmp_path)
    assert "<th>authors' code</th>" in page and "Chapters with twin runs: The hyperteacher" in page
    assert page.count('<a href="hyperteacher.html#twin-hyperteacher"><span class="holds"') == 1
    # no twin for the other claims; the in-context comparisons have none to run (no learner of theirs to compare)
    assert page.count("<td>–</td>") == sum(len(g) for g in found.values()) - 1 - len(found["incontext"])
    assert page.count(">n/a</span></td>") == len(found["incontext"]) > 0
    record["preset"] = "quick"  # a record of another preset is not shown
    (tmp_path / "twin_hyperteacher.json").write_text(json.dumps(record))
    assert "#twin-hyperteacher" not in glance.page("smoke", twins=tmp_path)


def test_the_paper_scale_column_judges_fig2c_from_its_record_at_build(store, tmp_path, paper_record):
    """Only the two Fig. 2C claims get a paper-scale cell, judged now from the record's per-seed numbers; without a
    record the page says that nothing ran at that scale and adds no column."""
    path = tmp_path / "paper_fig2c.json"
    assert "No claim has been trained at the paper's configuration yet" in glance.page("smoke", paper_scale=path)
    assert "<th>paper scale</th>" not in glance.page("smoke", paper_scale=path)
    path.write_text(json.dumps(paper_record([0.99, 0.97, 0.98], [0.8, 0.95, 0.7])))
    page = glance.page("smoke", paper_scale=path)
    assert "<th>paper scale</th>" in page and "trained on NVIDIA H100 80GB HBM3" in page
    assert page.count('title="holds">✓</span> +0.163 ± 0.076 (3/3)') == 2
    assert "(stale)" in page  # the hand-made record names no fingerprint or config: it cannot be current
