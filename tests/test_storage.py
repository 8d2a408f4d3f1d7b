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


def _disk_full_at(monkeypatch, writes_left=0):
    """Make the disk fill up: every ``os.fsync`` of a file after ``writes_left`` raises ENOSPC with no file name, as a
    failed write or flush does (folders still sync)."""
    import errno
    import os
    import stat

    real, left = os.fsync, [writes_left]

    def fsync(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):
            left[0] -= 1
            if left[0] < 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_a_full_disk_names_the_file_and_keeps_what_was_there(tmp_path, monkeypatch):
    """A full disk's error left the store's path blank ("the results store  could not be written"): it names the file
    now, and the file written before is intact, with no temporary file beside it."""
    path = tmp_path / "a.arrays"
    storage.write_arrays(path, {"x": np.arange(3.0)})
    before = path.read_bytes()
    _disk_full_at(monkeypatch)
    with pytest.raises(OSError) as error:
        storage.write_arrays(path, {"x": np.zeros(1000)})
    assert error.value.filename == str(path) and f"No space left on device: '{path}'" in str(error.value)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["a.arrays"]


def test_a_checkpoint_on_a_full_disk_keeps_the_previous_ones(tmp_path, monkeypatch):
    from compgen import checkpoint

    saver = checkpoint.Checkpointer(tmp_path, keep=2, log=lambda _: None)
    progress = lambda done: {"done": done, "steps": [], "evals": [], "eval_steps": []}
    for done in (1, 2):
        saver.save({"w": np.full(3, float(done))}, progress(done))
    _disk_full_at(monkeypatch)
    with pytest.raises(OSError, match="No space left on device: .*step-0000000003.ckpt"):
        saver.save({"w": np.full(3, 3.0)}, progress(3))
    assert [p.name for p in saver.paths()] == ["step-0000000002.ckpt", "step-0000000001.ckpt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    _, restored = saver.restore({"w": np.zeros(3)})
    assert restored["done"] == 2


def _within(seconds, fn, *args):
    """``fn(*args)``'s result or exception, failing the test where it has not returned within ``seconds``."""
    import threading

    found = {}

    def call():
        try:
            found["value"] = fn(*args)
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            found["error"] = error

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{fn.__name__} still reading after {seconds} s"
    return found


def _odd_files(tmp_path):
    """A named pipe with no writer, a link to a device and a folder, each under a file name the project reads."""
    import os

    pipe, device, folder = tmp_path / "pipe.json", tmp_path / "device.json", tmp_path / "folder.json"
    os.mkfifo(pipe)
    device.symlink_to("/dev/zero")
    folder.mkdir()
    return {pipe: "a named pipe", device: "a device", folder: "a folder"}


def test_every_reader_refuses_pipes_devices_and_folders_at_once(tmp_path):
    """Records, sidecars, results entries, checkpoints and sweep files are read through storage.read_bytes, which
    checks what kind of file it has opened before reading: a pipe no one writes, or /dev/zero, never blocks it or
    fills memory."""
    from compgen import params, recordfile, records, sweeps

    for path, what in _odd_files(tmp_path).items():
        found = _within(10, storage.read_bytes, path)
        assert isinstance(found.get("error"), storage.NotAFile) and what in str(found["error"]), (path, found)
        found = _within(10, records.Ledger.load, path)
        assert isinstance(found.get("error"), recordfile.RecordError), found
        assert "cannot be read" in str(found["error"]) and str(path) in str(found["error"])
        found = _within(10, storage.read_arrays, path)
        assert isinstance(found.get("error"), OSError), found
        found = _within(10, sweeps.load, path)
        assert isinstance(found.get("error"), params.ParameterError), found


def test_what_is_read_is_bounded_before_it_is_read(tmp_path):
    big = tmp_path / "big.result"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(storage.NotAFile, match="holds 2,048 bytes, more than the 1,024 allowed"):
        storage.read_bytes(big, max_bytes=1024)
    with pytest.raises(storage.NotAFile, match="more than the 1,024 allowed"):
        storage.read_arrays(big, max_bytes=1024)
    assert storage.read_bytes(big, max_bytes=2048) == b"x" * 2048
