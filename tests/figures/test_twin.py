"""The twin appendix's account of where the reference runs trained; a twin record is read checked, and is stale
by the key of what our chapter's code computes."""

import json

import numpy as np
import pytest

from compgen import recordfile, records
from compgen.analysis import twin as layout
from compgen.figures import twin


def test_training_time_is_reported_per_device_with_the_runs_sharing_it():
    runs = [
        {"wall_s": 600.0},  # recorded before runs named their device: these CPUs
        {"wall_s": 300.0, "device": "gpu:NVIDIA H200", "runs_at_a_time": 16},
        {"wall_s": 300.0, "device": "gpu:NVIDIA H200", "runs_at_a_time": 4},
    ]
    assert twin._where_trained(runs) == (
        "10 minutes of training on two CPU cores; 10 minutes of training on NVIDIA H200, up to 16 runs at a time"
    )
    assert twin._where_trained(runs[:1]) == "10 minutes of training on two CPU cores"


def _record(seeds, ours, theirs, row=(("figure", "fig2c"), ("masks", "01;12"))):
    """A teacher-student twin record: ``ours``/``theirs`` are per-seed alignments."""
    return _twin(
        chapter="teacher_student",
        seed_sets=[seeds],
        runs={
            f"{s}": {"row": dict(row), "seed": s, "final": {"alignment": a}, "wall_s": 1.0}
            for s, a in zip(seeds, theirs)
        },
        ours_matched_rows=[{"row": dict(row), "seeds": list(seeds), "values": {"alignment": list(ours)}}],
    )


def _twin(**fields) -> records.Twin:
    """A twin record of ``fields``, at preset quick against a reference commit ``c0ffee`` unless they say."""
    return records.Twin(**{"preset": "quick", "reference": {"commit": "c0ffee"}, **fields})


def test_pooled_table_pools_every_seed_of_every_record_and_states_the_difference_in_standard_errors():
    first = _record([1, 2, 3], ours=[0.90, 0.92, 0.94], theirs=[0.80, 0.82, 0.84])
    second = _record([4, 5, 6], ours=[0.91, 0.93, 0.95], theirs=[0.81, 0.83, 0.85])
    table = twin.pooled_table([first, second]).splitlines()
    assert len(table) == 3  # header, rule, one config row
    cells = [c.strip() for c in table[2].strip("|").split("|")]
    assert cells[:2] == ["fig2c", "01;12"]
    se = np.std([0.90, 0.92, 0.94, 0.91, 0.93, 0.95], ddof=1) / np.sqrt(6)
    assert cells[2] == f"0.925 ± {se:.3f} (6)"  # ours, all six seeds
    assert cells[3] == f"0.825 ± {se:.3f} (6)"
    assert cells[4] == f"-0.100 ± {np.hypot(se, se):.3f}"
    assert cells[5] == f"{-0.1 / np.hypot(se, se):+.1f}"


def test_pooled_table_counts_a_seed_recorded_twice_once():
    once = _record([1, 2], ours=[0.9, 0.8], theirs=[0.7, 0.6])
    twice = twin.pooled_table([once, once])
    assert "(2)" in twice and "(4)" not in twice


def _goals_record(ours, theirs, row=(("figure", "fig4ef"), ("model", "hnet_linear"))):
    """A goals twin record: ``ours``/``theirs`` are per-seed (OOD step accuracy, optimal episodes) fractions."""
    return _twin(
        chapter="goals",
        seed_sets=[list(range(len(ours)))],
        runs={
            f"{s}": {"row": dict(row), "seed": s, "final": {"ood": {"acc": a, "acc_all": b}}, "wall_s": 1.0}
            for s, (a, b) in enumerate(theirs)
        },
        ours_matched_rows=[
            {
                "row": dict(row),
                "seeds": list(range(len(ours))),
                "values": {"ood/acc": [a for a, _ in ours], "ood/acc_all": [b for _, b in ours]},
            }
        ],
    )


def test_relation_table_recovers_the_power_and_bins_each_code_alone():
    accuracies = [0.72, 0.74, 0.78, 0.82, 0.86]
    ours = [(a, a**10) for a in accuracies]  # optimal episodes = accuracy to the tenth
    theirs = [(a, a**5) for a in accuracies]
    record = _goals_record(ours, theirs)
    table = twin.relation_table([record], "OOD acc. %", "optimal OOD episodes %", ((70, 75), (80, 90)), 70).splitlines()
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.strip("|").split("|")] for r in table[2:]}
    assert rows["ours"][1] == "5" and rows["ours"][2] == "10.0 (5 runs)"
    assert rows["authors'"][2] == "5.0 (5 runs)"
    low = np.mean([100 * a**10 for a in (0.72, 0.74)])
    assert rows["ours"][3] == f"{low:.1f} (2)"
    high = np.mean([100 * a**5 for a in (0.82, 0.86)])
    assert rows["authors'"][4] == f"{high:.1f} (2)"


