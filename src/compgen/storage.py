"""Files that survive a kill and reveal damage: atomic writes and checksummed array archives.

:func:`write_atomic` writes to a temporary file beside the target, flushes it to disk and renames it over the
target (``os.replace`` is atomic), so a reader or a kill mid-write never sees a half-written file.
:func:`write_arrays` stores a dict of arrays as an ``.npz`` archive followed by a trailer (a magic string, the
archive's length and its SHA-256); :func:`read_arrays` raises :class:`CorruptFile` on a truncated, garbled or
foreign file. The results store and the checkpoints both use them.
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
import zipfile
from pathlib import Path

import numpy as np

MAGIC = b"compgen-checkpoint-v1"
_TRAILER = len(MAGIC) + 8 + 32  # magic, payload length (uint64), sha256


def results_root() -> Path:
    """The results store's folder: ``$COMPGEN_RESULTS`` if set, else ``results/`` at the top of the repository
    (found by walking up from the working directory to ``pyproject.toml`` beside ``src/compgen``), else
    ``~/.cache/compgen/results``. Checkpoints live in its ``checkpoints/`` unless ``$COMPGEN_CHECKPOINTS`` is set."""
    if os.environ.get("COMPGEN_RESULTS"):
        return Path(os.environ["COMPGEN_RESULTS"])
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "pyproject.toml").exists() and (folder / "src" / "compgen").is_dir():
            return folder / "results"
    return Path.home() / ".cache" / "compgen" / "results"


class CorruptFile(ValueError):
    """A file written by :func:`write_arrays` that is truncated, garbled or not such a file at all."""


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a flushed temporary file and an atomic rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # make the rename itself durable
    finally:
        os.close(folder)


def write_arrays(path: Path, arrays: dict, compress: bool = False) -> None:
    """Write ``arrays`` (name -> array) to ``path`` atomically, with a length and checksum trailer."""
    buffer = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buffer, **arrays)
    payload = buffer.getvalue()
    trailer = MAGIC + struct.pack("<Q", len(payload)) + hashlib.sha256(payload).digest()
    write_atomic(path, payload + trailer)


def read_arrays(path: Path) -> dict:
    """The arrays of a file written by :func:`write_arrays`; :class:`CorruptFile` if it does not check out."""
    data = Path(path).read_bytes()
    if len(data) < _TRAILER or data[-_TRAILER : -_TRAILER + len(MAGIC)] != MAGIC:
        raise CorruptFile(f"{path}: no checksum trailer (truncated, or not written by compgen)")
    (length,) = struct.unpack("<Q", data[-40:-32])
    payload = data[:-_TRAILER]
    if length != len(payload):
        raise CorruptFile(f"{path}: {len(payload)} bytes of data, the trailer says {length}")
    if hashlib.sha256(payload).digest() != data[-32:]:
        raise CorruptFile(f"{path}: checksum mismatch")
    try:
        with np.load(io.BytesIO(payload)) as archive:
            return {k: archive[k] for k in archive.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise CorruptFile(f"{path}: unreadable archive ({error})") from None
