"""Presets as data: how a config is layered and how a figure's grid expands."""

import dataclasses

import pytest

from compgen import catalog, params
from compgen.experiments import hyperteacher as HT
from compgen.experiments import teacher_student as ts
from compgen.section import PRESET_NAMES, Grid, differences_from_paper, figure_configs, make_config


def test_grid_expands_axes_outermost_then_cases():
    grid = Grid(fixed=dict(a=0), axes=dict(b=(1, 2), c=(3,)), cases=(dict(d=4), dict(d=5, e=6)))
    assert list(grid.points()) == [
        dict(a=0, b=1, c=3, d=4),
        dict(a=0, b=1, c=3, d=5, e=6),
        dict(a=0, b=2, c=3, d=4),
        dict(a=0, b=2, c=3, d=5, e=6),
    ]
    assert set(grid.varied()) == {"a", "b", "c", "d", "e"}  # every field the grid sets defines the experiment
    budget = Grid(fixed=dict(a=0, seeds=(1,), outer_steps=5, eval_every=5), axes=dict(b=(1, 2)))
    assert set(budget.varied()) == {"a", "b"}  # seeds and budget stay the user's


def test_a_figure_refuses_its_fixed_fields_and_model_picks_one_of_its_models():
    S = HT.SECTION
    with pytest.raises(params.ParameterError, match=r"hyperteacher fig3b: n_modules is set by experiment fig3b"):
        figure_configs(S, "fig3b", "paper", n_modules=5)
    configs = figure_configs(S, "fig3b", "smoke", model="anil", outer_steps=3, eval_every=3)
    assert configs and {c.model for c in configs} == {"anil"} and {c.outer_steps for c in configs} == {3}
    with pytest.raises(params.ParameterError, match=r"model must be one of the experiment's models"):
        figure_configs(S, "fig3cd", "smoke", model="anil")  # a figure of the hypernetworks only


def test_configs_layer_paper_then_preset_then_figure_then_overrides():
    S = HT.SECTION
    paper = make_config(S, "paper", "anil")
    quick = make_config(S, "quick", "anil")
    assert paper.hidden == 512 and quick.hidden == 128  # the preset's per-model value over the paper's
    assert quick.inner_lr == paper.inner_lr == 0.03  # kept from the paper where the preset says nothing
    assert make_config(S, "quick", "anil", hidden=64).hidden == 64
    fig3f = figure_configs(S, "fig3f", "quick")
    assert {c.max_hot for c in fig3f} == {2} and {c.hidden for c in fig3f} == {16, 32}
    assert figure_configs(S, "fig3b", "quick", models=("anil",)) == [
        make_config(S, "quick", "anil", split=s) for s in ("random", "non_compositional")
    ]


@pytest.mark.parametrize("name", list(catalog.SECTIONS))
def test_the_paper_config_is_the_class_defaults_with_the_models_paper_values(name):
    """One source for the paper's values: the config class's defaults, plus each model's row of the paper preset."""
    sec = catalog.get(name)
    assert not sec.presets["paper"].common
    for model in sec.models or (None,):
        paper = make_config(sec, "paper", model)
        own = dict(sec.presets["paper"].per_model.get(model, {}), **({"model": model} if model else {}))
        base = dict(sec.base_fields("paper", model, {})) if sec.base_fields else {}
        for f in dataclasses.fields(paper):
            expected = own.get(f.name, base.get(f.name, f.default))
            assert getattr(paper, f.name) == expected, (name, model, f.name)
    with pytest.raises(ValueError, match="belong in the config class's defaults"):
        dataclasses.replace(
            sec, presets={**sec.presets, "paper": dataclasses.replace(sec.presets["paper"], common={"seeds": (1,)})}
        )


def test_the_fields_a_figure_varies_cannot_be_overridden():
    with pytest.raises(params.ParameterError, match="split is set by experiment fig3b"):
        figure_configs(HT.SECTION, "fig3b", "smoke", split="random")
    with pytest.raises(params.ParameterError, match="masks is set by experiment fig2c"):
        figure_configs(ts.SECTION, "fig2c", "smoke", masks="0;1")
    assert {c.seeds for c in figure_configs(HT.SECTION, "fig3b", "smoke", seeds=(7,))} == {(7,)}


