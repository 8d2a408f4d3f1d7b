"""A results store: one experiment run saved under a hash of its full config, with provenance.

Layout: ``<root>/<kind>/<hash>.npz`` (the arrays) and ``<root>/<kind>/<hash>.json`` (the config
and provenance: library version, git commit, jax version, device, wall time, date). The hash
covers the config and a fingerprint of the source of the modules the experiment's numbers depend
on (:func:`code_fingerprint`). The root is
``$COMPGEN_RESULTS`` if set, else ``results/`` at the top of the repository (found by walking up
from the working directory to ``pyproject.toml``), else ``~/.cache/compgen/results``.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import io
import json
import os
import platform
import subprocess
from pathlib import Path

import jax
import numpy as np

import compgen


def results_root() -> Path:
    """The directory results are stored under (see module docstring)."""
    if os.environ.get("COMPGEN_RESULTS"):
        return Path(os.environ["COMPGEN_RESULTS"])
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "pyproject.toml").exists() and (folder / "src" / "compgen").is_dir():
            return folder / "results"
    return Path.home() / ".cache" / "compgen" / "results"


def config_dict(config) -> dict:
    """A JSON-ready dict of a (frozen dataclass) config."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def code_fingerprint(modules=None) -> str:
    """A hash of the source of ``modules`` (default: every module of the library).

    An experiment passes the modules its numbers depend on, so a result computed by other code is
    never reused, while edits elsewhere in the library (plots, other sections) keep it valid.
    """
    package = Path(compgen.__file__).parent
    paths = sorted(package.rglob("*.py")) if modules is None else sorted(Path(m.__file__) for m in modules)
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def config_hash(config, code=None) -> str:
    """A short stable hash of the config's full contents (its class name included) and of the code."""
    payload = json.dumps({"class": type(config).__name__, "code": code_fingerprint(code), **config_dict(config)},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(compgen.__file__).parent)
        if out.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5, cwd=Path(compgen.__file__).parent).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(wall_time_s: float, code=None) -> dict:
    """Where and how a result was computed."""
    device = jax.devices()[0]
    return {
        "compgen_version": compgen.__version__,
        "code_fingerprint": code_fingerprint(code),
        "git_commit": _git_commit(),
        "jax_version": jax.__version__,
        "device": f"{device.platform}:{device.device_kind}",
        "host": platform.node(),
        "wall_time_s": round(float(wall_time_s), 3),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _paths(kind: str, config, root: Path | None, code):
    folder = (root or results_root()) / kind
    stem = config_hash(config, code)
    return folder / f"{stem}.npz", folder / f"{stem}.json"


def save(kind: str, config, arrays: dict, wall_time_s: float, root: Path | None = None, code=None) -> Path:
    """Store ``arrays`` (a flat dict of name -> array) for ``config`` computed by the modules ``code``.

    Each file is written under a temporary name and then renamed, so a process reading the store while
    another writes it (notebooks executed in parallel) never sees a partial file.
    """
    npz_path, json_path = _paths(kind, config, root, code)
    npz_path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    write_atomic(npz_path, buffer.getvalue())
    meta = {"kind": kind, "config": config_dict(config), "provenance": provenance(wall_time_s, code)}
    write_atomic(json_path, json.dumps(meta, indent=2).encode())
    return npz_path


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, flush it to disk and rename it over ``path``
    (``os.replace`` is atomic): a reader or a kill mid-write never leaves a half-written ``path``."""
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


def load(kind: str, config, root: Path | None = None, code=None):
    """``(arrays, meta)`` stored for ``config`` and the modules ``code``, or ``None`` if there is none."""
    npz_path, json_path = _paths(kind, config, root, code)
    if not (npz_path.exists() and json_path.exists()):
        return None
    with np.load(npz_path) as data:
        arrays = {k: data[k] for k in data.files}
    return arrays, json.loads(json_path.read_text())
