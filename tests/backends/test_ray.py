"""The Ray backend (compgen.backends.ray): what a remote task returns is checked before it is stored. Training on
a Ray cluster end to end: tests/test_sweeps.py (test_ray_backend_stores_every_run)."""

import numpy as np
import pytest

from compgen import results
from compgen.backends import ray
from compgen.experiments import teacher_student as ts
from compgen.section import figure_configs

S = ts.SECTION


def test_files_returned_by_a_remote_worker_are_checked_before_they_are_stored(tmp_path):
    """The Ray backend wrote whatever names a worker returned: an absolute name or ``../`` escaped the store."""
    config = figure_configs(S, "fig2c", "smoke")[0]
    target = results.Store(tmp_path)
    entry, sidecar = target.paths(S, config)
    good = {f"{S.name}/{entry.name}": b"entry", f"{S.name}/{sidecar.name}": b"{}"}
    for bad in ({"../../evil.result": b"x"}, {"/tmp/evil.result": b"x"}, {f"{S.name}/other.result": b"x"}, {}):
        with pytest.raises(RuntimeError, match="refused"):
            ray.store_returned(S, config, {**good, **bad} if bad else {}, target, log=lambda _: None)
    assert not (tmp_path.parent / "evil.result").exists() and not entry.exists()
    target.save(S, config, {"x": np.ones(2)}, 1.0)
    valid = entry.read_bytes()
    lines = []
    ray.store_returned(S, config, good, target, log=lines.append)  # a valid entry is never overwritten
    assert entry.read_bytes() == valid and "already stored: kept" in lines[0]
    assert not [p for p in entry.parent.iterdir() if p.name.endswith(".tmp")]
