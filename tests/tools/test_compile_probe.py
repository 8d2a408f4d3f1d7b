"""tools/compile_probe.py: each variant's phases timed in a child process; a variant stopped by its timeout keeps the
phases it finished and is never chosen."""

import importlib.util
import json
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "compile_probe.py"


def _tool():
    spec = importlib.util.spec_from_file_location("compile_probe", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_faster_variant_is_one_whose_phases_all_ended():
    probe = _tool()
    both = {"fused": {"ms_per_step": 1.0, "ok": True}, "scan": {"ms_per_step": 2.0, "ok": True}}
    assert probe.faster(both) == "fused"
    assert probe.faster({"fused": {"init": 3.0, "ok": False}, "scan": {"ms_per_step": 9.0, "ok": True}}) == "scan"
    assert probe.faster({"fused": {"ok": False}, "preset": "paper"}) is None


def test_a_smoke_probe_times_every_phase_and_a_timeout_keeps_what_ended(tmp_path):
    probe = _tool()
    out = tmp_path / "probe.json"
    assert probe.main(["--preset", "smoke", "--variants", "scan", "--steps", "4", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    phases = ("init", "evaluate_compile", "evaluate_run", "steps_compile", "steps_first_run", "ms_per_step")
    assert record["faster"] == "scan" and record["scan"]["ok"] and all(record["scan"][p] > 0 for p in phases)
    lines = []
    stopped = probe.probe("scan", "smoke", 1, 4, timeout=0.5, log=lines.append)
    assert stopped["ok"] is False and "ms_per_step" not in stopped
    assert any("stopped after" in line for line in lines)
