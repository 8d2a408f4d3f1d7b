"""The twin tool translates every field of the claim configs, and judges the chapter's claims on a reference's
numbers with the chapter's own code; a fake reference (a script writing the driver's arrays) stands in for the
authors' implementation, so no checkout is needed."""

import dataclasses
import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

from compgen import records
from compgen.analysis import claims as C
from compgen.analysis import goals, teacher_student
from compgen.analysis import twin as layout
from compgen.figures import twin as twin_tables
from compgen.notebook import chapter_configs

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("twin", ROOT / "tools" / "twin.py")
twin = importlib.util.module_from_spec(spec)
sys.modules["twin"] = twin
spec.loader.exec_module(twin)


@pytest.mark.parametrize(
    "chapter, preset",
    [("hyperteacher", "quick"), ("hyperteacher", "paper"), ("preferences", "quick"), ("goals", "quick")],
)
def test_every_field_of_every_claim_config_is_translated_or_explained(chapter, preset):
    _, by_figure = twin.claim_configs(
        chapter, preset, None
    )  # at the matched world where the preset's is not expressible
    for cfgs in by_figure.values():
        for cfg in cfgs:
            t = twin.translate(chapter, cfg, cfg.seeds[0])
            assert [row[0] for row in t.fields] == [f.name for f in dataclasses.fields(cfg)]
            for ours, value, key, theirs in t.fields:
                if key is not None:  # carried over (model and schedule under the reference's names)
                    assert t.config[key] == theirs, ours
                    assert theirs == value or ours in ("seeds", "model", "outer_schedule"), ours
                else:
                    assert isinstance(theirs, str) and theirs, f"{ours} needs a stated reason"
            assert t.unmatched and all(what and why for what, why in t.unmatched)


def test_translation_carries_the_values_the_reference_reads():
    _, by_figure = chapter_configs("hyperteacher", "quick", [5], ["fig3b", "fig3cd"])
    anil = next(c for c in by_figure["fig3b"] if c.model == "anil" and c.split == "non_compositional")
    t = twin.translate("hyperteacher", anil, 5).config
    assert (t["meta_model"], t["seed"], t["dataset_task_support"]) == ("anil", 5, "non_compositional")
    assert (t["steps_outer"], t["meta_batch_size"], t["steps_inner"], t["batch_size"]) == (
        anil.outer_steps,
        anil.meta_batch,
        anil.inner_steps,
        anil.inner_batch,
    )
    assert (t["lr_inner"], t["lr_outer"], t["schedule_outer"]) == (anil.inner_lr, anil.outer_lr, "warmup_cosine")
    maml = next(c for c in by_figure["fig3b"] if c.model == "maml")
    assert twin.translate("hyperteacher", maml, 5).config["meta_model"] == "learned_init"
    # run_fewshot.py builds the generator named by meta_model's first word: linear, mlp or deepmlp
    deep = next(c for c in by_figure["fig3b"] if c.model == "hnet_deepmlp")
    name = twin.translate("hyperteacher", deep, 5).config["meta_model"]
    assert "hnet" in name and name.split("_")[0] == "deepmlp"
    connected = by_figure["fig3cd"][0]
    t = twin.translate("hyperteacher", connected, 5).config
    assert (t["dataset_num_experts"], t["dataset_num_hot"], t["dataset_task_support"]) == (6, 2, "connected")
    assert t["ratio_templates_experts"] == connected.templates_per_module and t["fast_bias"] is True


def test_a_field_the_reference_fixes_otherwise_is_not_expressible():
    smoke = chapter_configs("hyperteacher", "smoke", None, ["fig3b"])[1]["fig3b"][0]
    with pytest.raises(twin.NotExpressible, match="norm_inputs = 100"):  # smoke standardises over 100 inputs
        twin.translate("hyperteacher", smoke, 5)
    _, by_figure = chapter_configs("hyperteacher", "quick", [5], ["fig3b"])
    cfg = by_figure["fig3b"][0]
    for change, name in (
        (dict(n_in=12), "n_in"),
        (dict(gradient="first_order"), "gradient"),
        (dict(warmup_steps=50), "warmup_steps"),
    ):
        with pytest.raises(twin.NotExpressible, match=name):
            twin.translate("hyperteacher", dataclasses.replace(cfg, **change), 5)
    with pytest.raises(twin.NotExpressible, match="incontext"):
        twin.translate("incontext", cfg, 5)


