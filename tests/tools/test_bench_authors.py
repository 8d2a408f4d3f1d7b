"""`make bench-authors` checks the reference checkout and the twin virtualenv before it times anything."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import bench_authors  # noqa: E402
import twin  # noqa: E402


def test_a_missing_checkout_or_python_is_refused_in_one_line_before_our_case_is_timed(tmp_path, monkeypatch, capsys):
    timed = []
    monkeypatch.setattr(bench_authors.bench, "case_process", lambda name: timed.append(name))
    assert bench_authors.main(["--reference", str(tmp_path), "--twin-python", sys.executable]) == 2
    message = capsys.readouterr().err.strip()
    assert "is not a checkout of smonsays/modular-hyperteacher: it has no run_fewshot.py" in message
    assert "\n" not in message and timed == []
    for name in twin.REFERENCE_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert bench_authors.main(["--reference", str(tmp_path), "--twin-python", str(tmp_path / "python")]) == 2
    assert "is not an executable Python (make twin-env" in capsys.readouterr().err
    assert bench_authors.main(["--reference", str(tmp_path), "--twin-python", sys.executable]) == 2  # no haiku here
    assert "cannot import jax and haiku" in capsys.readouterr().err and timed == []
