"""The paper's failure cases (App. A.3), built exactly: students that fit every training task yet fail OOD.

Each function constructs a teacher and a student by hand (no training) and measures the task loss
``½ · mean((ŷ − y)²)`` over a batch of inputs (App. C.1), on training tasks and on out-of-distribution
(OOD) tasks. On training tasks the student uses a latent ``ẑ`` that we write down; on OOD tasks we
report the latent a naive reader would guess *and* the best latent found by Adam, so a nonzero OOD loss
means no ``ẑ`` we could find fits, not merely that we guessed badly.

* :func:`disconnected_two_modules` — the paper's tiny example: two modules, two hidden units, masks
  ``{0}`` and ``{1}``; the student swaps the hidden units of module 1 only.
* :func:`disconnected_permutation` — the same failure at the size of Table A9 (M = 6, h = 16): every
  connected component of the support gets its own permutation of hidden units.
* :func:`overparameterised_lookup` — a student with one module (and one block of hidden units) per
  training task, a look-up table of the training tasks.
* :func:`linearly_identified_student` — the positive control of Theorem 2: modules re-mixed by an
  invertible matrix and hidden units permuted consistently; it fits training *and* OOD tasks.

All functions are pure given their PRNG key and return plain dicts of numpy arrays and floats.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from compgen.metrics import half_mse
from compgen.tasks import support
from compgen.tasks.teacher import (
    apply_teacher,
    continuous_latents,
    discrete_latents,
    generated_weight,
    init_teacher,
    sample_inputs,
)

__all__ = [
    "Fit",
    "task_losses",
    "target_power",
    "fit_latents",
    "cross_component_masks",
    "default_ood_masks",
    "tied_groups",
    "cycle_masks",
    "disconnected_two_modules",
    "disconnected_permutation",
    "overparameterised_lookup",
    "linearly_identified_student",
]


# --------------------------------------------------------------------------------------------------
# Losses and latent inference
# --------------------------------------------------------------------------------------------------


def task_losses(student, teacher, z_student, z_teacher, x):
    """Loss of each task: z_student (tasks, T), z_teacher (tasks, M), x (batch, n) -> (tasks,)."""

    def one(zs, zt):
        return half_mse(apply_teacher(student, zs, x), apply_teacher(teacher, zt, x))

    return jax.vmap(one)(z_student, z_teacher)


def target_power(teacher, z_teacher, x):
    """``½ · mean(y²)`` per task, the loss of always predicting 0: (tasks, M) -> (tasks,)."""
    return jax.vmap(lambda z: 0.5 * jnp.mean(apply_teacher(teacher, z, x) ** 2))(z_teacher)


def fit_latents(student, teacher, z_teacher, z_init, x, steps=300, learning_rate=0.03):
    """Infer the student latent of each task by Adam (cosine-decayed lr) on a fixed input batch.

    z_teacher (tasks, M), z_init (tasks, T), x (batch, n) -> (ẑ (tasks, T), loss curve (tasks, steps)).
    Only ẑ is optimised; student and teacher parameters are fixed. ``steps`` must be a Python int
    (static under ``jax.jit``).
    """
    optimiser = optax.adam(optax.cosine_decay_schedule(learning_rate, steps, alpha=1e-2))
    targets = jax.vmap(lambda z: apply_teacher(teacher, z, x))(z_teacher)

    def one(z0, y):
        def loss(z):
            return half_mse(apply_teacher(student, z, x), y)

        def step(carry, _):
            z, state = carry
            value, grad = jax.value_and_grad(loss)(z)
            updates, state = optimiser.update(grad, state, z)
            return (optax.apply_updates(z, updates), state), value

        (z, _), curve = jax.lax.scan(step, (z0, optimiser.init(z0)), None, length=steps)
        return z, curve

    return jax.vmap(one)(z_init, targets)


def _best_fit(key, student, teacher, z_teacher, z_naive, x_fit, fit, learning_rate):
    """Adam from the naive latent and from ``fit.restarts`` random ones; keep the best per task."""
    steps = fit.fit_steps
    if not fit.restarts:
        return fit_latents(student, teacher, z_teacher, z_naive.astype(jnp.float32), x_fit, steps, learning_rate)
    scale = 1.0 / np.sqrt(z_naive.shape[-1])
    random_inits = scale * jax.random.normal(key, (fit.restarts,) + z_naive.shape)
    inits = jnp.concatenate([z_naive[None].astype(jnp.float32), random_inits])  # (1 + restarts, tasks, T)
    z_all, curves = jax.vmap(lambda z0: fit_latents(student, teacher, z_teacher, z0, x_fit, steps, learning_rate))(
        inits
    )
    finals = jax.vmap(lambda z: task_losses(student, teacher, z, z_teacher, x_fit))(z_all)  # (R, tasks)
    best = jnp.argmin(finals, axis=0)
    tasks = jnp.arange(best.shape[0])
    return z_all[best, tasks], curves[best, tasks]


def _evaluate(keys, student, teacher, latents, fit, learning_rate, z_train_student=None, z_ood_naive=None):
    """Train loss at the written-down ẑ; OOD loss at the naive and at the fitted ẑ; with the teacher, student and
    latents in the returned dict.

    ``latents`` = (z_train, z_ood), the teacher's; ``fit`` (:class:`Fit`, its ``learning_rate`` given traced): ẑ is
    fitted on ``fit.fit_inputs`` inputs; every loss is measured on ``fit.num_inputs`` fresh ones. The student's
    written-down latents default to the teacher's (``z_train_student``, ``z_ood_naive``).
    """
    z_train, z_ood = latents
    num_inputs, fit_inputs = fit.num_inputs, fit.fit_inputs
    z_train_student = z_train if z_train_student is None else z_train_student
    z_ood_naive = z_ood if z_ood_naive is None else z_ood_naive
    key_x, key_restart = keys
    x = sample_inputs(key_x, fit_inputs + num_inputs, teacher["modules"].shape[1])
    x_fit, x_eval = x[:fit_inputs], x[fit_inputs:]
    z_fit, curve = _best_fit(key_restart, student, teacher, z_ood, z_ood_naive, x_fit, fit, learning_rate)
    # one vmapped pass over [train; OOD naive; OOD fitted] keeps the compiled program small
    z_student = jnp.concatenate([z_train_student, z_ood_naive, z_fit]).astype(jnp.float32)
    z_teacher = jnp.concatenate([z_train, z_ood, z_ood])
    losses = task_losses(student, teacher, z_student, z_teacher, x_eval)
    power = target_power(teacher, z_teacher, x_eval)
    n_train, n_ood = z_train.shape[0], z_ood.shape[0]
    out = {
        "train_loss": losses[:n_train],
        "train_target_power": power[:n_train],
        "ood_loss_naive": losses[n_train : n_train + n_ood],
        "ood_loss_fitted": losses[n_train + n_ood :],
        "ood_target_power": power[n_train : n_train + n_ood],
        "train_latents_student": z_train_student,
        "ood_latents_student_naive": z_ood_naive,
        "ood_latents_student_fitted": z_fit,
        "ood_fit_curve": curve,
    }
    out["ood_relative_loss_naive"] = out["ood_loss_naive"] / out["ood_target_power"]
    out["ood_relative_loss_fitted"] = out["ood_loss_fitted"] / out["ood_target_power"]
    out.update(teacher=teacher, student=student, train_latents=z_train, ood_latents=z_ood)
    return out


# These programs are small and run for about a second; on a CPU, XLA's backend optimisation (mostly of the
# random-number kernels) costs more compile time than it saves at run time, so it is switched off here.
_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0}


def _check_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Fit:
    """How a student's OOD latents are searched and its losses measured: Adam fits ẑ on ``fit_inputs`` inputs for
    ``fit_steps`` steps at ``learning_rate``, from the naive ẑ and from ``restarts`` random starts; every loss is
    measured on ``num_inputs`` fresh inputs. Checked when made (one line naming the field)."""

    num_inputs: int = 1024
    fit_inputs: int = 256
    fit_steps: int = 300
    learning_rate: float = 0.03
    restarts: int = 2

    def __post_init__(self):
        for name in ("num_inputs", "fit_inputs", "fit_steps"):
            object.__setattr__(self, name, _check_int(name, getattr(self, name)))
        object.__setattr__(self, "restarts", _check_int("restarts", self.restarts, minimum=0))
        if not float(self.learning_rate) > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate!r}")
        object.__setattr__(self, "learning_rate", float(self.learning_rate))

    @property
    def shape(self) -> Fit:
        """The fit without its learning rate: what a compiled program is specialised on (the rate is traced)."""
        return dataclasses.replace(self, learning_rate=1.0)


def _as_masks(masks, n_modules, name):
    if isinstance(masks, str):
        try:
            return support.parse_masks(masks, n_modules)
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
    return support.validate_masks(masks, n_modules, name=name)


def _split(key):
    """The four keys of every construction (teacher, latents, inputs, extra), split outside ``jit``.

    Random draws dominate the CPU compile time of these small programs, so every construction splits its
    key the same way, eagerly, and the compiled split is shared.
    """
    return jax.random.split(key, 4)


def _to_numpy(tree):
    return jax.tree.map(np.asarray, tree)


def cycle_masks(masks, num):
    """``num`` rows: the masks repeated in order, so every family appears equally often: (num, M)."""
    masks = np.asarray(masks)
    return masks[np.arange(num) % masks.shape[0]]


def _latents(key, train_rows, ood_rows, distribution):
    """Train latents (``distribution``) and OOD latents (continuous) for fixed mask rows, one random draw."""
    z = continuous_latents(key, jnp.concatenate([train_rows, ood_rows]).astype(jnp.float32))
    z_train = z[: train_rows.shape[0]] if distribution == "continuous" else discrete_latents(train_rows)
    return z_train, z[train_rows.shape[0] :]


# --------------------------------------------------------------------------------------------------
# (a) Disconnected support
# --------------------------------------------------------------------------------------------------


@partial(jax.jit, compiler_options=_COMPILER_OPTIONS, static_argnames=("n_in", "fit"))
def _two_modules_core(keys, train_rows, ood_rows, n_in, fit, learning_rate):
    key_vec, key_latents = keys[0], keys[1]
    a, b, c, d = jax.random.normal(key_vec, (4, n_in))
    teacher = {"modules": jnp.stack([jnp.stack([a, b], -1), jnp.stack([c, d], -1)]), "readout": jnp.ones((2, 1))}
    student = {"modules": jnp.stack([jnp.stack([a, b], -1), jnp.stack([d, c], -1)]), "readout": jnp.ones((2, 1))}
    latents = _latents(key_latents, train_rows, ood_rows, "continuous")
    return _evaluate(keys[2:], student, teacher, latents, fit, learning_rate)


def disconnected_two_modules(key, n_in=4, num_tasks=8, fit: Fit = Fit()):
    """The paper's App. A.3 example: two modules, two hidden units, one output, masks {0} and {1}.

    Teacher: four random (so a.s. linearly independent) vectors ``a, b, c, d`` in R^n_in; module 0 gives
    the two hidden units the input weights ``(a, b)``, module 1 gives ``(c, d)``; both output weights are 1.
    Student: the same, except that module 1 gives ``(d, c)`` — its hidden units are swapped. Because the
    output weights are equal, the swap leaves every task of either family unchanged, but on a task mixing
    both modules the student computes ``relu(a+d) + relu(b+c)`` instead of ``relu(a+c) + relu(b+d)``.

    Training tasks: ``num_tasks`` continuous latents (Algorithm 1, masks {0}, {1} cycled), student ẑ = z.
    OOD tasks: ``num_tasks`` continuous latents from mask {0, 1}; ẑ = z ("naive") and ẑ fitted by Adam
    from z and from random starts (:class:`Fit`).
    Returns a dict of numpy arrays: ``teacher``/``student`` params, ``train_masks``, ``ood_masks``,
    ``train_latents``, ``ood_latents``, per-task ``train_loss``, ``ood_loss_naive``, ``ood_loss_fitted``,
    ``ood_relative_loss_*`` (loss / ½ mean y²), the fitted latents and Adam loss curves.
    """
    _check_int("n_in", n_in, minimum=4)  # four independent vectors need n_in >= 4
    _check_int("num_tasks", num_tasks)
    train_masks, ood_masks = support.parse_masks("0;1", 2), support.parse_masks("01", 2)
    out = _two_modules_core(
        _split(key),
        jnp.asarray(cycle_masks(train_masks, num_tasks)),
        jnp.asarray(cycle_masks(ood_masks, num_tasks)),
        int(n_in),
        fit.shape,
        fit.learning_rate,
    )
    out = _to_numpy(out)
    out.update(train_masks=train_masks, ood_masks=ood_masks)
    return out


def tied_groups(n_hidden, group_size):
    """Consecutive groups of hidden units of size ``group_size`` (the last may be smaller): list of arrays."""
    return [np.arange(s, min(s + group_size, n_hidden)) for s in range(0, n_hidden, group_size)]


def cross_component_masks(masks, n_modules=None):
    """All 2-hot masks whose two modules lie in different support components: (num, M) int32.

    A module used by no mask counts as a component of its own.
    """
    masks = support.validate_masks(masks, n_modules)
    comp_of = {m: c for c, mods in enumerate(support.module_components(masks)) for m in mods}
    pairs = [
        row
        for row in support.all_khot_masks(masks.shape[1], 2)
        if len({comp_of.get(int(i), -1 - int(i)) for i in np.flatnonzero(row)}) == 2
    ]
    if not pairs:
        raise ValueError("masks must have at least two support components to build cross-component masks")
    return np.stack(pairs)


@partial(jax.jit, compiler_options=_COMPILER_OPTIONS, static_argnames=("distribution", "fit"))
def _permutation_core(keys, teacher, train_rows, ood_rows, permutation, distribution, fit, learning_rate):
    """``permutation`` = (tie, module_perm): the teacher's readout rows tied and the student's hidden units per
    module."""
    tie, module_perm = permutation
    key_latents = keys[1]
    teacher = {"modules": teacher["modules"], "readout": teacher["readout"][tie]}
    student = {
        "modules": jax.vmap(lambda w, p: w[:, p])(teacher["modules"], module_perm),
        "readout": teacher["readout"],
    }
    latents = _latents(key_latents, train_rows, ood_rows, distribution)
    return _evaluate(keys[2:], student, teacher, latents, fit, learning_rate)


def _component_permutations(components, n_modules, n_hidden):
    """The hidden-unit permutations of :func:`disconnected_permutation`: ``tie`` (n_hidden,), the readout row each
    unit copies (the first unit of its group of :func:`tied_groups`); ``permutations`` (C, n_hidden), component c's
    units with every group rolled by c places; ``module_perm`` (n_modules, n_hidden), each module's permutation (its
    component's, the identity for modules of no component)."""
    groups = tied_groups(n_hidden, len(components))
    tie = np.concatenate([np.full(len(g), g[0]) for g in groups])
    permutations = np.stack([np.concatenate([np.roll(g, -c) for g in groups]) for c in range(len(components))])
    module_perm = np.tile(np.arange(n_hidden), (n_modules, 1))
    for c, modules in enumerate(components):
        module_perm[list(modules)] = permutations[c]
    return tie, permutations, module_perm


