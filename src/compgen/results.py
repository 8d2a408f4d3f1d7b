"""The results store: one finished run saved under the key of what it computes.

A :class:`Store` is a value: its ``root`` folder (and where checkpoints go). ``Store.default()`` reads
``$COMPGEN_RESULTS`` and ``$COMPGEN_CHECKPOINTS``; nothing else in the library reads them. Its methods take a
``section`` - a :class:`compgen.section.Section`, a config's run of which is stored under
:func:`compgen.programs.key_of` (its programs, inputs, config and libraries, so a pure refactor keeps every run and
any change to what a step computes trains it again), or anything with a ``name`` and its own ``key_of(config)``.

Layout: ``<root>/<section>/<key>.result`` holds the arrays and a ``__meta__`` entry, the run's description (a
:class:`compgen.records.StoredRun`: its section, config, key and provenance: library version, source fingerprint, git
commit, jax version, device, wall time, date), written with :func:`compgen.storage.write_arrays` (an ``.npz`` archive
with a SHA-256 trailer); ``<key>.json`` beside it repeats the description for people and tools (:meth:`Store.entries`
reads it, rebuilding it from the entry where a kill left it behind). Descriptions written before they were a record
kind (version 1, the section named in ``kind``) are read through the kind's migration. A run computed by other code
is never found, only listed as stale.

Runs stored under the hash of their config and source fingerprint (:func:`config_hash`), as before runs were keyed
by their programs, are found where that fingerprint was the last one (:mod:`compgen.legacy`) and the section still
computes what it did then; they are moved under their key, which their description then names beside the old one.

A damaged entry (truncated, garbled, empty, a ``.json`` whose ``.result`` is gone, or an entry whose embedded
section, config or key is not the one its file name stands for) is reported once with its path, moved into
``<root>/<section>/damaged/`` and treated as missing, so the run is computed again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

import compgen
from compgen import legacy, programs, recordfile, storage, timing
from compgen.records import StoredRun

__all__ = ["Store", "config_dict", "config_hash", "provenance"]


def config_dict(config) -> dict:
    """A JSON-ready dict of a (frozen dataclass) config."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def config_hash(config, fingerprint: str) -> str:
    """A short stable hash of the config's full contents (its class name included) and of the code's
    ``fingerprint`` (:mod:`compgen.fingerprint`)."""
    payload = json.dumps({"class": type(config).__name__, "code": fingerprint, **config_dict(config)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _checkout_commit(folder: Path) -> str | None:
    """The commit of the git checkout whose tracked files include this package's source (``folder``), with
    ``+dirty`` if the package's tracked files differ from it; ``None`` if the package is not tracked by a
    repository, e.g. a copy of it placed inside another repository, or a package installed under a virtual
    environment that lives inside one."""

    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, cwd=folder)

    try:
        top = git("rev-parse", "--show-toplevel", "HEAD")
        lines = top.stdout.splitlines()
        if top.returncode != 0 or len(lines) != 2:
            return None
        toplevel, head = Path(lines[0]).resolve(), lines[1]
        if toplevel not in (folder.resolve(), *folder.resolve().parents):
            return None
        if git("ls-files", "--error-unmatch", "__init__.py").returncode != 0:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".").stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _source_commit() -> tuple[str, str]:
    """``(commit, where it was read)`` of the compgen source that runs: from its git checkout (``"checkout"``);
    else, for an installed package, the commit it was built from (``"build"``, written by ``setup.py`` into
    ``compgen/_build_info.py``); else ``("unknown", "unknown")``."""
    commit = _checkout_commit(Path(compgen.__file__).parent)
    if commit:
        return commit, "checkout"
    try:
        from compgen import _build_info  # only in a built (non-editable) package
    except ImportError:
        return "unknown", "unknown"
    commit = getattr(_build_info, "COMMIT", None)
    return (commit, "build") if commit else ("unknown", "unknown")


def _git_commit() -> str:
    """The commit of the compgen source that runs (:func:`_source_commit`), or ``"unknown"``."""
    return _source_commit()[0]


