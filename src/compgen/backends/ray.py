"""The ``"ray"`` backend of :func:`compgen.dispatch.train_or_load`: one Ray task per config.

Each task trains its config into a private store (:func:`compgen.runner.train_and_store`) and returns the files of
its entry, which the driver checks and writes into its own store (:func:`store_returned`), so the nodes need no
shared file system. Ray is an optional dependency (``pip install 'compgen[cluster]'``), imported only when this
backend runs.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tempfile
from pathlib import Path

from compgen import catalog, params, results, runner, storage


def _train_remote(section_name: str, config: dict, checkpoint_every, checkpoints: str) -> dict:
    """A Ray task: train one config into a private store; returns its files (path in the store -> bytes)."""
    section = catalog.get(section_name)
    with tempfile.TemporaryDirectory() as root:
        store = results.Store(root, checkpoints)
        runner.train_and_store(section, [section.config_from_dict(config)], store, print, checkpoint_every)
        return {str(p.relative_to(root)): p.read_bytes() for p in Path(root).rglob("*") if p.is_file()}


def store_returned(section, config, files: dict, store, log=print) -> None:
    """Write the files a remote worker returned for ``config`` into ``store``: only the entry of that config
    (``<section>/<hash>.result`` and ``.json``; any other name, a path with separators or ``..`` included, is
    refused), each written atomically, and never over a valid entry already there."""
    entry, sidecar = store.paths(section, config)
    expected = {f"{section.name}/{entry.name}": entry, f"{section.name}/{sidecar.name}": sidecar}
    unexpected = sorted(set(files) - set(expected))
    if unexpected or not isinstance(files.get(f"{section.name}/{entry.name}"), bytes):
        raise RuntimeError(
            f"the worker returned {sorted(files)[:4]} instead of the entry {sorted(expected)} of its config: refused"
        )
    if store.load(section, config, log=log) is not None:
        log(f"[train] {entry} is already stored: kept")
        return
    entry.parent.mkdir(parents=True, exist_ok=True)
    for name in sorted(files, key=lambda n: n.endswith(".json")):  # the .result first: a .json alone is damage
        if not isinstance(files[name], bytes):
            raise RuntimeError(f"the worker returned {name} as {type(files[name]).__name__}, not bytes: refused")
        storage.write_atomic(expected[name], files[name])


def check_resource(name: str, value) -> float:
    """``value`` as the number of GPUs or CPUs a Ray task asks for (the option ``name``, e.g. ``--ray-gpus``): a finite
    number >= 0, a fraction only below 1 (Ray's rule: 0.5 shares a device, 1.5 is refused); else a
    :class:`compgen.params.ParameterError` naming ``name`` and what is allowed, before Ray starts."""
    ok = params._is_number(value) and math.isfinite(float(value)) and float(value) >= 0
    if not ok or (float(value) > 1 and not float(value).is_integer()):
        raise params.ParameterError(
            f"{name} must be a finite number >= 0 per Ray task: a fraction below 1 (such as 0.5) or a whole number, "
            f"got {params._short(value)}"
        )
    return float(value)


RAY_ADDRESS = r"auto|local|ray://\S+|(?:\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):[0-9]{1,5}"  # what ray.init takes


def check_address(name: str, address) -> str | None:
    """``address`` as a Ray cluster's address (the option ``name``): ``None`` (``$RAY_ADDRESS``, else a local
    cluster), ``auto``, ``local``, ``host:port`` or ``ray://host:port``; else a :class:`compgen.params.ParameterError`
    before Ray starts."""
    if address is None:
        return None
    if not isinstance(address, str) or not re.fullmatch(RAY_ADDRESS, address):
        raise params.ParameterError(
            f"{name} must be auto, local, host:port or ray://host:port (a Ray cluster's address), got "
            f"{params._short(address)}"
        )
    return address


def train_on_ray(section, todo, store, every, log, address=None, num_gpus=0, num_cpus=1):
    """Train the configs ``todo`` as Ray tasks on the cluster at ``address`` (default: ``$RAY_ADDRESS`` or a local
    one, unless Ray is running already), each with ``num_gpus`` and ``num_cpus`` (:func:`check_resource`, checked
    before Ray starts), checkpointing every ``every`` evaluations, and store what they return in ``store``:
    ``[(config, error)]`` for the configs that failed."""
    num_gpus, num_cpus = check_resource("num_gpus", num_gpus), check_resource("num_cpus", num_cpus)
    address = check_address("address", address)
    try:
        import ray
    except ImportError:
        raise RuntimeError("the ray backend needs Ray: pip install 'compgen[cluster]' (or pip install ray)") from None
    if not ray.is_initialized():
        try:
            ray.init(address=address)
        except (ConnectionError, ValueError, RuntimeError) as error:
            lines = str(error).strip().splitlines() or [type(error).__name__]
            raise RuntimeError(
                f"Ray could not start or reach the cluster at {address or 'its default address'}: {lines[0]}"
            ) from None
    task = ray.remote(_train_remote).options(num_gpus=num_gpus, num_cpus=num_cpus)
    checkpoints = str(store.checkpoints)
    pending = {task.remote(section.name, dataclasses.asdict(c), every, checkpoints): c for c in todo}
    failed = []
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        config = pending.pop(ref)
        try:
            store_returned(section, config, ray.get(ref), store, log)
            if store.load(section, config, log=log) is None:
                raise RuntimeError(
                    "the worker stored the run under another config hash: is its compgen the same version as the "
                    "driver's?"
                )
        except Exception as error:  # noqa: BLE001
            lines = str(error).strip().splitlines() or [type(error).__name__]
            failed.append((config, RuntimeError(lines[-1])))  # a Ray task error ends with the original exception
            continue
        log(f"[train] stored {section.label(config)} ({len(todo) - len(pending)}/{len(todo)} done)")
    return failed
