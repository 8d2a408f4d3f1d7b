"""Checkpoints of a training run: the full state and the history so far, written atomically.

A checkpoint is one file ``step-<done>.ckpt`` (``done`` written with ten digits): an ``.npz`` archive followed by a
trailer (a magic string, the archive's length and its SHA-256), so a truncated or garbled file is detected on
reading. It is written to a temporary file in the same folder, flushed to disk and renamed over the final name
(``os.replace`` is atomic), so a kill during a write never leaves a half-written checkpoint under a final name.
Only files named exactly so are checkpoints, ordered by their step as a number; any other file (a hand-made
``step-30.ckpt``, a backup) is left alone. After a save the newest ``keep`` checkpoints up to the saved step are
kept and older ones removed; :meth:`Checkpointer.restore` uses the newest that reads back intact.

A checkpointer made with an ``identity`` (what the state is of: a work, its preset, its configs) writes it into
each checkpoint and refuses, in one line, to restore one that names another (:class:`ForeignCheckpoint`), or none.

The state is any pytree of arrays, PRNG keys included (stored as their key data); it is restored
into the structure, dtypes and shardings of a template state (the freshly initialised one).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jax
import numpy as np

from compgen import storage

CorruptCheckpoint = storage.CorruptFile  # a checkpoint that is truncated, garbled or does not match its state
NAME = re.compile(r"step-(\d{10})\.ckpt")  # a checkpoint's file name; the step it holds


class ForeignCheckpoint(ValueError):
    """A checkpoint that names another identity than the checkpointer's (another work, preset or configs): one line."""


