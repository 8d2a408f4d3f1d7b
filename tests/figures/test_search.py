import json

import pytest

from compgen.figures.search import load_search, search_table


def record(regime, model, split, values, steps=2000):
    world = {"grid": 5, "n_mazes": 2}
    budget = {"outer_steps": steps, "meta_batch": 16}
    return dict(
        regime=regime, world=world, budget=budget, model=model, split=split, seeds=[7, 8], values=values, cpu_s=30.0
    )


def test_one_row_per_regime_with_each_models_mean_per_split(tmp_path):
    path = tmp_path / "search.json"
    records = [
        record("small", "anil", "random", [0.8, 0.6]),
        record("small", "anil", "non_compositional", [0.5, 0.5]),
        record("small", "hnet_linear", "random", [0.9, 0.9]),
        record("longer", "anil", "random", [0.7, 0.7], steps=4000),
    ]
    path.write_text(json.dumps({"metric": "OOD accuracy", "records": records}))
    table = search_table(path, {"anil": "ANIL", "hnet_linear": "Linear hnet"})
    rows = [line for line in table.splitlines() if line.startswith("| small") or line.startswith("| longer")]
    assert len(rows) == 2
    assert "r 70.0 / nc 50.0" in rows[0] and "r 90.0" in rows[0] and "2000 × 16" in rows[0] and "| 1.5 |" in rows[0]
    assert rows[1].endswith("| r 70.0 | – | 0.5 |") and "4000 × 16" in rows[1]  # the regime tried ANIL only
    assert "| small | – |" in rows[0]  # every regime has the same world: it is named once, in the caption
    assert "Every regime's world has grid 5, n_mazes 2;" in table.splitlines()[0]


def test_the_world_column_shows_what_each_regime_changes(tmp_path):
    path = tmp_path / "search.json"
    larger = dict(record("larger", "anil", "random", [0.5, 0.5]), world={"grid": 7, "n_mazes": 2})
    path.write_text(
        json.dumps({"metric": "OOD accuracy", "records": [record("small", "anil", "random", [0.8]), larger]})
    )
    table = search_table(path, {"anil": "ANIL"})
    assert "| small | grid 5 |" in table and "| larger | grid 7 |" in table
    assert "Every regime's world has n_mazes 2;" in table.splitlines()[0]


def test_a_record_without_its_metric_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"records": []}))
    with pytest.raises(ValueError, match="metric"):
        load_search(path)


def test_columns_keyed_by_several_fields_show_one_value_each_and_empty_regimes_are_left_out(tmp_path):
    path = tmp_path / "search.json"
    records = [
        dict(record("w1", "f=(2,2)", "discrete connected", [0.9, 0.7]), column=1),
        dict(record("w1", "f=(2,2)", "discrete disconnected", [0.5, 0.5]), column=2),
        record("w1", "f=(8,8)", "discrete connected", [0.6, 0.6]),
        record("only_large", "f=(8,8)", "discrete connected", [0.4, 0.4]),
    ]
    path.write_text(json.dumps({"metric": "alignment", "records": records}))
    by_column = search_table(
        path, {("f=(2,2)", 1): "1", ("f=(2,2)", 2): "2"}, 1.0, 3, by=("model", "column"), prefix_split=False
    )
    rows = [line for line in by_column.splitlines() if line.startswith("| w1") or line.startswith("| only")]
    assert rows == ["| w1 | – | 2000 × 16 | 7, 8 | 0.800 | 0.500 | 1.5 |"]  # only_large: no cell
    assert by_column.startswith("alignment (mean over the seeds). ")  # no % and no split legend
    by_split = search_table(path, {("f=(8,8)", "discrete connected"): "(8,8)"}, 1.0, 2, by=("model", "split"))
    assert "| w1 | – | 2000 × 16 | 7, 8 | 0.60 | 1.5 |" in by_split
    assert "| only_large |" in by_split
    assert search_table(path, {"f=(8,8)": "(8,8)"}, 1.0, 2).count("discrete connected 0.60") == 1  # default: by model
