"""The twin appendix's account of where the reference runs trained."""

import numpy as np

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
    return {
        "chapter": "teacher_student",
        "runs": {
            f"{s}": {"row": dict(row), "seed": s, "final": {"alignment": a}, "wall_s": 1.0}
            for s, a in zip(seeds, theirs)
        },
        "ours_matched_rows": [{"row": dict(row), "seeds": list(seeds), "values": {"alignment": list(ours)}}],
    }


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
