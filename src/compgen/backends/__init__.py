"""Where :func:`compgen.dispatch.train_or_load` trains what is not stored: a backend is a value.

* :class:`Local`: this process, one config (or group of lanes) after another (:func:`compgen.runner.train_and_store`);
* :class:`Workers`: worker processes on this machine, by default one per CPU core (:mod:`compgen.backends.workers`);
* :class:`Devices`: one thread per local device (:func:`compgen.devices.train_on_devices`);
* :class:`Ray`: one Ray task per config on a Ray cluster (:mod:`compgen.backends.ray`).

Every backend also says how often a run saves a checkpoint (``checkpoint_every`` evaluations; ``None``: the
environment's ``COMPGEN_CHECKPOINT_EVERY``, else off). How a run is executed never changes its numbers: every config
is trained by its own program (:mod:`compgen.runner`). A bad value is a one-line
:class:`compgen.params.ParameterError` when the backend is made.
"""

# Nothing of the backends' modules is imported here at the top: ``python -m compgen.backends.workers`` runs that
# module as ``__main__`` after importing this package, and an import of it here would load it a second time.

from __future__ import annotations

import dataclasses

from compgen import params


@dataclasses.dataclass(frozen=True, kw_only=True)
class Backend:
    """What every backend holds: evaluations between checkpoints (``None``: ``$COMPGEN_CHECKPOINT_EVERY``, else 0)."""

    checkpoint_every: int | None = None

    def __post_init__(self):
        if self.checkpoint_every is not None:
            params.check_int("checkpoint_every", self.checkpoint_every, ge=0)


@dataclasses.dataclass(frozen=True)
class Local(Backend):
    """Train in this process."""


@dataclasses.dataclass(frozen=True)
class Workers(Backend):
    """Train in ``n`` worker processes at once (``None``: one per CPU core, 1 on an accelerator); a config that
    :func:`compgen.devices.shard_count` shards trains first, alone, its tasks over that many host devices."""

    n: int | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.n is not None:
            params.check_int("workers", self.n, ge=1)


@dataclasses.dataclass(frozen=True)
class Devices(Backend):
    """Train one config per local device at a time, a thread per device."""


@dataclasses.dataclass(frozen=True)
class Ray(Backend):
    """Train one Ray task per config on the cluster at ``address`` (``None``: ``$RAY_ADDRESS`` or a local one), each
    with ``gpus`` and ``cpus``, into a private store whose files it returns."""

    address: str | None = None
    gpus: float = 0
    cpus: float = 1

    def __post_init__(self):
        super().__post_init__()
        from compgen.backends import ray

        ray.check_address("address", self.address)
        ray.check_resource("gpus", self.gpus)
        ray.check_resource("cpus", self.cpus)


NAMES = {"local": Local, "workers": Workers, "devices": Devices, "ray": Ray}


def named(name: str, checkpoint_every=None, workers=None, ray_address=None, ray_gpus=0, ray_cpus=1) -> Backend:
    """The backend a command line names (``--backend``) with its options."""
    if name not in NAMES:
        raise params.ParameterError(f"--backend must be one of {tuple(NAMES)}, got {params._short(name)}")
    if name == "workers":
        return Workers(workers, checkpoint_every=checkpoint_every)
    if name == "ray":
        return Ray(ray_address, ray_gpus, ray_cpus, checkpoint_every=checkpoint_every)
    return NAMES[name](checkpoint_every=checkpoint_every)