def disconnected_permutation(
    key,
    masks="01;12;20;34;45;53",
    distribution="continuous",
    n_in=16,
    n_hidden=16,
    n_out=4,
    num_tasks=32,
    fit: Fit = Fit(),
):
    """Disconnected support at Table A9 size: a different hidden-unit permutation per support component.

    ``masks`` (a :func:`~compgen.tasks.support.parse_masks` string or a (num_masks, M) array; default
    Table A9 column 5, two triangles) must split into C >= 2 components. Teacher: :func:`init_teacher`,
    except that its readout rows are **tied** within consecutive groups of C hidden units (each unit copies
    the readout row of the first unit of its group). Student: for every module m of component c, the
    teacher's module m with the hidden units of every group rolled by c places; readout identical.
    Within component c the student is the teacher with its hidden units permuted, so it fits every task of
    that component exactly — but only because the permuted units carry equal readout rows: with a shared,
    untied readout no per-component permutation preserves the function. Modules used by no mask are copied.

    Training tasks: ``num_tasks`` latents from ``masks`` cycled in order (``distribution``), student ẑ = z.
    OOD tasks: ``num_tasks`` continuous latents from the 2-hot masks that join two components (cycled).
    Returns what :func:`disconnected_two_modules` returns, plus ``components`` (modules per component),
    ``permutations`` (C, n_hidden) and ``tie`` (n_hidden,) readout-row index.
    """
    masks = _as_masks(masks, 6 if isinstance(masks, str) else None, "masks")
    if distribution not in ("continuous", "discrete"):
        raise ValueError(f"distribution must be 'continuous' or 'discrete', got {distribution!r}")
    components = support.module_components(masks)
    if len(components) < 2:
        raise ValueError(
            "masks must have disconnected support (at least 2 components) for this counterexample, "
            f"got the connected set {support.masks_to_string(masks)!r}"
        )
    for name, value in (("n_in", n_in), ("n_out", n_out), ("num_tasks", num_tasks)):
        _check_int(name, value)
    _check_int("n_hidden", n_hidden, minimum=2)
    n_modules = masks.shape[1]
    tie, permutations, module_perm = _component_permutations(components, n_modules, n_hidden)
    ood_masks = cross_component_masks(masks)
    keys = _split(key)
    teacher = init_teacher(keys[0], int(n_in), int(n_hidden), int(n_out), n_modules)  # eager: compiled once per shape
    out = _permutation_core(
        keys,
        teacher,
        jnp.asarray(cycle_masks(masks, num_tasks)),
        jnp.asarray(cycle_masks(ood_masks, num_tasks)),
        (jnp.asarray(tie), jnp.asarray(module_perm)),
        distribution,
        fit.shape,
        fit.learning_rate,
    )
    out = _to_numpy(out)
    out.update(train_masks=masks, ood_masks=ood_masks, components=components, permutations=permutations, tie=tie)
    return out