def test_the_grid_worlds_translate_at_the_nearest_world_the_reference_expresses():
    # quick's own worlds are not expressible: the reference's room is 7x7, observed whole; its mazes are odd and > 5
    pref = chapter_configs("preferences", "quick", [2020], ["fig4c"])[1]["fig4c"][0]
    with pytest.raises(twin.NotExpressible, match="layout"):
        twin.translate("preferences", pref, 2020)
    goal = chapter_configs("goals", "quick", [2020], ["fig4ef"])[1]["fig4ef"][0]
    with pytest.raises(twin.NotExpressible, match="grid = 5"):
        twin.translate("goals", goal, 2020)
    with pytest.raises(twin.NotExpressible, match="min_distance = 5"):
        twin.translate("goals", dataclasses.replace(goal, grid=7, min_distance=5, demo_length=48), 2020)
    # ... the matched worlds are, with our fields under the reference's names
    pref = twin.claim_configs("preferences", "quick", [2020])[1]["fig4b"][1]
    t = twin.translate("preferences", pref, 2020).config
    assert (t["dataset_num_preferences"], t["dataset_num_features"], t["dataset_timelimit"]) == (6, 6, 4)
    assert (t["dataset_task_support"], t["num_templates"], t["dataset"]) == (
        "disconnected",
        16,
        "compositional_preference",
    )
    goal = twin.claim_configs("goals", "quick", [2020])[1]["fig4ef"][0]
    t = twin.translate("goals", goal, 2020).config
    assert (t["dataset_grid_size"], t["dataset_num_mazes"], t["dataset_num_objects"]) == (7, 2, 3)
    assert t["schedule_outer"] is None and t["twin_keep_adapted"] is False  # no claim of goals reads R²


FAKE_DRIVER = textwrap.dedent(
    """
    # stands in for tools/twin_driver.py: the hypernetworks generalise, ANIL and MAML do not, under random support
    import argparse, json, numpy as np
    p = argparse.ArgumentParser(); [p.add_argument(a) for a in ("--reference", "--config", "--out")]
    p.add_argument("--theory", action="store_true")
    a = p.parse_args(); c = json.load(open(a.config))
    if a.theory:  # connected supports align (0.95), disconnected ones do not (0.6)
        value = 0.95 if "0,5" in c["manual_task"] else 0.6
        np.savez(a.out, log_step=np.array([c["log_every"]]), wall_s=1.0, **{
            "log/_train_train_vs_oodtemplate_alignment_all_mean": np.array([value + 1e-3 * (c["seed"] % 5)]),
            "log/_train_outer_loss": np.array([0.1])})
        raise SystemExit
    hnet = "hnet" in c["meta_model"]
    ood = 0.6 if hnet and c["dataset_task_support"] == "random" else 0.4
    ood += 1e-3 * (c["seed"] % 7)
    logs = {f"log/{s}_acc_outer": np.array([0.1, ood]) for s in ("valid", "test", "ood", "ood_1", "ood_2", "ood_4")}
    logs["log/test_acc_outer"] = np.array([0.1, 0.65])
    logs.update({k.replace("acc", "loss"): 1 - v for k, v in list(logs.items())})
    logs.update({k.replace("acc", "acc_all"): v / 2 for k, v in list(logs.items()) if "acc" in k})
    if not c["twin_keep_adapted"]:
        np.savez(a.out, log_step=np.array([0, c["steps_outer"] - 1]), wall_s=1.5, **logs)
        raise SystemExit
    rng = np.random.default_rng(c["seed"])
    codes = rng.integers(0, 2, (64, 2, c["dataset_num_experts"])).astype(np.float32)
    adapted = np.concatenate([codes.reshape(64, -1), rng.normal(size=(64, 3))], 1) if hnet else rng.normal(size=(64, 5))
    np.savez(a.out, log_step=np.array([0, c["steps_outer"] - 1]), wall_s=1.5, adapted_test=adapted,
             adapted_ood=adapted, codes_test=codes, codes_ood=codes, **logs)
    """
)


