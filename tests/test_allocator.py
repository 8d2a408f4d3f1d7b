"""glibc's huge-page tunable is added once, next to the tunables a user set, and a started process sees it."""

import subprocess
import sys
from pathlib import Path

import pytest

from compgen import allocator


def test_the_tunable_is_added_beside_others_and_not_twice():
    env = allocator.environment({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"})
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.trim_threshold=1:glibc.malloc.hugetlb=1"
    assert allocator.environment(env) == env
    assert allocator.environment({})["GLIBC_TUNABLES"] == allocator.HUGE_PAGES
    mine = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}  # a user's own choice is kept
    assert allocator.environment(mine) == mine and allocator.has_huge_pages(mine)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the restart is for glibc, on Linux")
def test_a_restarted_process_has_the_tunable_and_restarts_once(tmp_path):
    script = (
        "import os, sys\n"
        "from compgen import allocator\n"
        "print('start', flush=True)\n"
        "allocator.restart_with_huge_pages('compgen.allocator', [])\n"
    )
    env = {k: v for k, v in allocator.environment().items() if k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    # the first process prints "start" and becomes `python -m compgen.allocator` (which prints nothing)
    assert out.returncode == 0 and out.stdout.split() == ["start"], out.stderr
    again = subprocess.run(
        [sys.executable, "-c", script + "print(os.environ['GLIBC_TUNABLES'])"],
        env=allocator.environment(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.stdout.split() == ["start", allocator.HUGE_PAGES]


def test_no_preset_picks_the_allocator():
    """The allocator is the device's choice by config size (compgen.devices.huge_pages, tested in test_devices), so
    the Makefile no longer sets it for PRESET=paper."""
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "GLIBC_TUNABLES" not in makefile