# --------------------------------------------------------------------------------------------------
# (b) Overparameterised student
# --------------------------------------------------------------------------------------------------


def default_ood_masks(masks, n_modules=None, max_k=3):
    """All masks with 2..max_k active modules that are not training masks: (num, M) int32."""
    masks = support.validate_masks(masks, n_modules)
    train = {tuple(row) for row in masks.tolist()}
    candidates = support.masks_up_to_k(masks.shape[1], max_k)
    return np.stack([row for row in candidates if row.sum() >= 2 and tuple(row.tolist()) not in train])


@partial(jax.jit, compiler_options=_COMPILER_OPTIONS, static_argnames=("fit",))
def _lookup_core(keys, teacher, masks, ood_masks, fit, learning_rate):
    _, n_in, n_hidden = teacher["modules"].shape
    z_train = discrete_latents(masks)  # (K, M)
    num_train = z_train.shape[0]
    weights = jax.vmap(lambda z: generated_weight(teacher["modules"], z))(z_train)  # (K, n, h)
    blocks = jnp.einsum("kj,knh->knjh", jnp.eye(num_train), weights)  # module k lives in block k only
    student = {
        "modules": blocks.reshape(num_train, n_in, num_train * n_hidden),
        "readout": jnp.tile(teacher["readout"], (num_train, 1)),
    }
    z_ood = discrete_latents(ood_masks)
    naive = jnp.linalg.lstsq(z_train.T, z_ood.T)[0].T  # (tasks, K) with sum_k naive_k z_k = z
    return _evaluate(keys[2:], student, teacher, (z_train, z_ood), fit, learning_rate, jnp.eye(num_train), naive)


