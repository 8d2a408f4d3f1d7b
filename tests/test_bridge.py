"""The scale bridge: a path from each quick config to the paper's, its points named by their multiple of the quick
compute, with the preset's configs at its two ends."""

import dataclasses
import math

import pytest

from compgen import bridge, catalog, params, section

FIGURES = [(name, figure) for name, sec in catalog.SECTIONS.items() for figure in sec.figures("quick")]


@pytest.mark.parametrize("name, figure", FIGURES)
def test_the_paths_ends_are_the_quick_and_the_paper_configs(name, figure):
    sec = catalog.SECTIONS[name]
    quick = section.figure_configs(sec, figure, "quick")
    assert bridge.figure_configs(sec, figure, "bridge-x1") == quick
    for q in quick:
        paper = bridge.paper_end(sec, q)
        assert bridge.at(sec, q, 0.0) == q and bridge.at(sec, q, 1.0) == paper
        beyond = math.ceil(bridge.paper_multiple(sec, q)) + 1
        assert bridge.point(sec, q, beyond) == paper
        kept = {k: getattr(q, k) for k in sec.experiment_fields if hasattr(q, k) and k != "model"}
        assert paper == section.make_config(sec, "paper", getattr(q, "model", None), **kept)


def test_a_point_reaches_its_multiple_moving_each_field_by_its_rule():
    sec = catalog.SECTIONS["teacher_student"]
    for q in section.figure_configs(sec, "fig2c", "quick"):
        p, paper = bridge.point(sec, q, 16), bridge.paper_end(sec, q)
        assert abs(math.log(bridge.multiple(sec, q, p) / 16)) < math.log(1.1)
        rules = bridge.moving(sec, q, paper)
        assert rules["outer_steps"] == rules["meta_batch"] == rules["inner_lr"] == "geometric"
        assert rules["warmup_steps"] == "linear" and rules["input_sampler"] == rules["eval_tasks"] == "held"
        assert p.input_sampler == q.input_sampler and p.eval_tasks == q.eval_tasks  # held until the paper's end
        for name in ("meta_batch", "batch", "inner_steps", "outer_steps"):
            assert getattr(q, name) < getattr(p, name) < getattr(paper, name), name
        assert paper.inner_lr < p.inner_lr < q.inner_lr and 0 < p.warmup_steps < q.warmup_steps
        assert p.outer_steps % p.eval_every == 0 and p.outer_steps // p.eval_every == q.outer_steps // q.eval_every
        assert p.eval_every % bridge.STEP_GRAIN == 0
        assert (p.masks, p.distribution, p.seeds) == (q.masks, q.distribution, q.seeds)


def test_the_preferences_world_is_held_until_the_papers_end():
    sec = catalog.SECTIONS["preferences"]
    q = section.figure_configs(sec, "fig4b", "quick")[0]
    p = bridge.point(sec, q, 16)
    for name in bridge.HELD["preferences"][0]:
        assert getattr(p, name) == getattr(q, name), name
    assert p.meta_batch > q.meta_batch and p.outer_steps > q.outer_steps


def test_points_are_named_by_their_multiple_and_bad_names_are_other_presets():
    assert bridge.parse("bridge-x4") == 4 and bridge.point_name(16) == "bridge-x16"
    for other in ("quick", "bridge-x0", "bridge-x", "bridge-x4.5", "bridge-x-4", "bridge-x01"):
        assert bridge.parse(other) is None, other
    sec = catalog.SECTIONS["teacher_student"]
    with pytest.raises(params.ParameterError, match="preset must be one of"):
        bridge.figure_configs(sec, "fig2c", "bridge-x0")
    q = section.figure_configs(sec, "fig2c", "quick")[0]
    with pytest.raises(params.ParameterError, match="at least 1"):
        bridge.point(sec, q, 0.5)
    assert dataclasses.replace(q) == bridge.point(sec, q, 1)
