"""What a run computes, as a key: its programs, its inputs and its config, not the source text that wrote them.

A run of a section's config is fully determined by

* the **programs** it runs: the section's ``init``, one outer step and ``evaluate``, vmapped over the run's seeds, at
  the config's shapes (:func:`program_text`). They are lowered to StableHLO for a CPU, without source locations, at
  JAX's default matmul precision, with the device's knobs at one canonical choice (:data:`CANONICAL`: no remat, no
  fused kernel, every task of the meta-batch at once, no sharding), so a key is the same on any machine that runs
  the same JAX. The names of the functions inside a program are replaced by their order of appearance, so renaming
  a helper changes nothing; a constant, an operation or a shape that changes changes the key;
* its **inputs**: the per-run arrays the section builds on the host (splits, masks, evaluation tasks, seeds' keys;
  :func:`inputs_digest`), which hold what no program shows (a split drawn in numpy);
* its **config**, every field but the device's knobs (the number of outer steps and evaluations shape the history);
* the versions of JAX and of the libraries the programs are built with (:data:`LIBRARIES`).

:func:`run_key` hashes the four. Lowering costs seconds per program shape, so :class:`KeyCache` keeps each key
under the source fingerprint of the section's code (:mod:`compgen.fingerprint`) and the libraries' versions: while
neither changes, a key is read back, and after a refactor it is computed again, and comes out the same.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import re
from pathlib import Path

import jax
import numpy as np

from compgen import storage

# The device's knobs (compgen.devices.KNOBS) at the choice a key lowers: the science's program, whichever device runs.
CANONICAL = {"remat": False, "fused_inner": False, "xla_opt_level": None}
KNOBS = ("xla_opt_level", "remat", "train_chunk", "fused_inner")
LIBRARIES = ("jax", "jaxlib", "flax", "optax", "numpy")
KEY_DIGITS = 16


def versions() -> dict:
    """The versions of :data:`LIBRARIES` installed here (``None`` for one that is not)."""

    def version(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {name: version(name) for name in LIBRARIES}


def canonical(cfg):
    """``cfg`` with the device's knobs at :data:`CANONICAL` (``train_chunk``: the whole meta-batch at once)."""
    fields = {f.name for f in dataclasses.fields(cfg)}
    values = {k: v for k, v in CANONICAL.items() if k in fields}
    if "train_chunk" in fields:
        values["train_chunk"] = cfg.meta_batch
    copy = object.__new__(type(cfg))
    for f in dataclasses.fields(cfg):
        object.__setattr__(copy, f.name, values.get(f.name, getattr(cfg, f.name)))
    return copy


def config_fields(cfg) -> dict:
    """``cfg``'s fields as JSON-ready data, the device's knobs left out."""
    plain = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    return {k: v for k, v in plain.items() if k not in KNOBS}


_SYMBOL = re.compile(r"@([A-Za-z_][\w$.]*)")


def normalise(text: str) -> str:
    """StableHLO ``text`` with its module's name dropped and every symbol (``@name``) renamed by its order of first
    appearance, so that a function's name does not enter a key."""
    text = re.sub(r"^module @\S+", "module", text, count=1)
    names: dict = {}
    return _SYMBOL.sub(lambda m: "@f" + str(names.setdefault(m.group(1), len(names))), text)


def _abstract(tree):
    """``tree``'s arrays as :class:`jax.ShapeDtypeStruct` (PRNG keys keep their key type)."""
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype), tree)


def program_text(section, cfg, runs=None) -> str:
    """The normalised StableHLO (:func:`normalise`) of ``cfg``'s ``init``, one outer step and ``evaluate`` over its
    seeds, lowered for a CPU at :func:`canonical` knobs; ``runs``: its per-run arrays if already built."""
    runs = section.run_arrays([cfg]) if runs is None else runs
    prog = section._build_program(canonical(cfg), None)
    shapes = _abstract(runs)
    parts = []
    with jax.default_matmul_precision(None):
        state = jax.eval_shape(prog.init, shapes)
        lowered = {
            "init": prog.init.trace(shapes),
            "step": prog.steps.trace(shapes, state, 1),
            "evaluate": prog.evaluate.trace(shapes, state),
        }
        for name, traced in lowered.items():
            text = traced.lower(lowering_platforms=("cpu",)).as_text(debug_info=False)
            parts.append(f"{name}\n{normalise(text)}")
    return "\n".join(parts)


