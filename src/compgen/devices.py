"""Use the local devices: several configs at once, one per device, or one run's tasks sharded over them.

* :func:`train_on_devices` trains a list of configs with one thread per local device; each config runs its
  own program on one device, the same program :func:`compgen.runner.train` runs anywhere, so the numbers are
  those of any other backend (the ``devices`` sweep backend).
* Inside :func:`shard_tasks` every run's meta-batch is sharded over the devices instead
  (:func:`compgen.meta.mean_over_tasks`): each device adapts its share of the tasks and the meta-gradients
  are averaged. This helps one large run, e.g. the paper's configuration on a multi-core CPU, where XLA
  otherwise runs most of a step's small per-task products on one core. The numbers equal one device's up to
  float32 round-off (the mean over tasks is summed in another order).
* :func:`shard_count` decides, from a config alone, whether :func:`compgen.dispatch.train_or_load` shards its tasks by
  default: on a CPU with several cores, a config of at least :data:`SHARD_MIN_FLOP` per seed and step (the paper's
  sizes, none of the quick ones) trains alone in a worker process with one host device per core. Because the rule
  reads only the config and the machine, a run's numbers do not depend on what else is trained beside it.
* :func:`train_chunk` decides how many tasks each device adapts at once: on a CPU, 8 of a large meta-batch
  (the chunk's inner loops then stay in the caches), elsewhere all of them, unless the config says.
* :func:`resolve` fills the device knobs a config leaves to the device (``None``): ``xla_opt_level``, ``remat`` and
  ``train_chunk`` (and the teacher-student's ``fused_inner``). Presets hold the science and never set them; a user
  may still force one (``--set remat=True``).
  :func:`lighter` lists what to try, in order, when a config's programs do not fit an accelerator's memory, and
  :func:`huge_pages` picks the allocator of the process that trains it.

On a CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (set before jax is imported;
:func:`host_devices_flag`) makes N host devices, which is also how the tests check this without
accelerators.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import os
import re
import subprocess
import sys
import threading

import jax
import numpy as np
from jax.sharding import Mesh

from compgen import params

_TASK_MESH = contextvars.ContextVar("compgen_task_mesh", default=None)


def task_mesh():
    """The mesh set by the enclosing :func:`shard_tasks`, or ``None``."""
    return _TASK_MESH.get()


# FLOP per seed and outer step (the section's analytic cost) from which a run trains alone with its tasks sharded. The
# quick presets stay below 1.5e9 and the paper's configurations start at 4.9e9 (teacher-student). On 2 cores sharding
# made paper steps 1.1-1.7x faster (goals' linear hnet level), and two plain runs side by side had the throughput of
# two sharded runs one after the other.
SHARD_MIN_FLOP = 3e9
SHARD_ENV = "COMPGEN_SHARD_TASKS"  # "0" turns the default sharding off, "1" (or unset) keeps it; nothing else


def paper_sized(section, cfg) -> bool:
    """Whether ``cfg`` costs at least :data:`SHARD_MIN_FLOP` per seed and outer step (the section's analytic cost):
    the size from which a CPU shards its tasks, compiles at XLA's default level and uses huge pages."""
    return section.flops_per_step(cfg) >= SHARD_MIN_FLOP


def shard_count(section, cfg, cores=None, backend=None) -> int:
    """Over how many CPU host devices :func:`compgen.dispatch.train_or_load` shards ``cfg``'s tasks by default: the
    number of cores if the backend is a CPU with several, the config costs at least :data:`SHARD_MIN_FLOP` per seed
    and step, its ``meta_batch`` is a multiple of the cores and ``$COMPGEN_SHARD_TASKS`` is not ``0``; else 1."""
    cores = (os.cpu_count() or 1) if cores is None else cores
    backend = default_backend() if backend is None else backend
    meta_batch = getattr(cfg, "meta_batch", 0)
    if (
        not params.env_flag(SHARD_ENV)
        or backend != "cpu"
        or cores < 2
        or not meta_batch
        or meta_batch % cores
        or not paper_sized(section, cfg)
    ):
        return 1
    return cores


# On a CPU a large meta-batch is adapted a few tasks at a time (compgen.meta.mean_over_tasks with ``chunk``), so that
# one chunk's inner loops stay in the caches: faster steps and a lower peak memory at the paper configurations (the
# measurements behind this constant and the two below: book/records/choices.json).
CPU_TRAIN_CHUNK = 8
CPU_CHUNK_MIN_BATCH = 64  # smaller meta-batches (every quick preset) are adapted all at once


# Measured exceptions to CPU_TRAIN_CHUNK, by (section, model): the preferences linear hnet's per-task products are
# narrow, and 32 tasks at a time make its step at the paper's meta-batch faster than 8.
CPU_TRAIN_CHUNKS = {("preferences", "hnet_linear"): 32}
# The CPU's compilation for configs below SHARD_MIN_FLOP (every smoke and quick config): XLA's backend (LLVM)
# optimisation level 1 instead of its default: it compiles the quick book's programs faster with steps as fast, and
# makes some steps at the paper's sizes slower, so larger configs keep XLA's default.
CPU_SMALL_OPT_LEVEL = 1
KNOBS = (
    "xla_opt_level",
    "remat",
    "train_chunk",
    "fused_inner",
)  # config fields a device chooses when the config leaves them None


def resolve(section, cfg, backend=None):
    """``cfg`` with the :data:`KNOBS` it leaves to the device (``None``) chosen for ``backend`` (default: jax's):

    * ``xla_opt_level``: on a CPU, :data:`CPU_SMALL_OPT_LEVEL` below :data:`SHARD_MIN_FLOP` per seed and step;
      else (larger configs, accelerators) ``None``, XLA's default;
    * ``remat``: off (a device turns it on only when the config does not fit it otherwise, :func:`lighter`);
    * ``train_chunk``: on a CPU the measured :data:`CPU_TRAIN_CHUNKS` of a large meta-batch; else ``None``, which
      :func:`train_chunk` reads when the step is traced (8 at a time on a CPU, all at once elsewhere);
    * ``fused_inner`` (teacher-student): its inner loop as one Pallas kernel on an NVIDIA GPU
      (:mod:`compgen.tasks.teacher_kernel`), the ``lax.scan`` loop elsewhere.

    A forced value (not ``None``) is kept. The choices change float32 round-off at most, never the science, so the
    results store keys a run by the config as given."""
    backend = default_backend() if backend is None else backend
    fields = {f.name for f in dataclasses.fields(cfg)}
    choice = {}
    if "xla_opt_level" in fields and cfg.xla_opt_level is None and backend == "cpu":
        if not paper_sized(section, cfg):
            choice["xla_opt_level"] = CPU_SMALL_OPT_LEVEL
    if "remat" in fields and cfg.remat is None:
        choice["remat"] = False
    if "fused_inner" in fields and cfg.fused_inner is None:
        choice["fused_inner"] = backend == "gpu"
    if "train_chunk" in fields and cfg.train_chunk is None and backend == "cpu":
        tuned = CPU_TRAIN_CHUNKS.get((section.name, getattr(cfg, "model", None)))
        if tuned and cfg.meta_batch >= CPU_CHUNK_MIN_BATCH and cfg.meta_batch % tuned == 0:
            choice["train_chunk"] = tuned
    return _with(cfg, choice)


def huge_pages(section, cfg, backend=None) -> bool:
    """Whether a process that trains ``cfg`` uses glibc's transparent huge pages (:mod:`compgen.allocator`): on a
    CPU, for a config of at least :data:`SHARD_MIN_FLOP` per seed and step (the paper's sizes; at quick sizes they
    made the linear hypernetwork 1-11 % slower)."""
    backend = default_backend() if backend is None else backend
    return backend == "cpu" and paper_sized(section, cfg)


def lighter(cfg, given, most: int = 6, backend=None) -> list:
    """Lighter versions of the resolved ``cfg`` to try, in order, when it does not fit an accelerator: with
    ``remat``, then adapting fewer tasks at once (halving, up to ``most`` times), as far as ``given`` (the config as
    the user gave it) left each knob to the device. None on a CPU, whose chunk is measured (:func:`train_chunk`): the
    memory estimate is a lower bound, too weak to size a chunk by (a meta-batch of 10⁸ "fitted" 25 GB 3·10⁶ tasks at a
    time, and XLA then asked for 173 GB)."""
    backend = default_backend() if backend is None else backend
    if backend == "cpu":
        return []
    out, fields = [], {f.name for f in dataclasses.fields(cfg)}
    if "remat" in fields and given.remat is None and not cfg.remat:
        cfg = _with(cfg, {"remat": True})
        out.append(cfg)
    if "train_chunk" in fields and given.train_chunk is None:
        chunk = cfg.train_chunk or cfg.meta_batch
        for _ in range(most):
            if chunk % 2 or chunk < 2:
                break
            chunk //= 2
            out.append(_with(cfg, {"train_chunk": chunk}))
    return out


def _with(cfg, values):
    """``cfg`` with ``values`` set, without validating again (each choice is valid by construction)."""
    if not values:
        return cfg
    copy = object.__new__(type(cfg))
    for f in dataclasses.fields(cfg):
        object.__setattr__(copy, f.name, values.get(f.name, getattr(cfg, f.name)))
    return copy


def train_chunk(meta_batch: int, chosen=None, backend=None, mesh=None) -> int | None:
    """How many of its ``meta_batch`` tasks each device adapts at once per outer step: ``chosen`` (a config's
    ``train_chunk``) if set; else, on a CPU with a meta-batch of :data:`CPU_CHUNK_MIN_BATCH` or more, the largest
    divisor of each device's share (of the ``mesh`` it is sharded over) up to :data:`CPU_TRAIN_CHUNK`; else ``None``
    (all at once). Like sharding, it changes float32 round-off only."""
    if chosen is not None:
        return chosen
    backend = default_backend() if backend is None else backend
    if backend != "cpu" or meta_batch < CPU_CHUNK_MIN_BATCH:
        return None
    share = meta_batch // (1 if mesh is None else mesh.size)
    return max(c for c in range(1, CPU_TRAIN_CHUNK + 1) if share % c == 0)


XLA_FLAG = re.compile(r'--[A-Za-z0-9_]+(?:=(?:"[^"]*"|[^\s"])*)?')  # --name or --name=value (a value may be quoted)
XLA_MESSAGE = re.compile(r"(?:parse_flags_from_env|command_line_flags)\.cc:\d+\] (.*)")  # XLA's own complaint


def check_xla_flags(env=None) -> None:
    """Refuse a ``$XLA_FLAGS`` of ``env`` (default: this process's environment) that XLA would refuse, in one
    :class:`compgen.params.ParameterError`, before JAX's backend starts (XLA then ends the process, printing a line or
    its list of ~90 flags). In this process: blanks only, and a token that is not ``--name`` or ``--name=value`` (XLA
    ignores a stray word; a value with blanks is quoted, ``--xla_dump_to="a b"``); text that does not start with
    ``--`` is the name of a file of flags for XLA, which must exist. Then every flag's name and value are read by XLA
    itself in a child process that builds XLA's compile options only (no backend, no device; about 0.3 s, once per
    value of ``XLA_FLAGS``): an unknown flag or a value of the wrong type is refused with XLA's own message."""
    env = os.environ if env is None else env
    text = env.get("XLA_FLAGS", "")
    if not text:
        return
    shown = params._short(text)
    if not text.strip():
        raise params.ParameterError(
            f"XLA_FLAGS is blank ({shown}); unset it, or set it to flags such as --xla_cpu_enable_fast_math=false"
        )
    if text.lstrip().startswith("--"):
        for token in re.findall(r'(?:[^\s"]|"[^"]*"?)+', text):
            if not XLA_FLAG.fullmatch(token):
                raise params.ParameterError(
                    "XLA_FLAGS must be flags such as --xla_force_host_platform_device_count=2 separated by blanks "
                    f"(--name or --name=value, a value with blanks in double quotes), got {params._short(token)} "
                    f"in {shown}"
                )
    elif not os.path.isfile(text):
        raise params.ParameterError(
            "XLA_FLAGS must be flags such as --xla_force_host_platform_device_count=2 (or the name of a file of "
            f"flags), got {shown}, which is neither"
        )
    refusal = _xla_refusal(text)
    if refusal:
        raise params.ParameterError(f"XLA_FLAGS={shown} is refused by XLA: {refusal}; fix or unset it")


@functools.lru_cache(maxsize=16)
def _xla_refusal(flags: str) -> str | None:
    """What XLA says of the flags ``flags`` when it reads them (in a child process that builds its compile options:
    no backend starts), or ``None`` if it takes them, or if the child could not tell (it did not finish in a minute,
    or failed otherwise)."""
    code = "from jaxlib import xla_client; xla_client.CompileOptions()"
    child_env = {**os.environ, "XLA_FLAGS": flags}
    try:
        child = subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if child.returncode == 0:
        return None
    said = [m.group(1).strip() for m in map(XLA_MESSAGE.search, child.stderr.splitlines()) if m]
    said = [line for line in said if not line.startswith("Check failed")] or said
    return said[0].rstrip(".")[:300] if said else None


def default_backend() -> str:
    """``jax.default_backend()``, with ``$XLA_FLAGS`` checked first (:func:`check_xla_flags`) if JAX's backend has not
    started yet: a bad flag is then refused in one line instead of ending the process."""
    if not _backend_started():
        check_xla_flags()
    return jax.default_backend()


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # another JAX: check every time (the check of one value is cached)
        return False


def host_devices_flag(n: int) -> str:
    """The XLA flag that makes ``n`` CPU devices; it must be in ``XLA_FLAGS`` before jax starts its backend."""
    return f"--xla_force_host_platform_device_count={int(n)}"


def xla_flags_with_host_devices(n: int, env=None) -> str:
    """``$XLA_FLAGS`` of ``env`` (default: this process's environment) with :func:`host_devices_flag` appended."""
    env = os.environ if env is None else env
    return " ".join(filter(None, [env.get("XLA_FLAGS"), host_devices_flag(n)]))


@contextlib.contextmanager
def shard_tasks(devices=None):
    """Training programs traced within the block shard each meta-batch over ``devices`` (default: all local ones).

    The meta-batch must be a multiple of the device count; with one device nothing changes.
    """
    devices = jax.local_devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("shard_tasks needs at least one device")
    token = _TASK_MESH.set(Mesh(np.array(devices), ("tasks",)) if len(devices) > 1 else None)
    try:
        yield _TASK_MESH.get()
    finally:
        _TASK_MESH.reset(token)


def train_on_devices(train_one, jobs, devices=None, log=print):
    """Call ``train_one(job, log)`` for every job, one thread per device, each with that device as JAX's default.

    Jobs are taken in order as devices free up. Returns ``[(job, error)]`` for the jobs that raised.
    """
    devices = jax.local_devices() if devices is None else list(devices)
    queue, lock, failed = list(jobs), threading.Lock(), []

    def worker(index, device):
        prefix = lambda line: log(f"[device {index}] {line}")
        while True:
            with lock:
                if not queue:
                    return
                job = queue.pop(0)
            try:
                with jax.default_device(device):
                    train_one(job, prefix)
            except Exception as error:  # noqa: BLE001  (one failing job must not stop the others)
                with lock:
                    failed.append((job, error))
                prefix(f"FAILED: {error!r}")

    threads = [threading.Thread(target=worker, args=(i, d), daemon=True) for i, d in enumerate(devices)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failed