def overparameterised_lookup(
    key,
    masks="0;1;2;3;4;5;01;12;23;34;45;50",
    ood_masks=None,
    n_in=16,
    n_hidden=16,
    n_out=4,
    fit: Fit = Fit(),
):
    """A student with one module per training task (discrete latents): a look-up table, not a composition.

    With K training masks (default Table A9 column 1: compositional and connected) the discrete training
    tasks are the K latents ``z_k = m_k / ||m_k||``. The student has T = K modules and ĥ = K·h hidden units
    in K blocks: module k is zero except in block k, where it holds the teacher's generated weight
    ``W(z_k)``; the readout is the teacher's readout repeated for every block. With ẑ = e_k only block k
    is active and the student equals the teacher on task k exactly. For ẑ ≥ 0 the student computes
    ``Σ_k ẑ_k f(z_k)`` (ReLU is positively homogeneous), a mixture of the training *functions*, while an
    OOD teacher task (default: every 2- and 3-hot mask not in ``masks``, discrete latent) mixes the
    *modules* inside the ReLU. We try the least-squares ẑ with ``Σ_k ẑ_k z_k = z`` ("naive") and Adam.
    """
    masks = _as_masks(masks, 6 if isinstance(masks, str) else None, "masks")
    n_modules = masks.shape[1]
    ood_masks = default_ood_masks(masks) if ood_masks is None else _as_masks(ood_masks, n_modules, "ood_masks")
    for name, value in (("n_in", n_in), ("n_hidden", n_hidden), ("n_out", n_out)):
        _check_int(name, value)
    keys = _split(key)
    teacher = init_teacher(keys[0], int(n_in), int(n_hidden), int(n_out), n_modules)  # eager: compiled once per shape
    out = _lookup_core(keys, teacher, jnp.asarray(masks), jnp.asarray(ood_masks), fit.shape, fit.learning_rate)
    out = _to_numpy(out)
    out.update(train_masks=masks, ood_masks=ood_masks)
    return out