def _is_key(leaf) -> bool:
    return hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _flat_dict(tree: dict, prefix: str) -> dict:
    """Nested dicts of arrays -> ``{prefix + "a/b": array}``."""
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flat_dict(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = np.asarray(v)
    return out


def _nested_dict(flat: dict, prefix: str) -> dict:
    """The inverse of :func:`_flat_dict` for the entries starting with ``prefix``."""
    out = {}
    for name, value in flat.items():
        if name.startswith(prefix):
            *parents, leaf = name[len(prefix) :].split("/")
            node = out
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
    return out


class Checkpointer:
    """Saves and restores one run's checkpoints in ``directory`` (see module docstring).

    ``every``: save after every ``every`` calls of ``eval_every`` steps (read by :func:`compgen.runner.run_steps`);
    ``keep``: the newest checkpoints kept; ``compress``: deflate the archive (a checkpoint to commit).
    ``progress`` as saved: ``done`` (steps), ``steps`` (list of per-call metric dicts), ``evals``
    (list of evaluation dicts), ``eval_steps`` (list of ints).
    """

    def __init__(self, directory, every: int = 1, keep: int = 2, log=print, compress: bool = False, identity=None):
        if int(every) < 1 or int(keep) < 1:
            raise ValueError(f"every and keep must be positive integers, got every={every!r}, keep={keep!r}")
        self.directory, self.every, self.keep, self.log = Path(directory), int(every), int(keep), log
        self.compress = bool(compress)
        self.identity = None if identity is None else json.loads(json.dumps(identity, sort_keys=True))

    def paths(self) -> list:
        """The checkpoint files (named as :data:`NAME`), newest step first."""
        found = [(int(m.group(1)), p) for p in self.directory.glob("step-*.ckpt") if (m := NAME.fullmatch(p.name))]
        return [p for _, p in sorted(found, reverse=True)]

    @staticmethod
    def step_of(path) -> int:
        """The step the checkpoint file ``path`` holds, by its name."""
        return int(NAME.fullmatch(Path(path).name).group(1))

    def save(self, state, progress: dict, extra=None) -> Path:
        """Write ``state`` and ``progress`` (and ``extra``, any JSON-ready value, returned by :meth:`restore` as
        ``progress["extra"]``) as the checkpoint of ``progress["done"]``; then remove the checkpoints of earlier
        steps beyond the newest ``keep``."""
        leaves = jax.tree.leaves(state)
        arrays = {f"state/{i}": np.asarray(jax.random.key_data(x) if _is_key(x) else x) for i, x in enumerate(leaves)}
        steps = jax.tree.map(lambda *xs: np.concatenate(xs, axis=0), *progress["steps"]) if progress["steps"] else {}
        evals = jax.tree.map(lambda *xs: np.stack(xs, axis=0), *progress["evals"]) if progress["evals"] else {}
        arrays.update(_flat_dict(steps, "steps/"))
        arrays.update(_flat_dict(evals, "evals/"))
        arrays["done"] = np.asarray(progress["done"])
        arrays["n_evals"] = np.asarray(len(progress["evals"]))
        arrays["eval_steps"] = np.asarray(progress["eval_steps"], dtype=np.int64)
        if self.identity is not None:
            arrays["identity"] = np.asarray(json.dumps(self.identity, sort_keys=True))
        if extra is not None:
            arrays["extra"] = np.asarray(json.dumps(extra, sort_keys=True))
        self.directory.mkdir(parents=True, exist_ok=True)
        done = int(progress["done"])
        path = self.directory / f"step-{done:010d}.ckpt"
        storage.write_arrays(path, arrays, compress=self.compress)
        for old in [p for p in self.paths() if self.step_of(p) <= done][self.keep :]:
            old.unlink(missing_ok=True)
        self.log(f"[checkpoint] saved step {int(progress['done'])} to {path}")
        return path

    def restore(self, template):
        """``(state, progress)`` from the newest intact checkpoint, or ``None`` if there is none.

        ``template`` is a state of the right structure (its leaves give dtypes, key types and
        shardings). A corrupt checkpoint is reported through ``log`` and the previous one is tried; one of
        another identity is a :class:`ForeignCheckpoint`.
        """
        for path in self.paths():
            try:
                return self._read(path, template)
            except ForeignCheckpoint:
                raise
            except (CorruptCheckpoint, OSError, ValueError, KeyError) as error:
                self.log(f"[checkpoint] ignoring {path.name}: {error}")
        return None

    def _check_identity(self, path, arrays) -> None:
        if self.identity is None:
            return
        found = json.loads(str(arrays["identity"])) if "identity" in arrays else None
        if found != self.identity:
            what = "names no identity" if found is None else f"is the state of {_short(found)}"
            raise ForeignCheckpoint(f"{path}: {what}, not of {_short(self.identity)}; it is not restored")

    def _read(self, path, template):
        arrays = storage.read_arrays(path)
        self._check_identity(path, arrays)
        leaves, treedef = jax.tree.flatten(template)
        restored = []
        for i, t in enumerate(leaves):
            value = arrays[f"state/{i}"]
            expected = jax.eval_shape(jax.random.key_data, t) if _is_key(t) else t
            if value.shape != np.shape(expected) or value.dtype != np.dtype(expected.dtype):
                raise CorruptCheckpoint(
                    f"{path}: leaf {i} is {value.dtype}{value.shape}, expected "
                    f"{np.dtype(expected.dtype)}{np.shape(expected)}"
                )
            if _is_key(t):
                value = jax.random.wrap_key_data(value, impl=jax.random.key_impl(t))
            restored.append(jax.device_put(value, t.sharding) if isinstance(t, jax.Array) else value)
        if f"state/{len(leaves)}" in arrays:
            raise CorruptCheckpoint(f"{path}: more state leaves than the template has")
        steps, evals = _nested_dict(arrays, "steps/"), _nested_dict(arrays, "evals/")
        n_evals = int(arrays["n_evals"])
        progress = {
            "done": int(arrays["done"]),
            "steps": [steps] if steps else [],
            "evals": [jax.tree.map(lambda a, i=i: a[i], evals) for i in range(n_evals)],
            "eval_steps": [int(s) for s in arrays["eval_steps"]],
        }
        if "extra" in arrays:
            progress["extra"] = json.loads(str(arrays["extra"]))
        if progress["done"] != self.step_of(path):
            raise CorruptCheckpoint(f"{path}: holds step {progress['done']}, not the step its name says")
        self.log(f"[checkpoint] restored step {progress['done']} from {path}")
        return jax.tree.unflatten(treedef, restored), progress


def _short(identity: dict) -> str:
    """An identity as one short phrase: ``work fig2c at paper (configs 1a2b3c4d)``."""
    if not isinstance(identity, dict):
        return repr(identity)[:60]
    parts = [f"{k} {str(v)[:16]}" for k, v in sorted(identity.items())]
    return ", ".join(parts)
