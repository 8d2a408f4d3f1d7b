"""The search-record tool: one record per stored config of a figure, and ``--models`` for a model the figure leaves
out."""

import importlib.util
import json
import sys
from pathlib import Path

from compgen import catalog, results
from compgen.section import make_config

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("search_from_store", ROOT / "tools" / "search_from_store.py")
search_from_store = importlib.util.module_from_spec(spec)
sys.modules["search_from_store"] = search_from_store
spec.loader.exec_module(search_from_store)

WORLD = ["n_modules", "layout"]


def _store(cfg, fake, losses):
    sec = catalog.get("preferences")
    results.Store.default().save(sec, cfg, fake(cfg, {"eval/loss": {"ood": losses}}), 12.5)


def test_records_each_stored_config_of_the_figure(store, fake, tmp_path):
    sec = catalog.get("preferences")
    grid = sec.preset("smoke").figures["fig4b"]
    points = list(grid.points())
    cfg = make_config(sec, "smoke", "hnet_linear", **points[0], seeds=(7,))
    _store(cfg, fake, [0.25])
    path = tmp_path / "record.json"
    argv = ["preferences", "fig4b", "--preset", "smoke", "--seeds", "7", "--regime", "r1", "--metric", "loss"]
    assert search_from_store.main([*argv, "--record", str(path), "--world", *WORLD]) == 0
    (entry,) = json.loads(path.read_text())["records"]  # the other configs of the figure are not stored
    assert entry["model"] == "hnet_linear" and entry["split"] == points[0]["split"]
    assert entry["values"] == [0.25] and entry["seeds"] == [7] and entry["cpu_s"] == 12.5
    assert entry["world"] == {"n_modules": cfg.n_modules, "layout": cfg.layout}
    assert entry["budget"] == {"outer_steps": cfg.outer_steps, "meta_batch": cfg.meta_batch}


def test_models_records_a_model_the_figure_leaves_out(store, fake, tmp_path):
    sec = catalog.get("preferences")
    grid = sec.preset("smoke").figures["figa8"]  # the linear hypernetwork only
    assert "hnet_deepmlp" not in grid.models
    point = next(iter(grid.points()))
    cfg = make_config(sec, "smoke", "hnet_deepmlp", **point, seeds=(7,))
    _store(cfg, fake, [0.5])
    path = tmp_path / "record.json"
    argv = ["preferences", "figa8", "--preset", "smoke", "--seeds", "7", "--regime", "probe", "--metric", "loss",
            "--record", str(path), "--world", *WORLD]  # fmt: skip
    assert search_from_store.main(argv) == 1  # the figure's own model has no stored run: nothing recorded
    assert search_from_store.main([*argv, "--models", "hnet_deepmlp"]) == 0
    (entry,) = json.loads(path.read_text())["records"]
    assert entry["model"] == "hnet_deepmlp" and entry["values"] == [0.5]
    assert entry["budget"]["outer_steps"] == cfg.outer_steps
