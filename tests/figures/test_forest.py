"""The forest plot draws every claim at its standing, coloured by its category, as one HTML block."""

import re

import pytest

from compgen.analysis import claims as C
from compgen.figures import forest

SPEC = C.ClaimSpec("§", "Fig. X", "claim {n}", "a criterion", anchor="#fig-x", id="x/{n}", reads=("x",))


def _claim(better, margin, n, seeds=(1, 2, 3)):
    return SPEC.judge(C.paired(better, [0.0] * len(better), margin=margin), "ours", seeds, n=n)


def _x(svg: str, tag: str) -> float:
    return float(re.search(rf'<{tag} [^>]*?c?x1?="([\d.]+)%"', svg).group(1))


def test_a_row_per_claim_at_its_position_with_a_mark_per_seed_set():
    edge, clear = _claim([1.2, 1.0, 1.1], 1.0, 1), _claim([1.2, 1.0, 1.1], 0.5, 2)
    rows = [forest.Row(edge, (("A", edge), ("B", clear))), forest.Row(clear, (("A", clear), ("B", None)), "x.html#a")]
    text = forest.plot([("Chapter", rows)], ["A", "B"], "pooled", alt="two claims")
    assert "\n\n" not in text and text.count('class="forest-row"') == 2 and 'aria-label="two claims"' in text
    bars = re.findall(r"<svg role=\"img\".*?</svg>", text)
    lo, hi = forest.AXIS
    assert _x(bars[0], "circle") == pytest.approx(100 * (1.1 - lo) / (hi - lo))
    assert _x(bars[1], "circle") == pytest.approx(100 * (2.2 - lo) / (hi - lo))
    assert (
        f'fill="{forest.COLOURS[C.AT_CRITERION]}"' in bars[0] and f'fill="{forest.COLOURS[C.HOLDS_CLEARLY]}"' in bars[1]
    )
    assert bars[0].count("<text") == 2 and bars[1].count("<text") == 1  # a mark per recorded set
    assert "holds, at the criterion" in text and '<a href="x.html#a">Fig. X</a>' in text
    assert "○ A" in text and "□ B" in text  # the legend names each set's mark


def test_a_position_beyond_the_axis_is_drawn_at_its_edge_with_its_value():
    far = _claim([9.0, 10.0, 11.0], 1.0, 1)  # 10 criterion units
    below = _claim([-5.0, -6.0, -7.0], 1.0, 2)
    text = forest.plot([("Chapter", [forest.Row(far), forest.Row(below)])])
    assert "10.0 →" in text and "← -6.0" in text
    bars = re.findall(r"<svg role=\"img\".*?</svg>", text)
    assert _x(bars[0], "circle") == pytest.approx(100.0) and _x(bars[1], "circle") == pytest.approx(0.0)


def test_a_claim_not_run_is_a_row_that_says_so():
    text = forest.plot([("Chapter", [forest.Row(SPEC.judge(None, "–", n=1))]), ("Empty", [])])
    assert text.count('class="forest-row"') == 1 and ">not run</text>" in text and "<circle" not in text
    assert "Empty" not in text  # a group without rows is left out