def test_models_builds_another_model_at_the_figures_points_with_its_own_settings():
    sec = catalog.get("preferences")
    grid = sec.preset("smoke").figures["figa8"]  # the linear hypernetwork only
    probe = figure_configs(sec, "figa8", "smoke", models=("hnet_deepmlp",))
    assert [c.model for c in probe] == ["hnet_deepmlp"] * len(list(grid.points()))
    assert probe[0] == make_config(sec, "smoke", "hnet_deepmlp", **next(iter(grid.points())))
    with pytest.raises(params.ParameterError, match="templates"):  # the figure's axes stay fixed
        figure_configs(sec, "figa8", "smoke", models=("hnet_deepmlp",), templates=4)


def test_unknown_names_list_the_allowed_ones():
    with pytest.raises(params.ParameterError, match="model must be one of"):
        make_config(HT.SECTION, "quick", "lstm")
    with pytest.raises(params.ParameterError, match="unknown field.*allowed:.*outer_steps"):
        make_config(HT.SECTION, "quick", "anil", outer_step=3)
    with pytest.raises(params.ParameterError, match="experiment must be one of"):
        figure_configs(HT.SECTION, "fig9", "quick")


def test_differences_from_the_paper_leave_out_what_picks_the_experiment():
    S = HT.SECTION
    assert differences_from_paper(S, make_config(S, "paper", "maml", split="connected", n_modules=6)) == []
    quick = make_config(S, "quick", "maml")
    fields = {name for name, _, _ in differences_from_paper(S, quick)}
    assert "outer_steps" in fields and "remat" not in fields and "split" not in fields
    assert all(dataclasses.is_dataclass(c) for c in figure_configs(S, "fig3e", "paper"))


def test_model_table_reads_rows_as_per_model_fields():
    from compgen.section import model_table

    assert model_table(("hidden", "lr"), anil=(512, 1e-3), maml=(64, None)) == {
        "anil": {"hidden": 512, "lr": 1e-3},
        "maml": {"hidden": 64, "lr": None},
    }
    with pytest.raises(ValueError, match="maml has 1 values for the 2 columns"):
        model_table(("hidden", "lr"), maml=(64,))


@pytest.mark.parametrize("name", tuple(catalog.SECTIONS))
def test_a_cpu_compiles_the_small_presets_at_level_1_and_paper_at_xlas_default(name):
    """No preset sets ``xla_opt_level``; a CPU chooses it by size (compgen.devices.resolve), as the presets did."""
    from compgen import devices

    section = catalog.get(name)
    for preset in ("smoke", "quick", "paper"):
        configs = [c for f in section.figures(preset) for c in figure_configs(section, f, preset)]
        assert {c.xla_opt_level for c in configs} == {None}
        levels = {devices.resolve(section, c, backend="cpu").xla_opt_level for c in configs}
        assert levels == ({None} if preset == "paper" else {devices.CPU_SMALL_OPT_LEVEL}), preset


@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_every_figure_of_every_section_builds_its_configs_at_every_preset(preset):
    """Presets layer over ``paper``, so a paper value a smaller preset cannot take (a train_chunk that does not divide
    its meta-batch) fails here, not in the middle of a book build."""
    for name in catalog.SECTIONS:
        section = catalog.get(name)
        for figure in section.figures(preset):
            assert figure_configs(section, figure, preset), (name, figure)


@pytest.mark.parametrize("name", list(catalog.SECTIONS))
def test_a_section_gives_the_flops_of_one_outer_step_and_a_run_costs_steps_times_seeds(name):
    """FLOPs per step are the section's own (bench, sharding rule); only the paper's sizes reach the sharding size."""
    from compgen import devices

    sec = catalog.get(name)
    for preset in ("quick", "paper"):
        for cfg in figure_configs(sec, sec.figures(preset)[0], preset):
            flops = sec.flops_per_step(cfg)
            assert 0 < flops < 1e13
            assert sec.cost(cfg) == flops * cfg.outer_steps * len(cfg.seeds)
            assert (flops >= devices.SHARD_MIN_FLOP) == (preset == "paper"), (name, preset, flops)
