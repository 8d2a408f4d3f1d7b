"""Splitting tasks or runs over devices; the two-device cases run in a subprocess with two CPU host devices."""

import os
import subprocess
import sys
import textwrap

import jax
import pytest

from compgen import devices

# A few steps of the hyperteacher (smoke preset, meta-batch 4) trained with the meta-batch on one device and
# split over two; prints the largest relative difference of the meta-parameters and of the step losses.
TWO_DEVICE_SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    from compgen import devices
    from compgen.experiments import hyperteacher as ht, hyperteacher_presets as P
    assert len(jax.devices()) == 2

    def train(model, split):
        cfg = P.make_config("smoke", model, seeds=(2020, 2021))
        with (devices.split_tasks() if split else devices.use_devices(jax.devices()[:1])):
            _, init, chunk, _ = ht.make_train([cfg])
            state, metrics = chunk(init(), 3)
        return jax.device_get((state["meta"], metrics["loss"]))

    for model in ("hnet_linear", "anil"):
        (one, loss_one), (two, loss_two) = train(model, False), train(model, True)
        rel = max(float(np.max(np.abs(a - b)) / (np.max(np.abs(a)) + 1e-12))
                  for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two)))
        print(model, "params", rel, "loss", float(np.max(np.abs(loss_one - loss_two) / np.abs(loss_one))))
    cfg = P.make_config("smoke", "anil", meta_batch=3)
    with devices.split_tasks():
        _, init, chunk, _ = ht.make_train([cfg])
        try:
            chunk(init(), 1)
        except ValueError as error:
            print("error:", error)
""")


def test_split_tasks_equals_one_device_and_checks_the_meta_batch():
    env = {**os.environ, "XLA_FLAGS": devices.host_devices_flag(2)}
    out = subprocess.run([sys.executable, "-c", TWO_DEVICE_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    for model in ("hnet_linear", "anil"):
        _, params, _, loss = lines[model].split()
        assert float(params) < 1e-4 and float(loss) < 1e-5, lines[model]  # float32 round-off only
    assert "meta_batch (3) must be a multiple of the number of devices" in lines["error:"]


def test_split_tasks_on_one_device_changes_nothing_and_excludes_use_devices():
    with devices.split_tasks(jax.devices()[:1]) as mesh:
        assert mesh is None and devices.task_mesh() is None
    with devices.split_tasks(jax.devices()[:1]), devices.use_devices():
        pass  # one device: no task mesh, so the run axis may still be sharded
    with devices.use_devices():
        with pytest.raises(ValueError, match="use_devices"):
            with devices.split_tasks():
                pass
    with pytest.raises(ValueError, match="at least one device"):
        with devices.split_tasks([]):
            pass
