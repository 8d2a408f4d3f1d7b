"""Multi-task teacher-student experiments of the theory section (paper §3.3, App. C.1): the section value
:data:`SECTION`, its config and its presets.

A student with the teacher's architecture (ĥ = h·f_h hidden units, M̂ = M·f_M modules) learns from infinite
data: per task it infers its latent ẑ by ``inner_steps`` Adam steps on fresh batches, the adapted ẑ is held
constant (stop-gradient) and the modules and readout take an AdamW step on a fresh query batch (App. C.1).
Evaluation infers ẑ on fixed task sets, decodes z from ẑ with a ridge regression and measures module
alignment (App. C.1 and §3.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax

from compgen import meta, metrics, params, rng
from compgen.params import field, positive
from compgen.section import Grid, Preset, Section
from compgen.tasks import support, teacher, teacher_kernel

INNER_SCHEDULES = ("constant", "cosine")
OVERPARAM_MASKS = "0;1;2;3;4;5;01;12;23;34;45;50"  # one-hots + ring pairs, for both distributions (App. C.1)


@dataclass(frozen=True)
class TeacherStudentConfig(params.Config):
    """One teacher-student training configuration; every seed in ``seeds`` is trained.

    Defaults are the paper's (paper §3.3, App. C.1): 60,000 outer steps of 64 tasks, 300 inner Adam steps at 3e-3 on
    batches of 256 fresh inputs, AdamW with cosine decay from 1e-3 to 1e-6.
    """

    masks: str = OVERPARAM_MASKS
    distribution: str = field("discrete", choices=teacher.DISTRIBUTIONS)
    normalisation: str = field("code", choices=teacher.NORMALISATIONS)
    input_sampler: str = field("threefry", choices=rng.SAMPLERS)
    expect_connected: bool | None = None
    n_in: int = positive(16)
    teacher_hidden: int = positive(16)
    n_out: int = positive(4)
    n_modules: int = positive(6)
    hidden_factor: int = positive(2)
    module_factor: int = positive(2)
    outer_steps: int = positive(60_000)
    meta_batch: int = positive(64)
    batch: int = positive(256)
    inner_steps: int = positive(300)
    inner_lr: float = field(3e-3, gt=0)
    inner_schedule: str = field("constant", choices=INNER_SCHEDULES)  # cosine: decay to 1% over the inner steps
    outer_lr: float = field(1e-3, gt=0)
    lr_final_fraction: float = field(1e-3, ge=0, le=1)
    warmup_steps: int = field(0, ge=0)  # linear warm-up of the outer rate from 0 (paper: none)
    weight_decay: float = field(0.0, ge=0)
    eval_every: int = positive(1000)
    eval_tasks: int = positive(512)
    eval_inputs: int = positive(1024)
    ridge_lambda: float = field(0.01, gt=0)
    ridge_cg_iters: int | None = field(10, ge=1)
    seeds: tuple = (100, 101, 102)
    xla_opt_level: int | None = field(None, ge=0, le=3)  # None: the device decides (compgen.devices.resolve)
    fused_inner: bool | None = None  # the inner loop as one GPU kernel (tasks.teacher_kernel); None: the device decides

    def check(self):
        if self.warmup_steps >= self.outer_steps:
            raise params.ParameterError(
                f"warmup_steps ({self.warmup_steps}) must be below outer_steps ({self.outer_steps})"
            )
        try:
            masks = self.mask_array()
        except ValueError as error:
            raise params.ParameterError(f"masks {self.masks!r} are invalid: {error}") from None
        if self.fused_inner and not teacher_kernel.fits(self.batch):
            raise params.ParameterError(
                f"fused_inner needs a batch that is a power of two of at least 16, got batch={self.batch}"
            )
        if self.expect_connected is True:
            support.require_connected(masks, name="masks")
        if self.expect_connected is False and support.is_connected(masks):
            raise params.ParameterError(f"masks {self.masks!r} were expected to be disconnected but are connected")

    def mask_array(self) -> np.ndarray:
        """The training masks, (n_masks, n_modules) in {0, 1}."""
        return support.parse_masks(self.masks, self.n_modules)

    @property
    def student_hidden(self) -> int:
        return self.teacher_hidden * self.hidden_factor

    @property
    def student_modules(self) -> int:
        return self.n_modules * self.module_factor

    def eval_set_names(self):
        """``train`` (the training distribution) and ``h-hot`` for h = 1..M (all h-hot masks, continuous)."""
        return ("train",) + tuple(f"{h}-hot" for h in range(1, self.n_modules + 1))


# --------------------------------------------------------------------------------------------- one run


def _half_mse_to_teacher(student, zhat, teacher_weight, readout, x):
    """½-MSE of the student at ẑ against the teacher whose generated weight is ``teacher_weight``."""
    target = jax.nn.relu(x @ teacher_weight / jnp.sqrt(x.shape[-1])) @ readout
    return metrics.half_mse(teacher.apply_teacher(student, zhat, x), target)


def _inner_optimizer(cfg):
    if cfg.inner_schedule == "cosine":
        return optax.adam(optax.cosine_decay_schedule(cfg.inner_lr, cfg.inner_steps, alpha=0.01))
    return optax.adam(cfg.inner_lr)


def _outer_optimizer(cfg, weight_decay):
    if cfg.warmup_steps:
        schedule = optax.warmup_cosine_decay_schedule(
            0.0, cfg.outer_lr, cfg.warmup_steps, cfg.outer_steps, end_value=cfg.lr_final_fraction * cfg.outer_lr
        )
    else:
        schedule = optax.cosine_decay_schedule(cfg.outer_lr, cfg.outer_steps, alpha=cfg.lr_final_fraction)
    return optax.adamw(schedule, weight_decay=weight_decay)


def infer_latent(cfg, student, teacher_params, z, zhat_init, key):
    """Task inference: ``inner_steps`` Adam steps on ẑ, a fresh input batch each step.

    The student is held constant (stop-gradient, App. C.1). Returns ``(ẑ (M̂,), losses)``, the loss before each
    step (inner_steps,); with ``cfg.fused_inner`` (a GPU's choice, :func:`compgen.devices.resolve`) the same loop runs
    as one kernel (:func:`compgen.tasks.teacher_kernel.infer_latent`) and ``losses`` holds the first and the last.
    """
    student = jax.lax.stop_gradient(student)
    teacher_weight = teacher.generated_weight(teacher_params["modules"], z)
    if cfg.fused_inner and teacher_kernel.fits(cfg.batch):
        loop = teacher_kernel.Loop(cfg.batch, cfg.inner_steps, cfg.inner_lr, cfg.inner_schedule, cfg.input_sampler)
        return teacher_kernel.infer_latent(
            key,
            (teacher_weight, teacher_params["readout"]),
            (student["modules"], student["readout"]),
            zhat_init,
            loop,
            interpret=jax.default_backend() != "gpu",
        )

    def loss(zhat, step_key):
        x = teacher.sample_inputs(step_key, cfg.batch, cfg.n_in, cfg.input_sampler)
        return _half_mse_to_teacher(student, zhat, teacher_weight, teacher_params["readout"], x)

    return meta.inner_adapt(loss, zhat_init, _inner_optimizer(cfg), cfg.inner_steps, key, mode="stop_gradient")


def run_arrays(configs):
    """Per-run inputs, stacked over (config, seed): the seed's key, the training masks, the distribution and
    the weight decay (data, so that configs differing only there share a program)."""
    n_max = max(c.mask_array().shape[0] for c in configs)
    rows = []
    for c in configs:
        masks = c.mask_array()
        padded = np.zeros((n_max, c.n_modules), np.float32)
        padded[: len(masks)] = masks
        for seed in c.seeds:
            rows.append(
                {
                    "seed_key": jax.random.key(seed),
                    "masks": padded,
                    "n_masks": len(masks),
                    "discrete": c.distribution == "discrete",
                    "weight_decay": c.weight_decay,
                }
            )
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *rows)


def init_run(cfg, run):
    """Initial state of one run: the seed's key splits into (train, eval, student, teacher) as in the code."""
    k_train, _, k_student, k_teacher = jax.random.split(run["seed_key"], 4)
    teacher_params = teacher.init_teacher(k_teacher, cfg.n_in, cfg.teacher_hidden, cfg.n_out, cfg.n_modules)
    k_student_params, k_embedding = jax.random.split(k_student)
    student = teacher.init_teacher(k_student_params, cfg.n_in, cfg.student_hidden, cfg.n_out, cfg.student_modules)
    return {
        "student": student,
        "teacher": teacher_params,
        "zhat_init": jax.random.normal(k_embedding, (cfg.student_modules,)),  # embedding_init="constant"
        "opt_state": meta.outer_init(_outer_optimizer(cfg, run["weight_decay"]), student),
        "key": k_train,
    }


def outer_step(cfg, run, state, mesh=None):
    """One outer step of one run: B tasks, inner inference, query loss, guarded AdamW update; with a ``mesh`` the
    tasks are split over its devices (:func:`compgen.meta.mean_over_tasks`)."""
    key, k_latents, k_tasks = jax.random.split(state["key"], 3)
    z = teacher.sample_latents_padded(
        k_latents, run["masks"], run["n_masks"], run["discrete"], cfg.meta_batch, cfg.normalisation
    )

    def task_loss(student, z_task, task_key, fixed):
        teacher_params, zhat_init = fixed
        k_inner, k_query = jax.random.split(task_key)
        zhat, inner_losses = infer_latent(cfg, student, teacher_params, z_task, zhat_init, k_inner)
        x = teacher.sample_inputs(k_query, cfg.batch, cfg.n_in, cfg.input_sampler)
        teacher_weight = teacher.generated_weight(teacher_params["modules"], z_task)
        loss = _half_mse_to_teacher(student, zhat, teacher_weight, teacher_params["readout"], x)
        return loss, {"inner_loss_init": inner_losses[0], "inner_loss_final": inner_losses[-1]}

    batch = meta.TaskBatch(z, jax.random.split(k_tasks, cfg.meta_batch), (state["teacher"], state["zhat_init"]))
    optimizer = _outer_optimizer(cfg, run["weight_decay"])
    student, opt_state, step_metrics = meta.outer_step(
        task_loss, state["student"], state["opt_state"], optimizer, batch, mesh=mesh
    )
    return {**state, "student": student, "opt_state": opt_state, "key": key}, step_metrics


def evaluate_run(cfg, run, state):
    """Metrics of one run on fixed task sets (App. C.1 and §3.3; :meth:`TeacherStudentConfig.eval_set_names`).

    Per set: the ½-MSE and relative loss on fixed inputs after inference, and the R² of decoding z from ẑ
    with a ridge decoder fitted on ``train`` (NaN for an entry of z that is constant on the set: no variance to
    explain, R² undefined; :func:`compgen.metrics.r2_score`). Module alignment uses that decoder. On the ``train``
    tasks, what the inferred latents do: ``latent_dims``, the number of directions in which ẑ differs across tasks
    (:func:`compgen.metrics.effective_dimensions`; ``teacher_latent_dims`` is z's, what identification gives), and
    ``latent_nonaffine``, the share of ẑ's variance that is not an affine function of z (0 under identification).
    """
    _, k_eval, _, _ = jax.random.split(run["seed_key"], 4)
    k_inputs, k_sets = jax.random.split(k_eval)
    x = teacher.sample_inputs(k_inputs, cfg.eval_inputs, cfg.n_in)
    set_keys = jax.random.split(k_sets, cfg.n_modules + 1)
    latents = [
        teacher.sample_latents_padded(
            set_keys[0], run["masks"], run["n_masks"], run["discrete"], cfg.eval_tasks, cfg.normalisation
        )
    ]
    for h in range(1, cfg.n_modules + 1):
        masks = support.all_khot_masks(cfg.n_modules, h)
        latents.append(teacher.sample_latents(set_keys[h], masks, cfg.eval_tasks, "continuous", cfg.normalisation))

    def task_metrics(z_task, task_key):
        zhat, _ = infer_latent(cfg, state["student"], state["teacher"], z_task, state["zhat_init"], task_key)
        prediction = teacher.apply_teacher(state["student"], zhat, x)
        target = teacher.apply_teacher(state["teacher"], z_task, x)
        return zhat, metrics.half_mse(prediction, target), jnp.mean(target**2)

    per_set = [
        jax.vmap(task_metrics)(z, jax.random.split(jax.random.fold_in(k_eval, i), cfg.eval_tasks))
        for i, z in enumerate(latents)
    ]
    zhat_train = per_set[0][0]
    loss = jnp.stack([s[1].mean() for s in per_set])
    relative = jnp.stack([0.5 * (2 * s[1]).mean() / s[2].mean() for s in per_set])
    weights, bias = metrics.ridge_fit(zhat_train, latents[0], cfg.ridge_lambda, cfg.ridge_cg_iters)
    r2 = [metrics.r2_score(zhat @ weights + bias, z) for (zhat, _, _), z in zip(per_set, latents)]
    decoder = weights.T  # F (M, M̂): z ≈ F ẑ
    alignment = metrics.module_alignment(state["teacher"]["modules"], state["student"]["modules"], decoder)
    return {
        "loss": loss,
        "relative_loss": relative,
        "r2": jnp.stack(r2),
        "alignment": alignment,
        "latent_dims": metrics.effective_dimensions(zhat_train),
        "teacher_latent_dims": metrics.effective_dimensions(latents[0]),
        "latent_nonaffine": metrics.nonaffine_share(latents[0], zhat_train),
    }


def progress(cfg, step_metrics, evaluation):
    text = f"loss {np.mean(step_metrics['loss'][-1]):.2e}"
    if evaluation is not None:
        text += f"  alignment {np.mean(evaluation['alignment']):.3f}"
    return text


def label(cfg):
    return (
        f"masks {cfg.masks} ({cfg.distribution}), student {cfg.student_hidden} hidden x {cfg.student_modules} "
        f"modules, weight decay {cfg.weight_decay:g}: {len(cfg.seeds)} seed(s), {cfg.outer_steps} steps"
    )


INNER_STEP_OVERHEAD = 20_000  # multiply-accumulates a CPU spends per inner step and task beyond the arithmetic


def flops_per_step(cfg) -> float:
    """The cost of one outer step of one seed, counted as multiply-accumulates of its inner loops (student and
    teacher on the batch, the student's weight generation), plus :data:`INNER_STEP_OVERHEAD` per inner step and
    task, which makes small students cost what they take on a CPU (measured at quick: a (1, 1) student in W1 about
    0.8 times a (2, 2) one, an (8, 8) one about 2 times)."""
    per_sample = cfg.n_in * (cfg.student_hidden + cfg.teacher_hidden) + cfg.student_hidden * cfg.n_out
    per_inner = cfg.batch * per_sample + cfg.n_in * cfg.student_hidden * cfg.student_modules + INNER_STEP_OVERHEAD
    return float(cfg.meta_batch * cfg.inner_steps * per_inner)


# --------------------------------------------------------------------------------------------- presets


def _columns(numbers=None):
    """Fig. 2C's cases: one per Table A9 column (App. C.1), or only the columns ``numbers``."""
    return tuple(
        dict(masks=col.spec, distribution=col.distribution, expect_connected=col.connected)
        for col in support.TABLE_A9
        if numbers is None or col.column in numbers
    )


def _factors(pairs):
    return tuple(dict(hidden_factor=fh, module_factor=fm) for fh, fm in pairs)


def _figures(overparam, table_a1, weight_decays=(1e-3, 1e-4, 1e-5, 0.0), fig2c=None):
    return {
        "fig2c": fig2c or Grid(cases=_columns()),
        "fig2d": Grid(
            fixed=dict(masks=OVERPARAM_MASKS, expect_connected=True),
            axes=dict(distribution=teacher.DISTRIBUTIONS),
            cases=_factors(overparam),
        ),
        "table_a1": Grid(
            fixed=dict(masks=OVERPARAM_MASKS, distribution="discrete", expect_connected=True),
            axes=dict(weight_decay=weight_decays),
            cases=_factors(table_a1),
        ),
    }


# The CPU presets: inputs from a hash (no stored pool), and a short inner loop at a higher rate, decayed
_CPU_INNER_LOOP = dict(input_sampler="hash", inner_lr=0.2, inner_schedule="cosine")

PRESETS = {
    "smoke": Preset(
        "seconds; checks that everything runs, shows nothing",
        common=dict(
            _CPU_INNER_LOOP,
            outer_steps=40,
            meta_batch=4,
            batch=16,
            inner_steps=10,
            eval_every=20,
            eval_tasks=16,
            eval_inputs=32,
            seeds=(100,),
        ),
        figures=_figures(((1, 1), (2, 2)), ((4, 4),), (1e-3, 0.0)),
    ),
    # quick (book/search/teacher_student.json): Fig. 2D and Table A1 in a smaller world W1 (8 inputs, an 8-unit
    # teacher; M = 6 unchanged) with a short inner loop, 2x and 8x students for Fig. 2D, 8x for Table A1; Fig. 2C in
    # the paper's world (n = h = 16) with a longer constant-rate inner loop (100 Adam steps at 1e-2), a warm-up and an
    # outer rate of 4e-3 (on seeds 7-9 it beat 2e-3 at 8,000 steps and matched 2e-3 at 16,000 for half the cost; the
    # 16,000-step regime, run afterwards on seeds 31-33 and 100-102, lost 4 of 12 students late in training), on
    # Table A9's discrete pair (columns 1, 2: in W1 no inner loop separated connected from disconnected students)
    # and its continuous pair with the same ring and triangles (columns 3, 5), which no regime of the search
    # separated: run so that its claim is computed rather than left out
    "quick": Preset(
        "2 CPU cores; Fig. 2D and Table A1 in a smaller world (n = 8 inputs, h = 8 teacher units)",
        common=dict(
            _CPU_INNER_LOOP,
            n_in=8,
            teacher_hidden=8,
            outer_steps=4000,
            meta_batch=8,
            batch=64,
            inner_steps=50,
            outer_lr=2e-3,
            eval_every=1000,
            eval_tasks=64,
            eval_inputs=256,
        ),
        figures=_figures(
            ((2, 2), (8, 8)),
            ((8, 8),),
            (1e-3, 0.0),
            fig2c=Grid(
                fixed=dict(
                    n_in=16,
                    teacher_hidden=16,
                    outer_steps=8000,
                    meta_batch=8,
                    inner_steps=100,
                    inner_lr=1e-2,
                    inner_schedule="constant",
                    outer_lr=4e-3,
                    warmup_steps=400,
                ),
                cases=_columns((1, 2, 3, 5)),
            ),
        ),
    ),
    "paper": Preset(
        "the paper's configuration (paper §3.3, App. C.1); GPU",
        # Table A1's columns are UNKNOWN (App. B.1): four overparameterised students as a guess
        figures=_figures(
            tuple((fh, fm) for fh in (2, 4, 8, 16, 32) for fm in (2, 4, 8, 16, 32)), ((4, 4), (4, 8), (8, 4), (8, 8))
        ),
    ),
}

SECTION = Section(
    name="teacher_student",
    config=TeacherStudentConfig,
    presets=PRESETS,
    run_arrays=run_arrays,
    init=init_run,
    outer_step=outer_step,
    evaluate=evaluate_run,
    progress=progress,
    label=label,
    flops_per_step=flops_per_step,
    data_fields=("masks", "distribution", "weight_decay", "expect_connected", "seeds"),
    experiment_fields=(
        "masks",
        "distribution",
        "expect_connected",
        "hidden_factor",
        "module_factor",
        "weight_decay",
        "seeds",
    ),
)
