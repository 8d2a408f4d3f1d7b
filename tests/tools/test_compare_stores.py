"""The store comparison tool: runs matched by section and config, compared byte for byte, and a damaged description
refused in one line naming its entry."""

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from compgen import results, storage

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("compare_stores", ROOT / "tools" / "compare_stores.py")
compare_stores = importlib.util.module_from_spec(spec)
sys.modules["compare_stores"] = compare_stores
spec.loader.exec_module(compare_stores)


@dataclasses.dataclass(frozen=True)
class Config:
    model: str = "toy"
    steps: int = 3


def _section(fingerprint):
    return SimpleNamespace(
        name="toy",
        fingerprint=fingerprint,
        fingerprint_of=lambda config: fingerprint,
        key_of=lambda config: results.config_hash(config, fingerprint),
    )


def _store(root, value, fingerprint="c0de00000001"):
    results.Store(root).save(_section(fingerprint), Config(), {"x": np.full(3, value)}, 0.5)
    return root


def test_the_same_numbers_under_other_code_are_identical_and_other_numbers_differ(tmp_path, capsys):
    old = _store(tmp_path / "old", 1.0)
    assert compare_stores.main([str(old), str(_store(tmp_path / "same", 1.0, "c0de00000002"))]) == 0
    assert "identical" in capsys.readouterr().out
    assert compare_stores.main([str(old), str(_store(tmp_path / "other", 2.0))]) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT" in out and "differ: x (max |diff| 1.0)" in out


def test_a_damaged_description_is_one_line_naming_the_entry(tmp_path):
    root = _store(tmp_path / "old", 1.0)
    (entry,) = root.glob("*/*.result")
    arrays = storage.read_arrays(entry)
    arrays["__meta__"] = np.frombuffer(b'{"kind": "run", "schema": 2}', dtype=np.uint8)
    entry.unlink()
    storage.write_arrays(entry, arrays)
    with pytest.raises(SystemExit, match=rf"^compare_stores: {entry}: .*stored run's description"):
        compare_stores.read_store(root)