def provenance(wall_time_s: float, fingerprint: str, seconds: dict | None = None, knobs: dict | None = None) -> dict:
    """Where and how a result was computed; ``seconds``: where the wall time went, ``knobs``: the device's choices
    it ran with (:func:`compgen.runner.train`)."""
    device = jax.devices()[0]
    commit, commit_from = _source_commit()
    return {
        "compgen_version": compgen.__version__,
        "code_fingerprint": fingerprint,
        "git_commit": commit,
        "git_commit_from": commit_from,
        "jax_version": jax.__version__,
        "device": f"{device.platform}:{device.device_kind}",
        "matmul_precision": jax.config.jax_default_matmul_precision or "default",  # compgen.precision
        "host": platform.node(),
        "wall_time_s": round(float(wall_time_s), 3),
        "gemm_gflops": round(timing.gemm_gflops(), 1),  # how fast this machine multiplies (compgen.timing)
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **({"seconds": dict(seconds)} if seconds else {}),
        **({"knobs": dict(knobs)} if knobs else {}),
    }


def _move_aside(files, reason: str, log) -> None:
    """Move a damaged entry's files into ``damaged/`` beside them and say so once (on a read-only store, say
    that they stay)."""
    present = [f for f in files if f.exists()]
    if not present:
        return
    folder = present[0].parent / "damaged"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    moved = []
    try:
        folder.mkdir(exist_ok=True)
        for f in present:
            target = folder / f"{f.name}.{stamp}"
            try:
                f.replace(target)
                moved.append(str(target))
            except FileNotFoundError:  # another process moved it first: it reports it
                pass
    except OSError as error:  # a read-only store: the entry stays where it is, and is not used
        log(
            f"[results] damaged entry {present[0].with_suffix('')}: {reason}; it could not be moved aside "
            f"({error.strerror or error}) and is not used"
        )
        return
    if moved:
        log(
            f"[results] damaged entry {present[0].with_suffix('')}: {reason}; moved to {', '.join(moved)}; "
            "it will be computed again"
        )


def _mismatch(meta: StoredRun, section, config, key: str) -> str | None:
    """Why a stored entry's own description does not match what was asked for (the run of ``config`` under
    ``key``), or ``None`` if it does."""
    if meta.section != section.name:
        return f"it holds a run of section {meta.section!r}, not {section.name!r}"
    if meta.config != config_dict(config):
        return "it holds the run of another config (its file name does not match its contents)"
    if meta.key != key:
        return f"it was stored under another key ({meta.key}, its file name says {key})"
    return None


def described(arrays: dict, entry: Path) -> StoredRun:
    """The description an entry's ``arrays`` hold (popped from them), or a :class:`ValueError` saying why not (the
    entry's path left out: the caller names it)."""
    try:
        return StoredRun.of(json.loads(arrays.pop("__meta__").tobytes().decode()), entry)
    except recordfile.RecordError as error:
        raise ValueError(str(error).replace(f"{entry}: ", "")) from None


