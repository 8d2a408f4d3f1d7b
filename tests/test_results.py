"""The results store: round trip with provenance, keys that follow config and code, and damaged entries."""

import dataclasses
import json
import textwrap

import numpy as np
import pytest

from compgen import metrics, results, rng


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    steps: int = 3
    seeds: tuple = (1, 2)


def _save(root, config=ToyConfig(), value=0.0):
    return results.save("toy", config, {"x": np.full(3, value)}, 0.5, root=root, code=(metrics,))


def _load(root, config=ToyConfig(), log=print):
    return results.load("toy", config, root=root, code=(metrics,), log=log)


def test_round_trip_with_provenance(tmp_path):
    arrays = {"loss": np.arange(6.0).reshape(2, 3)}
    results.save("toy", ToyConfig(), arrays, 1.25, root=tmp_path, code=(metrics,))
    loaded, meta = results.load("toy", ToyConfig(), root=tmp_path, code=(metrics,))
    np.testing.assert_array_equal(loaded["loss"], arrays["loss"])
    assert meta["config"] == {"steps": 3, "seeds": [1, 2]}
    for field in ("compgen_version", "code_fingerprint", "git_commit", "jax_version", "device", "wall_time_s"):
        assert field in meta["provenance"]
    entry, sidecar = results.paths("toy", ToyConfig(), tmp_path, (metrics,))
    assert json.loads(sidecar.read_text())["config"] == meta["config"]  # a readable copy beside the entry


def test_save_leaves_only_the_two_files_and_overwrites_in_place(tmp_path):
    _save(tmp_path, value=0.0)
    _save(tmp_path, value=1.0)  # a second writer
    stem = results.config_hash(ToyConfig(), (metrics,))
    assert sorted(p.name for p in (tmp_path / "toy").iterdir()) == [f"{stem}.json", f"{stem}.result"]
    np.testing.assert_array_equal(_load(tmp_path)[0]["x"], [1.0] * 3)


def test_other_config_or_other_code_is_not_reused(tmp_path):
    _save(tmp_path)
    assert _load(tmp_path, ToyConfig(steps=4)) is None
    assert results.load("toy", ToyConfig(), root=tmp_path, code=(metrics, rng)) is None
    assert results.config_hash(ToyConfig(), (metrics,)) != results.config_hash(ToyConfig(), (rng,))


def test_fingerprint_ignores_prose_and_presets_but_not_code(tmp_path, monkeypatch):
    def fingerprint(source):
        path = tmp_path / "mod.py"
        path.write_text(textwrap.dedent(source))
        return results.code_fingerprint([type("M", (), {"__file__": str(path)})])

    base = fingerprint('''
        """A module."""
        PRESETS = {"quick": 1}
        def f(x):
            """Twice x."""
            return 2 * x  # double
        ''')
    same = fingerprint('''
        """A module, described at more length."""
        PRESETS = {"quick": 2, "paper": 3}
        def f(x):
            """Two times x."""
            return 2 * x
        ''')
    other = fingerprint('''
        """A module."""
        PRESETS = {"quick": 1}
        def f(x):
            """Twice x."""
            return 3 * x
        ''')
    assert base == same != other


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage", "no_entry"])
def test_a_damaged_entry_is_reported_once_moved_aside_and_treated_as_missing(tmp_path, damage):
    _save(tmp_path)
    entry, sidecar = results.paths("toy", ToyConfig(), tmp_path, (metrics,))
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        entry.write_bytes(data[:100] + bytes([data[100] ^ 0x10]) + data[101:])
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "garbage":
        entry.write_text("not a result")
    else:
        entry.unlink()  # half of the pair is missing
    lines = []
    assert _load(tmp_path, log=lines.append) is None
    assert len(lines) == 1 and "damaged entry" in lines[0] and str(tmp_path) in lines[0]
    assert not entry.exists() and not sidecar.exists() and any((tmp_path / "toy" / "damaged").iterdir())
    assert _load(tmp_path, log=lines.append) is None and len(lines) == 1  # reported once
    _save(tmp_path, value=2.0)  # recomputed and stored again
    np.testing.assert_array_equal(_load(tmp_path)[0]["x"], [2.0] * 3)


def test_a_missing_sidecar_is_harmless(tmp_path):
    _save(tmp_path)
    results.paths("toy", ToyConfig(), tmp_path, (metrics,))[1].unlink()
    assert _load(tmp_path) is not None  # the entry carries its own metadata


def test_store_root_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path))
    assert results.results_root() == tmp_path
