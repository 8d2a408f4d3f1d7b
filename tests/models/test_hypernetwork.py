from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import models
from compgen.models import count_params, hypernetwork
from compgen.params import ParameterError

PAPER_LEARNERS = ("hnet_linear", "hnet_deepmlp", "anil", "maml")


def make_model(name, n_in, n_out, hidden, num_hidden, n_templates=0):
    """The registered learner ``name`` built for a config holding these sizes."""
    sizes = SimpleNamespace(n_in=n_in, n_out=n_out, hidden=hidden, num_hidden=num_hidden, n_templates=n_templates)
    return models.get(name, "fewshot").build(sizes)


# spec §2.6: meta-parameter counts of the hyperteacher models at M = 16, T = 64
PAPER_COUNTS = {
    "hnet_deepmlp": (128, 648_192),
    "hnet_linear": (128, 1_262_336),
    "anil": (512, 538_120),
    "maml": (384, 305_288),
}


@pytest.mark.parametrize("name", PAPER_LEARNERS)
def test_meta_parameter_counts_match_the_paper(name):
    hidden, expected = PAPER_COUNTS[name]
    model = make_model(name, n_in=16, n_out=8, hidden=hidden, num_hidden=3, n_templates=64)
    params = jax.eval_shape(model.init, jax.random.key(0))
    assert count_params(params) == expected


def test_fast_parameters_are_the_papers():
    key = jax.random.key(0)
    linear = make_model("hnet_linear", 16, 8, 32, 3, 12)
    params = linear.init(key)
    fast = linear.fast_init(params)
    assert [fast["embeddings"][g].shape for g in ("input", "hidden", "output")] == [(1, 12), (2, 12), (1, 12)]
    np.testing.assert_array_equal(fast["bias"], 0.0)  # reset to zero for every task, not meta-learned
    deep = make_model("hnet_deepmlp", 16, 8, 32, 3, 12)
    assert set(deep.fast_init(deep.init(key))) == {"embeddings"}  # no fast output bias
    anil = make_model("anil", 16, 8, 32, 3)
    assert jax.tree.structure(anil.fast_init(anil.init(key))) == jax.tree.structure({"w": 0, "b": 0})
    maml = make_model("maml", 16, 8, 32, 3)
    assert count_params(maml.fast_init(maml.init(key))) == count_params(maml.init(key))


def test_embedding_normalisation_has_norm_sqrt_t_and_constant_scale_in_gradients():
    e = jnp.array([3.0, 4.0, 0.0, 0.0])
    np.testing.assert_allclose(jnp.linalg.norm(hypernetwork.normalise_embedding(e)), 2.0, rtol=1e-6)
    # the scale is a constant: the Jacobian is sqrt(T)/|e| times the identity
    jac = jax.jacobian(hypernetwork.normalise_embedding)(e)
    np.testing.assert_allclose(jac, np.eye(4) * 2.0 / 5.0, rtol=1e-6)


@pytest.mark.usefixtures("full_precision")  # compares two formulations: full float32 on any backend
def test_hypernetwork_output_is_invariant_to_embedding_scale():
    model = make_model("hnet_linear", 5, 3, 8, 3, 6)
    params = model.init(jax.random.key(1))
    fast = model.fast_init(params)
    x = jax.random.normal(jax.random.key(2), (4, 5))
    scaled = {**fast, "embeddings": jax.tree.map(lambda e: 3.0 * e, fast["embeddings"])}
    np.testing.assert_allclose(model.apply(params, fast, x), model.apply(params, scaled, x), rtol=1e-5)


def test_the_paper_learners_are_registered_in_the_papers_order():
    assert models.names("fewshot")[:4] == PAPER_LEARNERS
    assert models.names("incontext")[:3] == ("kv_memory", "transformer", "bottleneck")


def test_unknown_model_wrong_kind_and_bad_sizes_name_the_parameter():
    with pytest.raises(ParameterError, match="model must be one of .*'maml'.* or an import path"):
        make_model("nope", 16, 8, 32, 3)
    with pytest.raises(ParameterError, match="'transformer' is an in-context learner"):
        make_model("transformer", 16, 8, 32, 3)
    with pytest.raises(ValueError, match="n_templates"):
        make_model("hnet_linear", 16, 8, 32, 3, 0)
    with pytest.raises(ValueError, match="num_hidden must be >= 2"):
        make_model("hnet_deepmlp", 16, 8, 32, 1, 4)