# --------------------------------------------------------------------------------------------------
# Positive control (Theorem 2)
# --------------------------------------------------------------------------------------------------


@partial(jax.jit, compiler_options=_COMPILER_OPTIONS, static_argnames=("num_inputs",))
def _identified_core(keys, teacher, train_rows, ood_rows, num_inputs):
    n_modules, n_in, n_hidden = teacher["modules"].shape
    key_latents, key_x, key_mix = keys[1], keys[2], keys[3]
    # one uniform draw for everything (each random call adds seconds of CPU compile time):
    # F = rows-shuffled (diagonal in [0.5, 2] + strictly upper part in [-1, 1] / sqrt(M)), invertible by
    # construction; permutations are argsorts of uniforms
    u = jax.random.uniform(key_mix, (n_modules * (n_modules + 2) + n_hidden,))
    diagonal = 0.5 + 1.5 * u[:n_modules]
    upper = jnp.triu(2.0 * u[n_modules : n_modules * (n_modules + 1)].reshape(n_modules, n_modules) - 1.0, k=1)
    row_order = jnp.argsort(u[n_modules * (n_modules + 1) : n_modules * (n_modules + 2)])
    mixing = (jnp.diag(diagonal) + upper / np.sqrt(n_modules))[row_order]
    perm = jnp.argsort(u[n_modules * (n_modules + 2) :])
    modules = jnp.einsum("mk,mnh->knh", jnp.linalg.inv(mixing), teacher["modules"])[:, :, perm]
    student = {"modules": modules, "readout": teacher["readout"][perm]}
    z_train, z_ood = _latents(key_latents, train_rows, ood_rows, "continuous")
    x = sample_inputs(key_x, num_inputs, n_in)
    z_all = jnp.concatenate([z_train, z_ood])
    losses = task_losses(student, teacher, z_all @ mixing.T, z_all, x)  # ẑ = F z
    return {
        "teacher": teacher,
        "student": student,
        "mixing": mixing,
        "permutation": perm,
        "train_loss": losses[: z_train.shape[0]],
        "ood_loss": losses[z_train.shape[0] :],
        "ood_target_power": target_power(teacher, z_ood, x),
    }


