"""The fused teacher-student inner loop: the same random inputs bit for bit, the same ẑ as the ``lax.scan`` loop up
to float32 round-off (in Pallas' interpreter on a CPU), and a program that lowers to one Triton kernel for a GPU."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen import rng, section
from compgen.experiments import teacher_student as ts
from compgen.tasks import teacher, teacher_kernel

pytestmark = pytest.mark.usefixtures("full_precision")


def test_threefry_words_split_keys_and_uniforms_equal_jax_bit_for_bit():
    key = jax.random.key(2024)
    k0, k1 = jax.random.key_data(key).astype(jnp.uint32)
    split = jax.random.key_data(jax.random.split(key, 300))
    mine = jnp.stack(teacher_kernel.split_key(k0, k1, jnp.arange(300, dtype=jnp.uint32)), axis=-1)
    np.testing.assert_array_equal(mine, split)
    flat = jnp.arange(256 * 16, dtype=jnp.uint32).reshape(256, 16)
    np.testing.assert_array_equal(
        teacher_kernel.uniform_bits(k0, k1, flat), jax.random.bits(key, (256, 16), jnp.uint32)
    )
    for sampler in rng.SAMPLERS:  # both compiled: XLA fuses a product and a sum into one rounding, or not, alike
        expected = jax.jit(lambda k: rng.uniform(k, (256, 16), -1.5, 2.0, sampler))(key)
        mine = jax.jit(lambda f: teacher_kernel.uniform(k0, k1, f, -1.5, 2.0, sampler))(flat)
        np.testing.assert_array_equal(mine, expected)


def _case(**fields):
    """A teacher, a student and a task latent of a smoke config with ``fields``."""
    cfg = section.make_config(ts.SECTION, "smoke", **fields)
    run = jax.tree.map(lambda a: a[0], ts.run_arrays([cfg]))
    state = ts.init_run(cfg, run)
    z = teacher.sample_latents(jax.random.key(3), cfg.mask_array(), 2)
    return cfg, state, z


@pytest.mark.parametrize(
    "fields",
    [
        dict(n_in=16, teacher_hidden=16, batch=32, inner_steps=30, inner_lr=0.05, input_sampler="threefry"),
        dict(n_in=8, teacher_hidden=8, batch=16, inner_steps=20, inner_lr=0.2, inner_schedule="cosine"),  # padded
        dict(n_in=5, teacher_hidden=3, n_out=3, hidden_factor=1, module_factor=3, batch=16, inner_steps=12),  # odd
    ],
)
def test_the_kernel_infers_the_latent_of_the_scan_loop_for_a_batch_of_tasks(fields):
    """vmapped over two tasks, as the outer step calls it: ẑ and the first and last inner losses agree to round-off."""
    cfg, state, z = _case(**fields)
    keys = jax.random.split(jax.random.key(7), 2)
    scan = jax.vmap(lambda z_, k: ts.infer_latent(cfg, state["student"], state["teacher"], z_, state["zhat_init"], k))
    zhat, losses = scan(z, keys)
    fused_cfg = section.make_config(ts.SECTION, "smoke", **fields, fused_inner=True)
    fused = jax.vmap(
        lambda z_, k: ts.infer_latent(fused_cfg, state["student"], state["teacher"], z_, state["zhat_init"], k)
    )
    zhat_k, losses_k = fused(z, keys)
    assert losses_k.shape == (2, 2)
    np.testing.assert_allclose(zhat_k, zhat, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(losses_k[:, 0], losses[:, 0], rtol=1e-5)
    np.testing.assert_allclose(losses_k[:, 1], losses[:, -1], rtol=1e-5)
    assert not np.allclose(zhat, state["zhat_init"], atol=1e-3)  # the loop moved ẑ


def test_a_batch_that_is_no_power_of_two_is_refused_by_name():
    with pytest.raises(ValueError, match="batch"):
        teacher_kernel.infer_latent(
            jax.random.key(0),
            (jnp.zeros((4, 4)), jnp.zeros((4, 2))),
            (jnp.zeros((2, 4, 4)), jnp.zeros((4, 2))),
            jnp.zeros(2),
            teacher_kernel.Loop(batch=24, steps=2, lr=1.0),
        )
    with pytest.raises(ValueError, match="fused_inner.*batch=24"):
        section.make_config(ts.SECTION, "smoke", batch=24, fused_inner=True)


@pytest.mark.parametrize("sampler, schedule", [("threefry", "constant"), ("hash", "cosine")])
def test_the_paper_step_lowers_to_one_triton_kernel_over_tasks_and_runs(sampler, schedule):
    """The paper configuration's inner loops (and the CPU presets' sampler and schedule), vmapped over 64 tasks and
    12 runs, lower for an NVIDIA GPU (without one: JAX lowers across platforms) to a single Triton kernel whose grid
    is (tasks, runs)."""
    cfg = section.make_config(ts.SECTION, "paper", fused_inner=True)

    def loops(keys, weights, modules, readouts, z0):
        loop = teacher_kernel.Loop(cfg.batch, cfg.inner_steps, cfg.inner_lr, schedule, sampler)
        per_task = lambda k, w, m, r, z: teacher_kernel.infer_latent(k, (w, jnp.ones((16, 4))), (m, r), z, loop)
        return jax.vmap(jax.vmap(per_task, (0, 0, None, None, None)))(keys, weights, modules, readouts, z0)

    runs, tasks = 12, cfg.meta_batch
    args = (
        jax.random.split(jax.random.key(0), (runs, tasks)),
        jnp.zeros((runs, tasks, 16, 16)),
        jnp.zeros((runs, cfg.student_modules, 16, cfg.student_hidden)),
        jnp.zeros((runs, cfg.student_hidden, 4)),
        jnp.zeros((runs, cfg.student_modules)),
    )
    text = jax.jit(loops).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count("xla.gpu.triton") == 1
    grid = dict(re.findall(r"grid_([xyz]) = (\d+) : i32", text))
    assert (int(grid["x"]), int(grid["y"])) == (tasks, runs)