def _use_fake_driver(tmp_path, monkeypatch):
    """Reference runs by :data:`FAKE_DRIVER` instead of the authors' code."""
    driver = tmp_path / "fake_driver.py"
    driver.write_text(FAKE_DRIVER)
    monkeypatch.setattr(twin, "DRIVER", driver)


def _goals_smoke_twin(tmp_path, monkeypatch):
    """The goals twins of Fig. 4E/F at smoke on seed 2020 with fake reference runs, at the 7 x 7 matched world and
    with none of ours there: (the record's path, the tool's arguments)."""
    _use_fake_driver(tmp_path, monkeypatch)
    world = goals.TWIN_WORLD
    monkeypatch.setitem(goals.CHAPTER.twin.matched, "smoke", {"fig4ef": world, "figa10": world})
    # ours at the matched world are the runner's (the teacher-student test trains them); none here
    monkeypatch.setattr(
        twin, "train_ours", lambda chapter, preset, sets, *a, **k: {",".join(map(str, s)): {} for s in sets}
    )
    out = tmp_path / "twin.json"
    args = ["--reference", str(tmp_path), "--python", sys.executable, "--chapter", "goals", "--preset", "smoke"]
    return out, [*args, "--out", str(out), "--seeds", "2020", "--figures", "fig4ef"]


def test_the_tool_judges_the_chapters_claims_on_the_references_numbers(tmp_path, monkeypatch):
    _use_fake_driver(tmp_path, monkeypatch)
    out = tmp_path / "twin.json"
    args = ["--reference", str(tmp_path), "--python", sys.executable, "--preset", "quick", "--out", str(out)]
    assert twin.main([*args, "--seeds", "3", "--seeds", "4"]) == 0
    record = json.loads(out.read_text())
    _, by_figure = chapter_configs("hyperteacher", "quick", [3], twin.claim_figures("hyperteacher"))
    configs = set(c for cs in by_figure.values() for c in cs)
    assert len(record["runs"]) == 2 * len(configs)
    assert "claims" not in record  # no verdict is stored: the book judges the numbers
    loaded = layout.load_twin(out)
    assert record["schema"] == records.Twin.VERSION and layout.staleness(loaded) == ""  # current code
    assert record["code_key"] == layout.code_key("hyperteacher")
    found = layout.judged(loaded)
    assert set(found) == {"3", "4"} and found["3"]["ours"] is None  # the quick world: ours are the chapter's runs
    verdict = {c.claim: c.verdict for c in found["3"]["authors'"]}
    # the fake hypernetworks lead by 20 points under random support and lose it under non-compositional support
    assert verdict["Linear hnet: higher OOD accuracy than ANIL and MAML under compositional support"] == C.HOLDS
    assert verdict["Linear hnet: loses that lead (falls below ANIL/MAML) under non-compositional support"] == C.HOLDS
    # ... and their adapted parameters contain the code: R² near 1 for every hypernetwork run
    assert all(r["r2_ood_pooled"] > 0.9 for r in record["runs"].values() if r["model"].startswith("hnet"))
    run = next(iter(record["runs"].values()))
    assert (
        run["translation"]["config"]["seed"] == run["seed"]
        and run["curve"]["step"][-1] == run["world"]["outer_steps"] - 1
    )

    # a rerun trains nothing (the record has every run) and keeps the numbers; an interrupted one resumes
    monkeypatch.setattr(twin, "train_reference", lambda *a, **k: pytest.fail("trained a recorded run"))
    assert twin.main([*args, "--seeds", "3", "--seeds", "4"]) == 0
    assert json.loads(out.read_text())["runs"] == record["runs"]