def test_relation_table_counts_a_config_shared_by_two_figures_once():
    one = _goals_record([(0.8, 0.1)], [(0.8, 0.1)])
    shared = _goals_record([(0.8, 0.1)], [(0.8, 0.1)], row=(("figure", "figa10"), ("model", "hnet_linear")))
    points = twin.per_seed_points([one, shared], "OOD acc. %", "optimal OOD episodes %")
    assert len(points["ours"]) == 1 and len(points["authors'"]) == 1


def test_agreement_says_how_far_the_codes_differ_in_standard_errors():
    same = [_record([1, 2, 3], ours=[0.90, 0.92, 0.94], theirs=[0.91, 0.93, 0.92])]
    text = twin.agreement(same)
    assert "no cell differs between the two codes by more than 0.0 standard errors" in text and "(up to 3" in text
    apart = [_record([1, 2, 3], ours=[0.90, 0.92, 0.94], theirs=[0.80, 0.82, 0.84])]
    assert "in 1 cell, **1 differs between the two codes by two standard errors or more" in twin.agreement(apart)
    assert twin.agreement([None]) == "No twin record with ours at the same world yet."


def test_a_headline_output_lays_out_what_the_claims_read():
    """Our matched-world runs are recorded as headline numbers; laid out again, each sits at its evaluation set."""
    from compgen import notebook

    cfg = notebook.chapter_configs("goals", "smoke", [1, 2])[1]["fig4ef"][0]
    out = layout.headline_output("goals", cfg, {"ood/acc": [0.8, 0.7], "ood/acc_all": [0.5, 0.4]})
    ood = cfg.eval_set_names().index("ood")
    assert out["eval/acc"].shape == (2, 1, len(cfg.eval_set_names()))
    assert np.allclose(out["eval/acc"][:, 0, ood], [0.8, 0.7]) and np.isnan(out["eval/acc"][:, 0, ood - 1]).all()
    assert np.allclose(twin.our_headline("goals", cfg, out)["optimal OOD episodes %"], [50.0, 40.0])
    kept = layout.our_finals("goals", cfg, out)  # what a record keeps: raw, by metric name
    assert set(kept) == {"ood/acc", "ood/acc_all"} and np.allclose(kept["ood/acc"], [0.8, 0.7])


def _checked(**extra):
    run = {"seed": 31, "final": {"alignment": 0.9}, "row": {"figure": "fig2c"}, "wall_s": 60.0}
    return {
        "chapter": "teacher_student",
        "preset": "quick",
        "reference": {"repository": "smonsays/modular-hyperteacher", "commit": "c0ffee"},
        "seed_sets": [[31]],
        "runs": {"k": {**run, "translation": {"unmatched": []}}},
        **extra,
    }


@pytest.mark.parametrize(
    "what, record, expected",
    [
        ("runs oops", _checked(runs="oops"), "runs must be an object, got 'oops'"),
        (
            "negative wall",
            _checked(runs={"k": {**_checked()["runs"]["k"], "wall_s": -60.0}}),
            "wall_s must be a number",
        ),
        ("future", _checked(schema=9), "has schema 9, written by a newer compgen"),
        ("unknown chapter", _checked(chapter="elsewhere"), "chapter 'elsewhere' is not one of"),
        ("seed sets text", _checked(seed_sets="31"), "seed_sets must be a list"),
    ],
)
def test_a_damaged_twin_record_is_one_line_naming_it(what, record, expected, tmp_path):
    path = tmp_path / "twin_teacher_student.json"
    path.write_text(json.dumps(record))
    with pytest.raises(recordfile.RecordError) as error:
        layout.load_twin(path)
    message = str(error.value)
    assert message.startswith(f"{path}: twin record") and expected in message and "\n" not in message
    assert "make twin REFERENCE=<checkout> CHAPTER=<chapter>" in message
    assert layout.load_twin(tmp_path / "none.json") is None


def test_a_twin_record_carries_the_code_of_our_chapter_and_is_stale_by_it(tmp_path):
    current = layout.code_key("teacher_student")
    checked = lambda **extra: records.Twin.from_dict(_checked(**extra))  # noqa: E731
    assert layout.staleness(checked(code_key=current)) == ""
    assert "key 0ld" in layout.staleness(checked(code_key="0ld"))
    assert "names no code key" in layout.staleness(checked())
    path = tmp_path / "twin_teacher_student.json"
    path.write_text(json.dumps(_checked(matched_world={"fig2c": {"outer_steps": 7998}})))  # ours: the record's rows
    text = twin.appendix(path, "quick", None, {}, {})
    assert "Our side of the record may be out of date: it names no code key" in text
