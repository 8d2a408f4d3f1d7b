import dataclasses
import json

import numpy as np

from compgen import metrics, results, rng


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    steps: int = 3
    seeds: tuple = (1, 2)


def test_round_trip_with_provenance(tmp_path):
    arrays = {"loss": np.arange(6.0).reshape(2, 3)}
    results.save("toy", ToyConfig(), arrays, 1.25, root=tmp_path, code=(metrics,))
    loaded, meta = results.load("toy", ToyConfig(), root=tmp_path, code=(metrics,))
    np.testing.assert_array_equal(loaded["loss"], arrays["loss"])
    assert meta["config"] == {"steps": 3, "seeds": [1, 2]}
    for field in ("compgen_version", "code_fingerprint", "git_commit", "jax_version", "device", "wall_time_s"):
        assert field in meta["provenance"]
    assert json.loads((tmp_path / "toy" / f"{results.config_hash(ToyConfig(), (metrics,))}.json").read_text())


def test_save_leaves_only_the_two_files_and_overwrites_in_place(tmp_path):
    results.save("toy", ToyConfig(), {"x": np.zeros(1)}, 0.0, root=tmp_path, code=(metrics,))
    results.save("toy", ToyConfig(), {"x": np.ones(1)}, 0.0, root=tmp_path, code=(metrics,))  # a second writer
    stem = results.config_hash(ToyConfig(), (metrics,))
    assert sorted(p.name for p in (tmp_path / "toy").iterdir()) == [f"{stem}.json", f"{stem}.npz"]
    np.testing.assert_array_equal(results.load("toy", ToyConfig(), root=tmp_path, code=(metrics,))[0]["x"], [1.0])


def test_other_config_or_other_code_is_not_reused(tmp_path):
    results.save("toy", ToyConfig(), {"x": np.zeros(1)}, 0.0, root=tmp_path, code=(metrics,))
    assert results.load("toy", ToyConfig(steps=4), root=tmp_path, code=(metrics,)) is None
    assert results.load("toy", ToyConfig(), root=tmp_path, code=(metrics, rng)) is None
    assert results.config_hash(ToyConfig()) == results.config_hash(ToyConfig())
    assert results.config_hash(ToyConfig(), (metrics,)) != results.config_hash(ToyConfig(), (rng,))


def test_store_root_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    assert results.results_root() == tmp_path
