"""tools/paper_fig2c.py: trains Fig. 2C at a preset into the store and records per-seed numbers that the chapter's
section renders as current."""

import importlib.util
import json
from pathlib import Path

import numpy as np

from compgen.figures import claims as C
from compgen.figures import teacher_student as F

TOOL = Path(__file__).resolve().parents[2] / "tools" / "paper_fig2c.py"


def _tool():
    spec = importlib.util.spec_from_file_location("paper_fig2c", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_smoke_record_holds_every_seed_and_evaluation_and_renders_as_current(store, tmp_path):
    out = tmp_path / "paper_fig2c.json"
    assert _tool().main(["--preset", "smoke", "--columns", "1", "2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert [e["column"] for e in record["configs"]] == [1, 2] and record["preset"] == "smoke"
    entry = record["configs"][0]
    assert np.shape(entry["alignment"]) == (len(entry["seeds"]), len(entry["eval_steps"]))
    assert np.shape(entry["r2"]) == (len(entry["seeds"]), len(entry["sets"]), 6)
    assert F.paper_scale_staleness(record) == []
    shown = F.paper_scale_section(out)
    assert {c.verdict for c in shown.claims} <= {C.HOLDS, C.NOT_REPRODUCED, C.NOT_RUN} and not shown.notes
    # a second call finds every config stored and writes the same numbers
    again = tmp_path / "again.json"
    _tool().main(["--preset", "smoke", "--columns", "1", "2", "--out", str(again)])
    assert json.loads(again.read_text())["configs"] == record["configs"]