def inputs_digest(runs) -> str:
    """A hash of the per-run arrays ``runs`` (each leaf's path, dtype, shape and bytes; PRNG keys as their data)."""
    digest = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(runs)[0]:
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", None), jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        a = np.ascontiguousarray(np.asarray(leaf))
        digest.update(f"{jax.tree_util.keystr(path)}|{a.dtype.str}|{a.shape}|".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def program_key(section, cfg, runs=None) -> str:
    """A hash of :func:`program_text`, computed once per process for each program shape
    (:meth:`compgen.section.Section.shape_key`)."""
    key = (section.name, section.shape_key(canonical(cfg)), _learner_code(section, cfg))
    if key not in _PROGRAMS:
        _PROGRAMS[key] = hashlib.sha256(program_text(section, cfg, runs).encode()).hexdigest()
    return _PROGRAMS[key]


_PROGRAMS: dict = {}


def _learner_code(section, cfg):
    """What distinguishes a user's learner of the same name across edits within a process (None for the library's)."""
    return section.learner_code(cfg) if section.learner_code and getattr(cfg, "model", None) is not None else None


def run_key(section, cfg) -> str:
    """The key of ``cfg``'s run (see module docstring): :data:`KEY_DIGITS` hex digits; a config one of whose sizes
    JAX cannot index is a one-line :class:`compgen.params.ParameterError` (:func:`compgen.memory.too_large`)."""
    try:
        return _run_key(section, cfg)
    except OverflowError as error:
        from compgen import memory

        raise memory.too_large(section, cfg, error) from None


def _run_key(section, cfg) -> str:
    runs = section.run_arrays([cfg])
    payload = {
        "section": section.name,
        "class": type(cfg).__name__,
        "program": program_key(section, cfg, runs),
        "inputs": inputs_digest(runs),
        "config": config_fields(cfg),
        "versions": versions(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:KEY_DIGITS]


class KeyCache:
    """Run keys kept in a JSON file under what the key was computed from but cheaper to compare: the section, the
    source fingerprint of its code (:meth:`compgen.section.Section.fingerprint_of`), the libraries' versions and the
    config. A key not kept is computed (:func:`run_key`) and kept; ``path`` ``None`` keeps them in memory only."""

    def __init__(self, path=None):
        self.path = None if path is None else Path(path)
        self._keys = None

    def _load(self) -> dict:
        if self._keys is None:
            self._keys = {}
            if self.path is not None and self.path.is_file():
                try:
                    found = json.loads(storage.read_text(self.path))
                    self._keys = found if isinstance(found, dict) else {}
                except (ValueError, OSError, storage.CorruptFile):
                    self._keys = {}  # a cache: damaged, it is computed again
        return self._keys

    @staticmethod
    def cache_key(section, cfg) -> str:
        payload = [section.name, section.fingerprint_of(cfg), versions(), type(cfg).__name__, config_fields(cfg)]
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def key(self, section, cfg) -> str:
        """``cfg``'s :func:`run_key`, read back where it was kept."""
        keys, where = self._load(), self.cache_key(section, cfg)
        if where not in keys:
            keys[where] = run_key(section, cfg)
            self._save()
        return keys[where]

    def _save(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            storage.write_atomic(self.path, json.dumps(self._keys, sort_keys=True).encode())
        except OSError:
            pass  # a read-only store: the keys are computed again next time


def default_cache() -> KeyCache:
    """The key cache of this machine: ``$COMPGEN_KEY_CACHE``, else ``.keys.json`` in the results store's folder
    (:func:`compgen.storage.results_root`), shared by every process that uses the store."""
    from compgen import params

    return KeyCache(params.env_path("COMPGEN_KEY_CACHE") or storage.results_root() / ".keys.json")


def key_of(section, cfg) -> str:
    """The key ``cfg``'s run is stored under: :func:`run_key`, read through this machine's key cache
    (:func:`default_cache`); a section that keys its runs itself (``section.key_of``, as a test's stand-in does)
    gives its own."""
    own = getattr(section, "key_of", None)
    return own(cfg) if own is not None else default_cache().key(section, cfg)


def section_key(sec, preset: str = "quick") -> str:
    """What a section computes at ``preset``, as one key: the run keys (:func:`key_of`) of every config of every figure
    there (the book's seeds), joined. The records of a chapter (seed sets, twin runs, searches) carry it: it changes
    exactly when one of its programs, inputs or configs does."""
    return join_keys(key_of(sec, c) for f in sec.figures(preset) for c in sec.configs(f, preset))


def join_keys(keys) -> str:
    """One key for several: a hash of the distinct ``keys``, in no particular order (a config two figures share
    counts once)."""
    return hashlib.sha256("".join(sorted(set(keys))).encode()).hexdigest()[:KEY_DIGITS]
