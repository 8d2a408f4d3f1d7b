"""tools/check_prose.py: a result typed in a markdown cell is found, a marked or computed one is not, and a number
the quick and the smoke builds both show is reported."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("check_prose", ROOT / "tools" / "check_prose.py")
check_prose = importlib.util.module_from_spec(spec)
sys.modules["check_prose"] = check_prose
spec.loader.exec_module(check_prose)

CHAPTER = """# %% [markdown]
# # A chapter
#
# Marked: $0.9$, `inner_lr = 0.2`, {abbr}`0.67–0.85 (the paper's Table A1)`, §4.3, Fig. 4E, App. C.4, 60,000 steps.
# PLANTED

# %%
print("0.123 is computed, in code")
"""


def _chapter(tmp_path, planted: str) -> Path:
    book = tmp_path / "book"
    book.mkdir(exist_ok=True)
    (book / "chapter.py").write_text(CHAPTER.replace("PLANTED", planted))
    return book


def test_a_typed_result_is_found_and_marked_values_are_not(tmp_path):
    assert check_prose.hand_typed(_chapter(tmp_path, "Nothing typed here.") / "chapter.py") == []
    for planted, number in (("It reached 0.079 on every seed.", "0.079"), ("A lead of 37 % over ANIL.", "37 %")):
        found = check_prose.hand_typed(_chapter(tmp_path, planted) / "chapter.py")
        assert [(line, n) for line, n, _ in found] == [(5, number)], found
    assert check_prose.main([str(_chapter(tmp_path, "by 2.0 points"))]) == 1


def test_the_shipped_chapters_have_no_typed_result():
    assert check_prose.main([str(ROOT / "book")]) == 0


def test_a_number_both_builds_show_is_reported(tmp_path):
    book = _chapter(tmp_path, "")
    record = '<div class="cell"><div class="cell_output"><table><td>0.555</td></table></div></div>'
    for build, numbers in (("quick", "0.978 and 0.123"), ("smoke", "0.978 and 0.215")):
        (tmp_path / build / "book").mkdir(parents=True)
        (tmp_path / build / "book" / "chapter.html").write_text(f"<p>alignment {numbers}</p>{record}")
    found = check_prose.shared_results(tmp_path / "quick", tmp_path / "smoke", book)
    # 0.123 is in the sources (a code cell), 0.215 differs, 0.555 is a cell's output (a record's number) in both
    assert found == [("chapter.html", "0.978")]
