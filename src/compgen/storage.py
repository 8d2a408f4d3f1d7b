"""Files that survive a kill and reveal damage: atomic writes and checksummed array archives.

:func:`write_atomic` writes to a temporary file beside the target, flushes it to disk and renames it over the
target (``os.replace`` is atomic), so a reader or a kill mid-write never sees a half-written file.
:func:`write_arrays` stores a dict of arrays as an ``.npz`` archive followed by a trailer (a magic string, the
archive's length and its SHA-256); :func:`read_arrays` raises :class:`CorruptFile` on a truncated, garbled or
foreign file. The results store and the checkpoints both use them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import stat
import struct
import zipfile
from pathlib import Path

import numpy as np

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

MAGIC = b"compgen-checkpoint-v1"
MAX_READ_BYTES = 4 * 2**30  # what read_arrays reads and decompresses at most (a paper checkpoint is well under 1 GiB)
MAX_TEXT_BYTES = 64 * 2**20  # what read_text reads at most: every record, sidecar and sweep file is far smaller
_TRAILER = len(MAGIC) + 8 + 32  # magic, payload length (uint64), sha256


def results_root() -> Path:
    """The results store's folder: ``$COMPGEN_RESULTS`` if set (``~`` expanded, :func:`compgen.params.env_path`), else
    ``results/`` at the top of the repository (found by walking up from the working directory to ``pyproject.toml``
    beside ``src/compgen``), else ``~/.cache/compgen/results``. Checkpoints live in its ``checkpoints/`` unless
    ``$COMPGEN_CHECKPOINTS`` is set."""
    from compgen import params

    folder = params.env_path("COMPGEN_RESULTS")
    if folder is not None:
        return Path(folder)
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "pyproject.toml").exists() and (folder / "src" / "compgen").is_dir():
            return folder / "results"
    return Path.home() / ".cache" / "compgen" / "results"


class CorruptFile(ValueError):
    """A file written by :func:`write_arrays` that is truncated, garbled or not such a file at all."""


class NotAFile(OSError):
    """A path to read that is not a regular file (a folder, a named pipe, a device, a socket), or is too large."""


def read_bytes(path, max_bytes: int = MAX_READ_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (a symbolic link is followed to it), checked before anything is read:
    a folder, named pipe, device or socket, or a file of more than ``max_bytes``, is a :class:`NotAFile` naming it
    (opened without blocking, so a pipe with no writer cannot hang the reader); at most ``max_bytes`` are read,
    whatever the file grows to meanwhile."""
    path = Path(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = (
                "a folder"
                if stat.S_ISDIR(info.st_mode)
                else "a named pipe"
                if stat.S_ISFIFO(info.st_mode)
                else ("a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "not a regular file")
            )
            raise NotAFile(f"{path} is {what}, not a regular file")
        if info.st_size > max_bytes:
            raise NotAFile(f"{path} holds {info.st_size:,} bytes, more than the {max_bytes:,} allowed")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise NotAFile(f"{path} grew past the {max_bytes:,} bytes allowed while it was read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of the regular file ``path`` (:func:`read_bytes`); a :class:`UnicodeDecodeError` where it is
    not such text."""
    return read_bytes(path, max_bytes).decode("utf-8")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a flushed temporary file and an atomic rename. A failure (a full disk)
    leaves ``path`` as it was and no temporary file, and its :class:`OSError` names ``path`` (a failed write or
    flush names no file by itself)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as error:  # an error or a stop (SystemExit, KeyboardInterrupt) mid-write: no temporary file
        tmp.unlink(missing_ok=True)
        if isinstance(error, OSError) and (error.filename is None or str(error.filename) == str(tmp)):
            error.filename, error.filename2 = str(path), None  # "No space left on device: '<path>'"
        raise
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


def read_arrays(path: Path, max_bytes: int = MAX_READ_BYTES) -> dict:
    """The arrays of a file written by :func:`write_arrays`; :class:`CorruptFile` if it does not check out or would
    decompress to more than ``max_bytes``; :class:`NotAFile` if it is not a regular file of at most ``max_bytes``."""
    data = read_bytes(path, max_bytes)
    if len(data) < _TRAILER or data[-_TRAILER : -_TRAILER + len(MAGIC)] != MAGIC:
        raise CorruptFile(f"{path}: no checksum trailer (truncated, or not written by compgen)")
    (length,) = struct.unpack("<Q", data[-40:-32])
    payload = data[:-_TRAILER]
    if length != len(payload):
        raise CorruptFile(f"{path}: {len(payload)} bytes of data, the trailer says {length}")
    if hashlib.sha256(payload).digest() != data[-32:]:
        raise CorruptFile(f"{path}: checksum mismatch")
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            size = sum(member.file_size for member in archive.infolist())
        if size > max_bytes:
            raise CorruptFile(f"{path}: its arrays would take {size:,} bytes, more than the {max_bytes:,} allowed")
        with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
            return {k: archive[k] for k in archive.files}
    except CorruptFile:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise CorruptFile(f"{path}: unreadable archive ({error})") from None


def read_member(path: Path, name: str, max_bytes: int = MAX_TEXT_BYTES):
    """The array ``name`` alone of a file written by :func:`write_arrays`, without reading the others (the archive's
    own check of that member stands for the file's checksum); :class:`CorruptFile` where it does not read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotAFile(f"{path} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        try:
            with zipfile.ZipFile(handle) as archive:
                info = archive.getinfo(f"{name}.npy")
                if info.file_size > max_bytes:
                    raise CorruptFile(f"{path}: its {name} would take {info.file_size:,} bytes")
                return np.load(io.BytesIO(archive.read(info)), allow_pickle=False)
        except (zipfile.BadZipFile, ValueError, EOFError) as error:
            raise CorruptFile(f"{path}: unreadable archive ({error})") from None


TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.tmp")  # write_atomic's temporary file: .<name>.<pid>.tmp


def remove_orphans(folder: Path, log=print) -> list:
    """Remove the temporary files of :func:`write_atomic` in ``folder`` whose writing process is gone (a kill
    mid-write); those of a running process stay. The paths removed."""
    removed = []
    for path in Path(folder).glob(".*.tmp") if Path(folder).is_dir() else ():
        found = TEMPORARY.fullmatch(path.name)
        if found is None or _alive(int(found.group("pid"))):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    if removed:
        log(f"[results] removed {len(removed)} temporary file(s) a killed writer left in {folder}")
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def lock(path: Path, on_wait=None):
    """Hold an exclusive lock on the file ``path`` (created, then removed on release) for the ``with`` block.

    Without waiting if it is free; else ``on_wait()`` is called once and the lock awaited. The operating system
    releases it when its holder dies (``fcntl.flock``); where there is no ``fcntl`` (Windows) nothing is locked.
    """
    if fcntl is None:
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                    on_wait = None
                fcntl.flock(handle, fcntl.LOCK_EX)
            with contextlib.suppress(FileNotFoundError):
                if os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino:
                    break  # still the file at ``path``, not one that its previous holder removed meanwhile
        except BaseException:
            handle.close()
            raise
        handle.close()
    _HELD.add(path)
    try:
        yield
    finally:
        _HELD.discard(path)
        path.unlink(missing_ok=True)
        handle.close()


_HELD: set = set()  # the lock files this process holds (:func:`drop_locks`)


def drop_locks() -> None:
    """Remove the files of the locks this process holds, for a process that ends without unwinding (``os._exit``);
    the locks themselves are released by the operating system as it ends."""
    for path in list(_HELD):
        path.unlink(missing_ok=True)


def check_folder_path(folder: Path, variable: str) -> None:
    """Refuse a ``folder`` that is a file or lies below one (it can be neither read nor made): a
    :class:`compgen.params.ParameterError` naming the environment ``variable`` that chooses it; a folder that does not
    exist yet passes."""
    from compgen.params import ParameterError

    folder = Path(folder)
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ParameterError(
            f"{variable}: cannot write in {folder}: {blocker} is a file; point {variable} to a writable folder"
        )


def check_writable(folder: Path, variable: str) -> None:
    """Create ``folder`` if needed and check that a file can be written in it; else a
    :class:`compgen.params.ParameterError` naming the environment ``variable`` that chooses it, the path and why."""
    from compgen.params import ParameterError

    folder = Path(folder)
    probe = folder / f".probe.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
        why = f"{blocker} is a file" if blocker is not None and not blocker.is_dir() else error.strerror or str(error)
        raise ParameterError(
            f"{variable}: cannot write in {folder}: {why}; point {variable} to a writable folder"
        ) from None
