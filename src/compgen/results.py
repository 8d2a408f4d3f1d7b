"""The results store: one finished run saved under a hash of its full config and of the code that computed it.

Layout: ``<root>/<kind>/<hash>.result`` holds the arrays and a ``__meta__`` entry (the config and provenance:
library version, code fingerprint, git commit, jax version, device, wall time, date), written with
:func:`compgen.storage.write_arrays` (an ``.npz`` archive with a SHA-256 trailer); ``<hash>.json`` beside it
repeats the metadata for people and tools (it is not read back). The root is :func:`compgen.storage.results_root`.

A damaged entry (truncated, garbled, empty, or a ``.json`` whose ``.result`` is gone) is reported once with its
path, moved into ``<root>/<kind>/damaged/`` and treated as missing, so the run is computed again.

The hash covers the config and :func:`code_fingerprint` of the modules the numbers depend on. The fingerprint
reads each module's syntax tree without its docstrings and without its top-level ``PRESETS`` assignment, so
prose, comments and preset tables can change without invalidating stored runs, while any change to code does.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import hashlib
import json
import platform
import subprocess
import time
from pathlib import Path

import jax
import numpy as np

import compgen
from compgen import storage
from compgen.storage import results_root

__all__ = ["results_root", "config_dict", "code_fingerprint", "config_hash", "provenance", "save", "load", "paths"]

UNFINGERPRINTED = ("PRESETS",)  # top-level names whose assignment is data, not code (see module docstring)


def config_dict(config) -> dict:
    """A JSON-ready dict of a (frozen dataclass) config."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def _strip(tree: ast.Module) -> ast.Module:
    """The syntax tree without docstrings and without top-level assignments to :data:`UNFINGERPRINTED` names."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    tree.body = [
        node
        for node in tree.body
        if not (
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(
                isinstance(t, ast.Name) and t.id in UNFINGERPRINTED
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        )
    ]
    return tree


def code_fingerprint(modules=None) -> str:
    """A hash of the code of ``modules`` (default: every module of the library), as syntax trees without
    docstrings, comments or ``PRESETS`` tables (see module docstring)."""
    package = Path(compgen.__file__).parent
    paths = sorted(package.rglob("*.py")) if modules is None else sorted({Path(m.__file__) for m in modules})
    digest = hashlib.sha256()
    for path in paths:
        digest.update((str(path.relative_to(package)) if path.is_relative_to(package) else path.name).encode())
        digest.update(ast.dump(_strip(ast.parse(path.read_text())), include_attributes=False).encode())
    return digest.hexdigest()[:12]


def config_hash(config, code=None) -> str:
    """A short stable hash of the config's full contents (its class name included) and of the code."""
    payload = json.dumps(
        {"class": type(config).__name__, "code": code_fingerprint(code), **config_dict(config)}, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _git_commit() -> str:
    folder = Path(compgen.__file__).parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=folder)
        if out.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=folder,
        ).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(wall_time_s: float, code=None, seconds: dict | None = None) -> dict:
    """Where and how a result was computed; ``seconds``: where the wall time went (:func:`compgen.runner.train`)."""
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
        **({"seconds": dict(seconds)} if seconds else {}),
    }


def paths(kind: str, config, root: Path | None = None, code=None):
    """``(entry, sidecar)``: the ``.result`` file of ``config`` and its ``.json`` description."""
    folder = Path(root or results_root()) / kind
    stem = config_hash(config, code)
    return folder / f"{stem}.result", folder / f"{stem}.json"


def save(
    kind: str, config, arrays: dict, wall_time_s: float, root: Path | None = None, code=None, seconds=None
) -> Path:
    """Store ``arrays`` (a flat dict of name -> array) for ``config`` computed by the modules ``code``."""
    entry, sidecar = paths(kind, config, root, code)
    entry.parent.mkdir(parents=True, exist_ok=True)
    meta = {"kind": kind, "config": config_dict(config), "provenance": provenance(wall_time_s, code, seconds)}
    text = json.dumps(meta, indent=2)
    packed = {k: np.asarray(v) for k, v in arrays.items()}
    packed["__meta__"] = np.frombuffer(text.encode(), np.uint8)
    storage.write_arrays(entry, packed, compress=True)
    storage.write_atomic(sidecar, text.encode())
    return entry


def _move_aside(files, reason: str, log) -> None:
    """Move a damaged entry's files into ``damaged/`` beside them and say so once."""
    present = [f for f in files if f.exists()]
    if not present:
        return
    folder = present[0].parent / "damaged"
    folder.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    moved = []
    for f in present:
        target = folder / f"{f.name}.{stamp}"
        try:
            f.replace(target)
            moved.append(str(target))
        except FileNotFoundError:  # another process moved it first: it reports it
            pass
    if moved:
        log(
            f"[results] damaged entry {present[0].with_suffix('')}: {reason}; moved to {', '.join(moved)}; "
            "it will be computed again"
        )


def load(kind: str, config, root: Path | None = None, code=None, log=print):
    """``(arrays, meta)`` stored for ``config`` and the modules ``code``, or ``None`` if there is none.

    A damaged entry is moved aside (see module docstring) and ``None`` is returned.
    """
    entry, sidecar = paths(kind, config, root, code)
    if not entry.exists():
        if sidecar.exists():
            _move_aside([sidecar], "its .result file is missing", log)
        return None
    try:
        arrays = storage.read_arrays(entry)
        meta = json.loads(arrays.pop("__meta__").tobytes().decode())
    except (storage.CorruptFile, KeyError, UnicodeDecodeError, json.JSONDecodeError) as error:
        _move_aside([entry, sidecar], str(error).replace(f"{entry}: ", ""), log)
        return None
    except FileNotFoundError:  # moved aside by another reader meanwhile
        return None
    return arrays, meta
