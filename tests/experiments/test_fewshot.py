"""The few-shot core's learner-generic parts: FLOPs derived from XLA's cost analysis, labels from the registry."""

import pytest

from compgen import catalog
from compgen.experiments import fewshot
from compgen.models import hypernetwork
from compgen.section import make_config


def hand_counted_flops(cfg, support_points, query_points):
    """The paper's learners' FLOPs per outer step counted by hand: multiply-adds of the base MLP, of the
    hypernetwork's weight generation (T x its output for the linear one, a 256-wide last layer for the nonlinear
    one) and of ANIL's head; a backward pass twice the forward, the meta-backward twice the inner loop."""
    sizes = [cfg.n_in] + [cfg.hidden] * cfg.num_hidden + [cfg.n_out]
    mlp_macs = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    generation, feature, head = 0, 0, mlp_macs
    if cfg.model.startswith("hnet"):
        width = cfg.n_templates if cfg.model == "hnet_linear" else hypernetwork.GENERATOR_WIDTH
        generation = width * sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))
    if cfg.model == "anil":
        feature, head = mlp_macs - cfg.hidden * cfg.n_out, cfg.hidden * cfg.n_out
    batch = cfg.inner_batch or support_points
    inner = cfg.inner_steps * 3 * (batch * head + generation)
    per_task = 3 * inner + 3 * (support_points + query_points) * feature + 3 * (query_points * head + generation)
    return 2.0 * per_task * cfg.meta_batch


@pytest.mark.parametrize("section", ["hyperteacher", "preferences", "goals"])
@pytest.mark.parametrize("model", fewshot.MODELS)
def test_derived_flops_match_the_hand_count_of_the_papers_learners(section, model):
    """XLA counts every multiply-add the hand count does, plus the elementwise work (activations, biases, the
    embeddings' normalisation): within 15 % above it at the paper's sizes."""
    sec = catalog.get(section)
    cfg = make_config(sec, "paper", model)
    points = {"hyperteacher": (cfg.shots_support, cfg.shots_query)}.get(section)
    if points is None:
        steps = cfg.horizon if section == "preferences" else cfg.demo_length
        points = (steps * cfg.shots_support, steps * cfg.shots_query)
    derived, by_hand = fewshot.flops_per_step(cfg, *points), hand_counted_flops(cfg, *points)
    assert by_hand <= derived * 1.001 and derived < 1.15 * by_hand, derived / by_hand


def test_a_learners_label_lists_the_fields_that_size_it():
    sec = catalog.get("hyperteacher")
    assert fewshot.learner_text(make_config(sec, "paper", "hnet_linear")).startswith("Linear hnet (hidden 3x")
    assert ", T=" in fewshot.learner_text(make_config(sec, "paper", "hnet_deepmlp"))
    assert "T=" not in fewshot.learner_text(make_config(sec, "paper", "maml"))