def test_the_tables_render_the_record_beside_our_verdicts(tmp_path, monkeypatch):
    _use_fake_driver(tmp_path, monkeypatch)
    out = tmp_path / "twin.json"
    twin.main(
        [
            "--reference",
            str(tmp_path),
            "--python",
            sys.executable,
            "--preset",
            "quick",
            "--out",
            str(out),
            "--seeds",
            "3",
        ]
    )
    record = layout.load_twin(out)
    found = layout.judged(record)
    ours = [
        C.Claim("hyperteacher", c.figure, c.claim, "c", "ours 1", seeds=(3,), verdict=C.NOT_REPRODUCED, id=c.id)
        for c in found["3"]["authors'"]
    ]
    table = twin_tables.claims_table(record, {"3": ours}, found)
    assert table.count("\n") == len(ours) + 1 and "❌ ours 1" in table and "✅" in table
    first = next(c for c in found["3"]["authors'"] if c.verdict == C.HOLDS)
    assert twin_tables.glance_cell(found, None, first, "hyperteacher.html#twin", "authors'").startswith(
        '<a href="hyperteacher.html#twin"><span class="holds"'
    )
    assert twin_tables.glance_cell({}, None, first, "x", "authors'") == "–"
    runs = twin_tables.runs_table(record, {"anil": "ANIL"})
    assert "| fig3b | ANIL | random | 4, 4 |" in runs
    assert any(what == "returned state" for what, _ in twin_tables.unmatched(record))


def test_teacher_student_configs_translate_to_run_theory(monkeypatch):
    _, by_figure = twin.claim_configs("teacher_student", "quick", [100])
    connected = by_figure["fig2c"][0]
    assert (connected.warmup_steps, connected.outer_steps, connected.eval_every) == (0, 7998, 1333)  # matched world
    t = twin.translate("teacher_student", connected, 100)
    assert [row[0] for row in t.fields] == [f.name for f in dataclasses.fields(connected)]
    # one-hots are written "i,i" (run_theory.py needs masks of one length; a repeated index is the same module)
    assert t.config["manual_task"] == "0,0;1,1;2,2;3,3;4,4;5,5;0,1;1,2;2,3;3,4;4,5;0,5"
    assert (t.config["train_step"] * t.config["n_task"], t.config["log_every"]) == (7998, 1333)
    assert t.config["second_order"] is False and t.config["continuous_combinations"] is False
    chapter_world = chapter_configs("teacher_student", "quick", [100], ["fig2c"])[1]["fig2c"][0]
    with pytest.raises(twin.NotExpressible, match="outer_steps = 8000"):  # 8,000 is no multiple of M = 6
        twin.translate("teacher_student", chapter_world, 100)
    with pytest.raises(twin.NotExpressible, match="warmup_steps = 400"):  # quick's own world has a warm-up
        twin.translate("teacher_student", dataclasses.replace(chapter_world, outer_steps=7998, eval_every=1333), 100)


def test_the_bridges_x4_point_of_fig2c_translates_to_run_theory():
    """The authors' code can run Fig. 2C at the scale bridge's x4 point (the twin of the bridge): every column at the
    point's sizes and rates, moved to the nearest world run_theory.py expresses (no warm-up, whole chunks of M)."""
    point = chapter_configs("teacher_student", "bridge-x4", [100], ["fig2c"])[1]["fig2c"]
    _, by_figure = twin.claim_configs("teacher_student", "bridge-x4", [100])
    assert len(by_figure["fig2c"]) == len(point) == 4  # Table A9 columns
    for ours, matched in zip(point, by_figure["fig2c"]):
        assert dataclasses.replace(ours, warmup_steps=0, outer_steps=12798, eval_every=2133) == matched
        t = twin.translate("teacher_student", matched, 100)
        assert (t.config["train_step"] * t.config["n_task"], t.config["log_every"]) == (12798, 2133)
        assert (t.config["meta_batch_size"], t.config["inner_step"]) == (ours.meta_batch, ours.inner_steps)
    with pytest.raises(twin.NotExpressible, match="warmup_steps = 313"):  # the point's own world has a warm-up
        twin.translate("teacher_student", dataclasses.replace(point[0], outer_steps=12798, eval_every=2133), 100)


