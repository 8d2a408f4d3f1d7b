"""Tests of compgen.analysis.counterexamples: exact students that fit the training tasks and fail OOD (App. A.3).

Sizes are small and every teacher has the default shapes, so each construction compiles once (compiling
dominates the run time) and the teacher initialisation compiles once per session; the OOD
thresholds are relative losses (loss / ½ mean y²), so they do not depend on the teacher's scale.
Fitting ẑ with only a few Adam steps can only over-estimate the best OOD loss, so the failure
thresholds are checked on the naive ẑ and on the fitted ẑ, and the fit must not be worse than naive.
"""

import functools

import jax
import numpy as np
import pytest

from compgen.analysis import counterexamples as ce
from compgen.tasks import support

FAST = ce.Fit(num_inputs=256, fit_inputs=128, fit_steps=60, restarts=0)
ZERO = 1e-10  # "zero to float precision" for a loss
# An exact student must equal its teacher to float32 round-off: full float32 products on any backend, in the tests
# (tests/conftest.py, full_precision) and in the module's fixtures, which are built before a test's fixture.
pytestmark = pytest.mark.usefixtures("full_precision")
HIGHEST = functools.partial(jax.default_matmul_precision, "highest")


@pytest.fixture(scope="module")
def two_modules():
    with HIGHEST():
        return ce.disconnected_two_modules(jax.random.key(0), num_tasks=4, fit=FAST)


@pytest.fixture(scope="module")
def permutation():
    with HIGHEST():
        return ce.disconnected_permutation(jax.random.key(1), num_tasks=6, fit=FAST)


@pytest.fixture(scope="module")
def lookup():
    # Table A9 column 1 (compositional and connected); default teacher shapes, so init compiles once
    with HIGHEST():
        return ce.overparameterised_lookup(jax.random.key(2), ood_masks="02;135", fit=FAST)


def test_two_modules_fits_training_tasks_and_fails_ood(two_modules):
    r = two_modules
    assert r["train_loss"].shape == (4,)
    assert r["train_loss"].max() < ZERO
    assert r["train_target_power"].min() > 0.01  # the training tasks are not trivial
    assert r["ood_relative_loss_naive"].min() > 0.05
    assert r["ood_relative_loss_fitted"].min() > 0.01
    assert (r["ood_loss_fitted"] <= r["ood_loss_naive"] * 1.05).all()


def test_two_modules_student_is_teacher_with_module_1_swapped(two_modules):
    teacher, student = two_modules["teacher"], two_modules["student"]
    np.testing.assert_array_equal(student["modules"][0], teacher["modules"][0])
    np.testing.assert_array_equal(student["modules"][1], teacher["modules"][1][:, ::-1])
    np.testing.assert_array_equal(student["readout"], np.ones((2, 1)))


def test_permutation_fits_training_tasks_and_fails_ood(permutation):
    r = permutation
    assert r["train_loss"].max() < ZERO
    assert r["train_target_power"].min() > 1e-4
    assert r["ood_relative_loss_naive"].min() > 0.05
    assert r["ood_relative_loss_fitted"].min() > 0.02
    # every OOD mask joins the two triangles {0,1,2} and {3,4,5}
    assert all(row[:3].any() and row[3:].any() for row in r["ood_masks"])
    assert r["components"] == [(0, 1, 2), (3, 4, 5)]


def test_permutation_construction(permutation):
    r = permutation
    teacher, student, perms = r["teacher"], r["student"], r["permutations"]
    for c, modules in enumerate(r["components"]):
        for m in modules:
            np.testing.assert_array_equal(student["modules"][m], teacher["modules"][m][:, perms[c]])
    assert not np.array_equal(perms[0], perms[1])
    # the readout is tied so that each permutation maps units to units with equal readout rows
    for perm in perms:
        np.testing.assert_array_equal(teacher["readout"][perm], teacher["readout"])


def test_lookup_fits_training_tasks_and_fails_ood(lookup):
    r = lookup
    num_train = r["train_masks"].shape[0]
    assert r["student"]["modules"].shape == (num_train, 16, num_train * 16)
    assert r["train_loss"].shape == (num_train,)
    assert r["train_loss"].max() < ZERO
    assert r["ood_masks"].tolist() == [[1, 0, 1, 0, 0, 0], [0, 1, 0, 1, 0, 1]]
    assert r["ood_relative_loss_naive"].min() > 0.05
    assert r["ood_relative_loss_fitted"].min() > 0.02
    # the naive latent reproduces the teacher latent as a combination of training latents
    np.testing.assert_allclose(r["ood_latents_student_naive"] @ r["train_latents"], r["ood_latents"], atol=1e-5)


def test_linearly_identified_student_generalises():
    r = ce.linearly_identified_student(jax.random.key(3), num_tasks=4, num_inputs=128)
    assert r["train_loss"].max() < ZERO
    assert r["ood_loss"].max() < ZERO
    assert r["ood_target_power"].min() > 1e-4
    assert r["condition_number"] < 1e3
    assert not np.allclose(r["mixing"], np.eye(6))  # a genuine re-mixing of the modules


def test_errors_name_the_parameter():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="masks must have disconnected support"):
        ce.disconnected_permutation(key, masks="01;12;23;34;45;50")
    with pytest.raises(ValueError, match="n_in must be an integer >= 4"):
        ce.disconnected_two_modules(key, n_in=3)
    with pytest.raises(ValueError, match="restarts must be an integer >= 0"):
        ce.disconnected_two_modules(key, fit=ce.Fit(restarts=-1))
    with pytest.raises(ValueError, match="distribution must be"):
        ce.disconnected_permutation(key, distribution="uniform")
    with pytest.raises(ValueError, match="ood_masks must have one entry per module"):
        ce.overparameterised_lookup(key, ood_masks=np.ones((1, 5), int))


def test_helpers():
    np.testing.assert_array_equal(ce.cycle_masks(np.eye(2, dtype=int), 5)[:, 0], [1, 0, 1, 0, 1])
    groups = ce.tied_groups(7, 3)
    assert [g.tolist() for g in groups] == [[0, 1, 2], [3, 4, 5], [6]]
    cross = ce.cross_component_masks(support.table_a9_masks(5))
    assert cross.shape == (9, 6)
    ood = ce.default_ood_masks(support.table_a9_masks(1))
    assert ood.shape == (15 - 6 + 20, 6)
