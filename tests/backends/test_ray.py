"""The Ray backend (compgen.backends.ray): what a remote task returns is checked before it is stored. Training on
a Ray cluster end to end: tests/test_sweeps.py (test_ray_backend_stores_every_run)."""

import numpy as np
import pytest

from compgen import params, results
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


def test_resources_and_addresses_are_checked_before_ray_is_imported(monkeypatch):
    """--ray-gpus -1 started Ray and failed in its traceback; now a bad value is one line naming the option."""
    import sys

    assert ray.check_resource("--ray-gpus", 0) == 0.0 and ray.check_resource("--ray-gpus", 0.5) == 0.5
    assert ray.check_resource("--ray-cpus", 2) == 2.0
    for bad in (-1, -0.5, 1.5, float("nan"), float("inf"), "1", True, None):
        with pytest.raises(params.ParameterError, match="^--ray-gpus must be a finite number >= 0 per Ray task"):
            ray.check_resource("--ray-gpus", bad)
    for good in (None, "auto", "local", "10.0.0.1:6379", "head-node:6379", "[::1]:6379", "ray://head:10001"):
        assert ray.check_address("--ray-address", good) == good
    for bad in ("garbage", "10.0.0.1", "head:port", "a b:1", "", 6379):
        with pytest.raises(params.ParameterError, match="^--ray-address must be auto, local, host:port"):
            ray.check_address("--ray-address", bad)
    monkeypatch.setitem(sys.modules, "ray", None)  # importing Ray would fail: the checks come first
    for kwargs, name in (
        (dict(num_gpus=-1), "num_gpus"),
        (dict(num_cpus=0.7 + 1), "num_cpus"),
        (dict(address="x"), "address"),
    ):
        with pytest.raises(params.ParameterError, match=f"^{name} must be"):
            ray.train_on_ray(S, [], results.Store("unused"), 0, print, **kwargs)