def test_the_bridges_x4_point_of_fig3b_translates_to_run_fewshot_with_its_warm_up():
    """The authors' code can run Fig. 3B at the scale bridge's x4 point: every learner and support at the point's
    sizes and rates, its warm-up moved to the 100 steps run_fewshot.py fixes."""
    point = chapter_configs("hyperteacher", "bridge-x4", [100], ["fig3b"])[1]["fig3b"]
    _, by_figure = twin.claim_configs("hyperteacher", "bridge-x4", [100])
    assert len(by_figure["fig3b"]) == len(point) == 8  # four learners, two supports
    for ours, matched in zip(point, by_figure["fig3b"]):
        assert ours.warmup_steps != 100 and dataclasses.replace(ours, warmup_steps=100) == matched
        t = twin.translate("hyperteacher", matched, 100)
        assert t.config["meta_batch_size"] == ours.meta_batch and t.config["meta_model"] == twin.MODEL[ours.model][0]
    with pytest.raises(twin.NotExpressible, match=f"warmup_steps = {point[0].warmup_steps}"):
        twin.translate("hyperteacher", point[0], 100)


def test_teacher_student_twins_judge_fig2c_on_both_implementations(tmp_path, monkeypatch, store):
    _use_fake_driver(tmp_path, monkeypatch)
    small = dict(inner_schedule="constant", inner_lr=1e-2, outer_steps=12, eval_every=6)
    monkeypatch.setitem(teacher_student.CHAPTER.twin.matched, "smoke", {"fig2c": small})
    out = tmp_path / "twin.json"
    args = ["--reference", str(tmp_path), "--python", sys.executable, "--chapter", "teacher_student"]
    assert twin.main([*args, "--preset", "smoke", "--out", str(out), "--seeds", "3"]) == 0
    record = json.loads(out.read_text())
    n_configs = len(twin.claim_configs("teacher_student", "smoke", [3])[1]["fig2c"])
    assert record["matched_world"] == {"fig2c": small} and len(record["runs"]) == n_configs
    loaded = layout.load_twin(out)
    found = layout.judged(loaded)
    verdicts = {c.claim: c.verdict for c in found["3"]["authors'"] if c.figure == "Fig. 2C"}
    assert len(verdicts) == 2 and C.NOT_RUN not in verdicts.values()
    discrete = next(v for claim, v in verdicts.items() if "discrete" in claim)
    assert discrete == C.HOLDS  # the fake's connected discrete support aligns at 0.95, its disconnected one at 0.6
    ours = found["3"]["ours"]  # judged from the record's rows of ours at the matched world
    assert {c.figure for c in ours} >= {"Fig. 2C"} and all(
        c.verdict != C.NOT_RUN for c in ours if c.figure == "Fig. 2C"
    )
    # ours at the matched world sit beside the reference's, row by row
    ours = twin_tables.ours_by_set(loaded, type("Runs", (), {"seeds": (3,)})())
    assert len(ours["3"]) == n_configs and all(len(v["alignment"]) == 1 for v in ours["3"].values())
    table = twin_tables.runs_table(loaded, {}, ours)
    assert "| alignment: ours, seeds 3 | authors', seeds 3 |" in table and table.count("\n") == n_configs + 1


