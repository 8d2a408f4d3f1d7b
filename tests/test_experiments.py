import numpy as np
"""How :mod:`compgen.experiments` turns configs into jobs for the parallel workers."""

import pytest

from compgen import experiments
from compgen.experiments import teacher_student as ts


def test_shape_groups_keep_configs_that_share_a_program_together():
    a = ts.make_config("smoke")
    b = ts.make_config("smoke", masks="0;1;2;3;4;5", distribution="continuous")  # same program as a
    c = ts.make_config("smoke", outer_steps=a.outer_steps + 1)
    d = ts.make_config("smoke", seeds=(1, 2))  # another number of seeds: another program
    assert experiments.shape_groups(ts, [a, c, b, d]) == [[a, b], [c], [d]]


@pytest.mark.parametrize("sizes, workers, expected", [
    ((7,), 2, [3, 4]),  # one large group is halved so that both workers run
    ((1, 2), 2, [1, 2]),  # enough jobs already
    ((1,), 2, [1]),  # nothing left to split
    ((4,), 4, [1, 1, 1, 1]),
    ((2,), 1, [2]),
])
def test_split_jobs_fills_the_workers_and_keeps_every_config_once(sizes, workers, expected):
    groups, n = [], 0
    for size in sizes:
        groups.append(list(range(n, n + size)))
        n += size
    jobs = experiments.split_jobs(groups, workers)
    assert sorted(len(j) for j in jobs) == expected
    assert sorted(x for j in jobs for x in j) == list(range(n))


def test_worker_count_follows_the_environment(monkeypatch):
    from compgen import parallel

    monkeypatch.setenv("COMPGEN_WORKERS", "3")
    assert parallel.default_workers(10) == 3
    assert parallel.default_workers(2) == 2  # never more workers than jobs
    monkeypatch.setenv("COMPGEN_WORKERS", "0")
    with pytest.raises(ValueError, match="COMPGEN_WORKERS"):
        parallel.default_workers(4)
    monkeypatch.delenv("COMPGEN_WORKERS")
    assert 1 <= parallel.default_workers(4) <= 4


def test_mean_std_gives_no_spread_for_a_single_seed():
    from compgen.experiments import mean_std

    assert mean_std([0.5, 0.7], 2) == "0.60 ± 0.10"
    assert mean_std([48.91], 1) == "48.9 (1 seed)"
    assert mean_std([np.nan, 0.25], 2) == "0.25 (1 seed)"