@dataclass(frozen=True)
class Store:
    """The results store at ``root``, with run checkpoints under ``checkpoints`` (default ``<root>/checkpoints``)."""

    root: Path
    checkpoints: Path | None = None

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))
        object.__setattr__(self, "checkpoints", Path(self.checkpoints or self.root / "checkpoints"))

    @classmethod
    def default(cls) -> Store:
        """``$COMPGEN_RESULTS`` (else :func:`compgen.storage.results_root`'s folder), checkpoints in
        ``$COMPGEN_CHECKPOINTS`` if set."""
        from compgen import params

        return cls(storage.results_root(), params.env_path("COMPGEN_CHECKPOINTS"))

    def paths(self, section, config) -> tuple:
        """``(entry, sidecar)``: the ``.result`` file of ``config`` and its ``.json`` description, named by its key
        (:func:`compgen.programs.key_of`)."""
        stem = programs.key_of(section, config)
        return self.root / section.name / f"{stem}.result", self.root / section.name / f"{stem}.json"

    def legacy_paths(self, section, config) -> tuple | None:
        """``(entry, sidecar)`` where ``config``'s run was stored before runs were keyed by their programs, or
        ``None`` where no run stored then is what the section computes now (:func:`legacy_current`)."""
        fingerprint = legacy_current(section, config)
        if fingerprint is None:
            return None
        stem = config_hash(config, fingerprint)
        return self.root / section.name / f"{stem}.result", self.root / section.name / f"{stem}.json"

    def checkpoint_dir(self, section, config) -> Path:
        """The folder of the checkpoints of ``config``'s run under this code, so the same run started again finds
        it and other code never does."""
        return self._checkpoint_dir(section.name, self.paths(section, config)[0])

    def lanes_checkpoint_dir(self, section, configs) -> Path:
        """The folder of the checkpoints of ``configs`` trained as lanes of one program
        (:func:`compgen.runner.train_lanes`): named after their entries, in order, so the same group started again
        finds it."""
        stems = "+".join(self.paths(section, c)[0].stem for c in configs)
        return self.checkpoints / section.name / f"lanes-{hashlib.sha256(stems.encode()).hexdigest()[:16]}"

    def _checkpoint_dir(self, section_name: str, entry: Path) -> Path:
        return self.checkpoints / section_name / entry.stem

    def remove(self, section_name: str, entry: Path) -> None:
        """Delete a stored run: its ``entry`` (a path from :meth:`entries`), its description and its checkpoints."""
        for path in (entry, entry.with_suffix(".json")):
            path.unlink(missing_ok=True)
        shutil.rmtree(self._checkpoint_dir(section_name, entry), ignore_errors=True)

    def check_root(self) -> None:
        """Refuse a store whose folder is a file or lies below one, before any key is computed (the checkpoint folder
        is checked where training needs it, :meth:`check_writable`)."""
        storage.check_folder_path(self.root, "COMPGEN_RESULTS")

    def check_writable(self, section, checkpoints: bool = False) -> None:
        """Refuse a store (or, with ``checkpoints``, a checkpoint folder) that cannot be written, before training."""
        storage.check_writable(self.root / section.name, "COMPGEN_RESULTS")
        if checkpoints:
            storage.check_writable(self.checkpoints / section.name, "COMPGEN_CHECKPOINTS")

    def save(self, section, config, arrays: dict, wall_time_s: float, seconds=None, knobs=None) -> Path:
        """Store ``arrays`` (a flat dict of name -> array) computed for ``config`` by the section's code."""
        entry, sidecar = self.paths(section, config)
        entry.parent.mkdir(parents=True, exist_ok=True)
        meta = StoredRun(
            section=section.name,
            config=config_dict(config),
            key=entry.stem,
            provenance=provenance(wall_time_s, _source_fingerprint(section, config), seconds, knobs),
        )
        text = meta.text()
        packed = {k: np.asarray(v) for k, v in arrays.items()}
        packed["__meta__"] = np.frombuffer(text.encode(), np.uint8)
        storage.write_arrays(entry, packed, compress=True)
        storage.write_atomic(sidecar, text.encode())
        return entry

    def load(self, section, config, log=print):
        """``(arrays, meta)`` stored for ``config`` under the section's code (``meta``: its
        :class:`compgen.records.StoredRun`), or ``None`` if there is none.

        A damaged entry, or one whose embedded description (section, config, code fingerprint) is not what was
        asked for, is moved aside (see module docstring) and ``None`` is returned.
        """
        entry, sidecar = self.paths(section, config)
        if not entry.exists() and not self._migrate(section, config, entry, log):
            if sidecar.exists():
                _move_aside([sidecar], "its .result file is missing", log)
            return None
        try:
            arrays = storage.read_arrays(entry)
            meta = described(arrays, entry)
        except (storage.CorruptFile, KeyError, UnicodeDecodeError, ValueError) as error:
            _move_aside([entry, sidecar], str(error).replace(f"{entry}: ", ""), log)
            return None
        except FileNotFoundError:  # moved aside by another reader meanwhile
            return None
        wrong = _mismatch(meta, section, config, entry.stem)
        if wrong is not None:
            _move_aside([entry, sidecar], wrong, log)
            return None
        return arrays, meta

    def _migrate(self, section, config, entry: Path, log) -> bool:
        """Move ``config``'s run stored under its legacy name (:meth:`legacy_paths`) to ``entry`` (its key), its
        description naming both; whether there was one to move."""
        old = self.legacy_paths(section, config)
        if old is None or not old[0].is_file():
            return False
        try:
            arrays = storage.read_arrays(old[0])
            meta = described(arrays, old[0])
        except (storage.CorruptFile, KeyError, UnicodeDecodeError, ValueError, OSError) as error:
            _move_aside(list(old), str(error), log)
            return False
        if meta.section != section.name or meta.config != config_dict(config):
            _move_aside(list(old), "it holds the run of another config", log)
            return False
        text = dataclasses.replace(meta, key=entry.stem, legacy_key=old[0].stem).text()
        storage.write_arrays(entry, {**arrays, "__meta__": np.frombuffer(text.encode(), np.uint8)}, compress=True)
        storage.write_atomic(entry.with_suffix(".json"), text.encode())
        for path in old:
            path.unlink(missing_ok=True)
        log(f"[results] {section.name} run {old[0].stem} now stored under its key {entry.stem}")
        return True

    def migrate(self, section, log=print) -> int:
        """Move every run of ``section`` stored under its legacy name that the section still computes to its key
        (:meth:`_migrate`); how many moved."""
        moved = 0
        for entry, meta in self.entries(section.name, log):
            if meta is None or meta.key:
                continue
            try:
                config = section.config_from_dict(meta.config)
                new = self.paths(section, config)[0]
            except (ValueError, TypeError):
                continue
            legacy = self.legacy_paths(section, config)
            if legacy is not None and legacy[0] == entry and not new.exists():
                moved += self._migrate(section, config, new, log)
        return moved

    def provenance(self, section, config) -> dict | None:
        """The provenance stored beside ``config``'s entry (its sidecar: device, commit, seconds, ...), or ``None``
        where there is none or it cannot be read."""
        sidecar = self.paths(section, config)[1]
        try:
            return dict(StoredRun.of(json.loads(storage.read_text(sidecar)), sidecar).provenance)
        except (OSError, ValueError):
            return None

    def entries(self, section_name: str, log=print) -> list:
        """``(entry, meta)`` for every stored run of ``section_name``, sorted by path. ``meta``, its
        :class:`compgen.records.StoredRun`, is read from the ``.json`` beside each entry; where that sidecar is
        missing, unreadable or not the entry's own description (a kill between the two writes), it is rebuilt from
        the description the entry holds (:meth:`embedded`), and ``None`` only where the entry holds none that reads.
        Temporary files that a killed writer left are removed (:func:`compgen.storage.remove_orphans`)."""
        folder = self.root / section_name
        storage.remove_orphans(folder, log)
        found = []
        for entry in sorted(folder.glob("*.result")):
            sidecar = entry.with_suffix(".json")
            try:
                meta = StoredRun.of(json.loads(storage.read_text(sidecar)), sidecar)
            except (OSError, ValueError):
                meta = None
            if meta is None or self.embedded(entry) not in (None, meta):
                meta = self.embedded(entry)
                if meta is not None:
                    with contextlib.suppress(OSError):
                        storage.write_atomic(sidecar, meta.text().encode())
                    log(f"[results] {sidecar.name} rebuilt from the description its entry holds")
            found.append((entry, meta))
        return found

    @staticmethod
    def embedded(entry: Path) -> StoredRun | None:
        """The description an entry holds (its ``__meta__``, read alone from the archive), or ``None`` where it does
        not read."""
        try:
            return described({"__meta__": storage.read_member(entry, "__meta__")}, entry)
        except (OSError, ValueError, KeyError, UnicodeDecodeError, storage.CorruptFile):
            return None


def _source_fingerprint(section, config) -> str | None:
    """The source fingerprint of the code that computes ``config``'s run (provenance only: runs are keyed by what
    they compute), where the section names one."""
    of = getattr(section, "fingerprint_of", None)
    return of(config) if of is not None else None


def legacy_current(section, config) -> str | None:
    """The source fingerprint under which ``config``'s run was stored before runs were keyed by their programs, where
    a run stored then is what the section computes now: the section's last such fingerprint (:mod:`compgen.legacy`)
    where its key is still the one that fingerprint migrates to and the config's learner is the library's."""
    old, key = legacy.LEGACY.get(section.name, (None, None))
    learner_code = getattr(section, "learner_code", None)
    if old is None or not hasattr(section, "run_arrays"):
        return None
    if learner_code is not None and getattr(config, "model", None) is not None and learner_code(config) is not None:
        return None
    return old if programs.section_key(section) == key else None
