"""Atomic writes and checksummed archives."""

import numpy as np
import pytest

from compgen import storage


def test_round_trip_and_damage_is_detected(tmp_path):
    path = tmp_path / "a.arrays"
    storage.write_arrays(path, {"x": np.arange(5.0), "k": np.array([1, 2], np.uint32)})
    back = storage.read_arrays(path)
    assert np.array_equal(back["x"], np.arange(5.0)) and back["k"].dtype == np.uint32
    assert [p.name for p in tmp_path.iterdir()] == ["a.arrays"]  # no temporary file left behind
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(storage.CorruptFile, match="trailer"):
        storage.read_arrays(path)
    path.write_bytes(data[:10] + bytes([data[10] ^ 1]) + data[11:])
    with pytest.raises(storage.CorruptFile, match="checksum"):
        storage.read_arrays(path)
    path.write_bytes(b"")
    with pytest.raises(storage.CorruptFile):
        storage.read_arrays(path)


def test_compressed_archives_read_back(tmp_path):
    storage.write_arrays(tmp_path / "c", {"z": np.zeros((100, 100))}, compress=True)
    assert (tmp_path / "c").stat().st_size < 10_000
    assert storage.read_arrays(tmp_path / "c")["z"].shape == (100, 100)