def linearly_identified_student(
    key, masks="0;1;2;3;4;5;01;12;23;34;45;50", n_in=16, n_hidden=16, n_out=4, num_tasks=32, num_inputs=1024
):
    """A student that *is* a linear identification of the teacher, and so generalises (Theorem 2).

    Student modules ``Θ̂_k = Σ_m (F⁻¹)_{mk} Θ_m P`` for a random invertible ``F`` (M × M; a triangular
    matrix with diagonal in [0.5, 2] and rows shuffled, so it is invertible by construction) and a random permutation
    ``P`` of hidden units, readout ``Pᵀ A``. With ẑ = F z its generated weight is ``W(z) P``, so it matches
    the teacher on **every** z: training tasks (continuous latents, ``masks`` cycled) and OOD tasks (every
    2- and 3-hot mask not in ``masks``, cycled) alike.
    """
    masks = _as_masks(masks, 6 if isinstance(masks, str) else None, "masks")
    for name, value in (
        ("n_in", n_in),
        ("n_hidden", n_hidden),
        ("n_out", n_out),
        ("num_tasks", num_tasks),
        ("num_inputs", num_inputs),
    ):
        _check_int(name, value)
    ood_masks = default_ood_masks(masks)
    keys = _split(key)
    teacher = init_teacher(keys[0], int(n_in), int(n_hidden), int(n_out), masks.shape[1])  # eager: compiled once
    out = _identified_core(
        keys,
        teacher,
        jnp.asarray(cycle_masks(masks, num_tasks)),
        jnp.asarray(cycle_masks(ood_masks, num_tasks)),
        int(num_inputs),
    )
    out = _to_numpy(out)
    out.update(train_masks=masks, ood_masks=ood_masks, condition_number=float(np.linalg.cond(out["mixing"])))
    return out