def test_goals_twins_judge_the_claims_at_the_matched_world(tmp_path, monkeypatch):
    out, args = _goals_smoke_twin(tmp_path, monkeypatch)
    assert twin.main([*args, "--jobs", "2"]) == 0
    record = json.loads(out.read_text())
    assert len(record["runs"]) == 8 and {r["figure"] for r in record["runs"].values()} == {"fig4ef"}
    loaded = layout.load_twin(out)
    found = layout.judged(loaded)["2020"]["authors'"]
    assert "Fig. A10" in {c.figure for c in found}  # judged on what the record holds
    run = next(iter(record["runs"].values()))
    assert run["world"]["grid"] == 7 and set(run["final"]["ood"]) == {"acc", "acc_all", "loss"}
    verdict = {c.claim: c.verdict for c in found if c.figure in ("Fig. 4E", "Fig. A9")}
    # the fake hypernetworks lead ANIL and MAML by 20 points of OOD accuracy (10 of optimal episodes) under random
    # support, and lose it under non-compositional support
    assert len(verdict) >= 4 and C.NOT_RUN not in verdict.values()
    assert verdict["Linear hnet: higher OOD step accuracy on held-out goal combinations than ANIL and MAML"] == C.HOLDS
    table = twin_tables.runs_table(loaded, {"hnet_linear": "Linear hnet"})
    assert "| fig4ef | Linear hnet | random | 16, 4 | 6 × 2 |" in table
    assert "optimal OOD episodes %: authors', seeds 2020" in table


def test_models_limits_which_reference_runs_train_and_bad_models_are_one_line(tmp_path, monkeypatch, capsys):
    out, args = _goals_smoke_twin(tmp_path, monkeypatch)
    assert twin.main([*args, "--models", "hnet_linear", "maml"]) == 0
    record = json.loads(out.read_text())
    assert {r["translation"]["config"]["name"] for r in record["runs"].values()} == {"hnet_linear", "maml"}
    assert len(record["runs"]) == 4  # two models, two supports, one seed
    with pytest.raises(SystemExit):
        twin.main([*args, "--models", "hnet_linear", "transformer"])
    assert "--models: goals's models are ['anil', 'hnet_deepmlp', 'hnet_linear', 'maml']" in capsys.readouterr().err


def test_ours_at_the_matched_world_keeps_each_configs_own_output(monkeypatch):
    # Fig. A10's first cell is Fig. 4E/F's linear hnet under random support: one config in two figures, trained once
    from compgen import dispatch, runner

    trained = []

    def fake_run(sec, configs, backend=None):
        trained.extend(configs)
        return [{"config": c} for c in configs]

    monkeypatch.setattr(dispatch, "train_or_load", fake_run)
    monkeypatch.setattr(runner, "load", lambda sec, c, **_: pytest.fail("loaded a config it was asked to train"))
    found = twin.train_ours("goals", "quick", [[2020]])["2020"]
    assert len(trained) == len(set(trained)) == len(found)
    assert all(output["config"] == cfg for cfg, output in found.items())


def test_ours_at_the_matched_world_trains_only_the_chosen_models(monkeypatch):
    from compgen import dispatch, runner

    trained, loaded = [], []
    fake_run = lambda sec, configs, backend=None: trained.extend(configs) or configs
    monkeypatch.setattr(dispatch, "train_or_load", fake_run)
    monkeypatch.setattr(runner, "load", lambda sec, c, **_: loaded.append(c))
    found = twin.train_ours("goals", "quick", [[2020]], models=["hnet_linear"])["2020"]
    assert trained and {c.model for c in trained} == {"hnet_linear"}
    assert loaded and {c.model for c in loaded} == {"anil", "maml", "hnet_deepmlp"}  # the others only if stored
    assert len(found) == len(trained) + len(loaded)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"chapter": "goals", "runs": {', "is not valid JSON"),
        ("[]", "holds list [], not a JSON object"),
        ('{"schema": 5, "chapter": "goals"}', "has schema 5, written by a newer compgen"),
    ],
)
def test_a_damaged_record_is_one_line_and_kept_untrained(text, expected, tmp_path, monkeypatch, capsys):
    out, args = _goals_smoke_twin(tmp_path, monkeypatch)
    monkeypatch.setattr(twin, "train_reference", lambda *a, **k: pytest.fail("trained on a damaged record"))
    out.write_text(text)
    assert twin.main(args) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith(f"error: {out}: twin record") and expected in message and "\n" not in message
    assert out.read_text() == text
