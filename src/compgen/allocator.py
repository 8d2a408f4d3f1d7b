"""glibc's allocator with transparent huge pages, for the processes that train at the paper's sizes.

XLA asks the C allocator for large scratch buffers at every step; glibc maps them afresh, and the kernel faults
them in page by page (millions of 4 KiB faults per MAML step at the paper configuration). With the tunable
``glibc.malloc.hugetlb=1`` glibc marks its mappings for transparent huge pages, so they fault in 2 MiB at a time.
It makes the steps of the paper's ANIL and MAML faster and those of ``quick`` no faster (the measurements:
``book/records/choices.json``), so it is used for the paper's sizes only (:func:`compgen.devices.huge_pages`, by
the config's size, on a CPU): the runner starts a worker that trains such a config with it, ``compgen-cli``
restarts itself with it for such a run or sweep, and the bench sets it for its paper cases. It needs no root and
changes no number (only where memory comes from). glibc reads ``GLIBC_TUNABLES`` once, when a process starts,
hence the restart; other allocators and systems ignore it.
"""

from __future__ import annotations

import os
import sys

HUGE_PAGES = "glibc.malloc.hugetlb=1"


def has_huge_pages(env=None) -> bool:
    """Whether ``env`` (default: this process's environment) already sets glibc's huge-page tunable."""
    env = os.environ if env is None else env
    return any(t.startswith("glibc.malloc.hugetlb=") for t in env.get("GLIBC_TUNABLES", "").split(":"))


def environment(env=None) -> dict:
    """A copy of ``env`` (default: this process's) with :data:`HUGE_PAGES` added to ``GLIBC_TUNABLES``, unless it
    sets the tunable already."""
    env = dict(os.environ if env is None else env)
    if not has_huge_pages(env):
        env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), HUGE_PAGES]))
    return env


def restart_with_huge_pages(module: str, argv: list) -> None:
    """On Linux, replace this process by ``python -m module *argv`` with :func:`environment`, unless its
    environment has the tunable already (then return)."""
    if sys.platform.startswith("linux") and not has_huge_pages():
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, "-m", module, *argv], environment())
