import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from compgen import plots  # noqa: E402


@pytest.mark.parametrize("n_series", [2, 4, 7])
def test_grouped_bars_put_each_seed_dot_on_its_own_bar(n_series):
    seeds = np.array([40.0, 50.0, 60.0])
    values = [[seeds + 100 * s + 1000 * g for g in range(2)] for s in range(n_series)]  # series s, group g
    fig = plots.grouped_bars(["a", "b"], [f"model {s}" for s in range(n_series)], values, "acc", "caption")
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_height() > 0]
    dots = np.concatenate([c.get_offsets() for c in ax.collections])
    assert len(bars) == 2 * n_series and len(dots) == 2 * n_series * len(seeds)
    for bar in bars:
        # the bar's mean identifies its series and group; its three seed dots must lie within its width
        mine = dots[np.abs(dots[:, 1] - bar.get_height()) <= 10.0 + 1e-9]
        assert len(mine) == len(seeds)
        assert np.all((mine[:, 0] > bar.get_x()) & (mine[:, 0] < bar.get_x() + bar.get_width()))
    plt.close(fig)
