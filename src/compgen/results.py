"""The results store: one finished run saved under a hash of its full config and of the code that computed it.

Layout: ``<root>/<kind>/<hash>.result`` holds the arrays and a ``__meta__`` entry (the config and provenance:
library version, code fingerprint, git commit, jax version, device, wall time, date), written with
:func:`compgen.storage.write_arrays` (an ``.npz`` archive with a SHA-256 trailer); ``<hash>.json`` beside it
repeats the metadata for people and tools (it is not read back). The root is :func:`compgen.storage.results_root`.

A damaged entry (truncated, garbled, empty, a ``.json`` whose ``.result`` is gone, or an entry whose embedded
section, config or code fingerprint is not the one its file name stands for) is reported once with its
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


def provenance(wall_time_s: float, code=None, seconds: dict | None = None, knobs: dict | None = None) -> dict:
    """Where and how a result was computed; ``seconds``: where the wall time went, ``knobs``: the device's choices
    it ran with (:func:`compgen.runner.train`)."""
    device = jax.devices()[0]
    commit, commit_from = _source_commit()
    return {
        "compgen_version": compgen.__version__,
        "code_fingerprint": code_fingerprint(code),
        "git_commit": commit,
        "git_commit_from": commit_from,
        "jax_version": jax.__version__,
        "device": f"{device.platform}:{device.device_kind}",
        "matmul_precision": jax.config.jax_default_matmul_precision or "default",  # compgen.precision
        "host": platform.node(),
        "wall_time_s": round(float(wall_time_s), 3),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **({"seconds": dict(seconds)} if seconds else {}),
        **({"knobs": dict(knobs)} if knobs else {}),
    }


def paths(kind: str, config, root: Path | None = None, code=None):
    """``(entry, sidecar)``: the ``.result`` file of ``config`` and its ``.json`` description."""
    folder = Path(root or results_root()) / kind
    stem = config_hash(config, code)
    return folder / f"{stem}.result", folder / f"{stem}.json"


def save(
    kind: str, config, arrays: dict, wall_time_s: float, root: Path | None = None, code=None, seconds=None, knobs=None
) -> Path:
    """Store ``arrays`` (a flat dict of name -> array) for ``config`` computed by the modules ``code``."""
    entry, sidecar = paths(kind, config, root, code)
    entry.parent.mkdir(parents=True, exist_ok=True)
    meta = {"kind": kind, "config": config_dict(config), "provenance": provenance(wall_time_s, code, seconds, knobs)}
    text = json.dumps(meta, indent=2)
    packed = {k: np.asarray(v) for k, v in arrays.items()}
    packed["__meta__"] = np.frombuffer(text.encode(), np.uint8)
    storage.write_arrays(entry, packed, compress=True)
    storage.write_atomic(sidecar, text.encode())
    return entry


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


def _mismatch(meta: dict, kind: str, config, code) -> str | None:
    """Why a stored entry's own description does not match what was asked for, or ``None`` if it does."""
    if meta.get("kind") != kind:
        return f"it holds a run of section {meta.get('kind')!r}, not {kind!r}"
    if meta.get("config") != config_dict(config):
        return "it holds the run of another config (its file name does not match its contents)"
    stored = meta.get("provenance", {}).get("code_fingerprint")
    if stored != code_fingerprint(code):
        return f"it was computed by other code (fingerprint {stored}, this code's {code_fingerprint(code)})"
    return None


def load(kind: str, config, root: Path | None = None, code=None, log=print):
    """``(arrays, meta)`` stored for ``config`` and the modules ``code``, or ``None`` if there is none.

    A damaged entry, or one whose embedded description (section, config, code fingerprint) is not what was asked
    for, is moved aside (see module docstring) and ``None`` is returned.
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
    wrong = _mismatch(meta, kind, config, code)
    if wrong is not None:
        _move_aside([entry, sidecar], wrong, log)
        return None
    return arrays, meta
