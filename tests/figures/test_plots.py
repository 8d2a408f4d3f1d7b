import numpy as np
import pytest
from matplotlib.figure import Figure

from compgen.figures import plots


@pytest.mark.parametrize("n_series", [2, 4, 7])
def test_grouped_bars_put_each_seed_dot_on_its_own_bar(n_series):
    seeds = np.array([40.0, 50.0, 60.0])
    values = [[seeds + 100 * s + 1000 * g for g in range(2)] for s in range(n_series)]  # series s, group g
    fig = plots.grouped_bars(["a", "b"], [f"model {s}" for s in range(n_series)], values, "acc", "title")
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_height() > 0]
    dots = np.concatenate([c.get_offsets() for c in ax.collections])
    assert len(bars) == 2 * n_series and len(dots) == 2 * n_series * len(seeds)
    for bar in bars:
        # the bar's mean identifies its series and group; its three seed dots must lie within its width
        mine = dots[np.abs(dots[:, 1] - bar.get_height()) <= 10.0 + 1e-9]
        assert len(mine) == len(seeds)
        assert np.all((mine[:, 0] > bar.get_x()) & (mine[:, 0] < bar.get_x() + bar.get_width()))


def test_figures_fit_the_text_column_and_bypass_pyplot():
    import matplotlib.pyplot as plt

    wide, _ = plots.subplots(1, 3, figsize=(14, 3))
    narrow, _ = plots.subplots(figsize=(2, 3))
    assert isinstance(wide, Figure) and wide.get_figwidth() == plots.COLUMN_WIDTH
    assert narrow.get_figwidth() == plots.COLUMN_WIDTH / 2  # never narrower than half the column
    assert plt.get_fignums() == []  # not registered with pyplot: a notebook shows it once, where it is displayed
