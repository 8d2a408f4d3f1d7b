"""In-context learners on the hyperteacher tasks and on the compositional-goals world (a comparison beyond the
paper; see book/incontext.py), on the few-shot core (:mod:`compgen.experiments.fewshot`).

The three learners of :mod:`compgen.models.incontext` (a key-value memory, a transformer, a transformer with a
task-code bottleneck and a hypernetwork) train on exactly the task stream of the section named by
``environment`` - its :class:`compgen.experiments.fewshot.Environment` - so for the same seed they see the same
teacher or mazes, split, training tasks in the same order, and evaluation tasks with the same support and
query data as the paper's four models:

* ``hyperteacher``: support tokens are the support points ``(x, y)`` (the teacher's soft targets); the loss is
  the query KL, the metric the query accuracy;
* ``goals``: support tokens are the steps ``(observation, one-hot optimal action)`` of the support
  demonstrations, their padded steps masked (they have no influence at all); the queries are the
  observations of the query demonstrations; the loss and metrics are the goals section's.

There is no inner loop: per outer step a run predicts the query targets of ``meta_batch`` tasks from their
support sets and takes a clipped AdamW step on the mean query loss. The probe decodes the task latent (the
hyperteacher's code, or the goal's factors) from each learner's task representation (the bottleneck's code;
the pooled support states of the others).

Each preset copies the task setup of the environment's preset of the same name (the linear hypernetwork's
config of Fig. 3B or Fig. 4E/F: :func:`task_fields`), so the paper's models, read from the results store, were
trained and evaluated on the same tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from compgen import models, params
from compgen.experiments import fewshot, goals, hyperteacher
from compgen.models import incontext as icl
from compgen.params import field, positive
from compgen.section import Grid, Preset, make_config
from compgen.tasks import goals as gl
from compgen.tasks import hyperteacher as ht

ENVIRONMENTS = {"hyperteacher": hyperteacher, "goals": goals}
SPLITS = ("random", "non_compositional")
LEARNERS = ("kv_memory", "transformer", "bottleneck")  # the book's in-context learners, in its tables' order
MODEL_LABELS = {name: models.label(name) for name in LEARNERS}
# n_in, n_out when left None: the hyperteacher's defaults (free); under goals the world's observation and actions
HYPERTEACHER_SIZES = (16, 8)


@dataclass(frozen=True)
class InContextConfig(fewshot.MetaConfig, goals.WorldFields):
    """One in-context learner on the tasks of ``environment``; every seed in ``seeds`` is trained.

    The task fields and their defaults are those of the hyperteacher's config (the paper's M = 8, K = 2
    setting); ``n_modules`` to ``norm_inputs`` are read by the hyperteacher only. Under ``goals`` the shots
    count demonstrations, each padded to ``demo_length`` steps, in the world of the goals fields
    (:class:`compgen.experiments.goals.WorldFields`, read under ``goals`` only). The model fields size
    :class:`compgen.models.incontext.InContextSpec`.
    """

    model: str = "transformer"  # an in-context learner (compgen.models.learners)
    environment: str = field("hyperteacher", choices=tuple(ENVIRONMENTS))
    split: str = field("random", choices=ht.SPLITS)
    n_modules: int = positive(8)  # M
    max_hot: int = positive(2)  # K
    frac_ood: float = field(0.25, gt=0, lt=1)
    n_in: int | None = positive(None)  # None: the environment's (hyperteacher 16; goals the observation, fixed)
    n_out: int | None = positive(None)  # None: the environment's (hyperteacher 8; goals the actions, fixed)
    teacher_hidden: int = positive(32)
    temperature: float = field(0.1, gt=0)
    norm_inputs: int = positive(1000)
    shots_support: int = positive(256)
    shots_query: int = positive(256)
    demo_length: int = positive(gl.MAX_STEPS)  # goals only: steps each demonstration is padded to
    d_model: int = positive(128)
    num_layers: int = positive(4)
    num_heads: int = positive(4)
    d_ff: int = positive(256)
    code_dim: int = positive(32)
    hnet_hidden: int = positive(64)
    hnet_num_hidden: int = positive(3)
    n_templates: int = positive(32)
    outer_steps: int = positive(200_000)
    outer_lr: float = field(1e-3, gt=0)
    outer_schedule: str = field("warmup_cosine", choices=fewshot.OUTER_SCHEDULES)
    warmup_steps: int = field(2000, ge=0)

    def check(self):
        super().check()
        try:
            sizes = (self.world.obs_size, self.world.n_actions) if self.environment == "goals" else HYPERTEACHER_SIZES
        except ValueError as error:
            raise params.ParameterError(f"goals world ({goals.world_label(self)}): {error}") from None
        for name, size in zip(("n_in", "n_out"), sizes):
            if getattr(self, name) is None:
                object.__setattr__(self, name, size)
            elif self.environment == "goals" and getattr(self, name) != size:
                raise params.ParameterError(
                    f"{name} must be {size} (or None) for environment='goals', got {getattr(self, name)!r}"
                )
        try:
            models.model_of(self, "incontext")  # the learner exists and takes these sizes
            if self.environment == "goals":
                if self.split not in gl.SPLITS:
                    raise ValueError(f"split must be one of {gl.SPLITS} for environment='goals', got {self.split!r}")
                goals.check_world(self, self.split, self.demo_length)
            else:
                ht.check_modules(self.n_modules, self.max_hot)
                ht.task_split(self.n_modules, self.max_hot, self.split, self.frac_ood, self.seeds[0])
        except ValueError as error:
            raise params.ParameterError(str(error)) from None

    def spec(self) -> icl.InContextSpec:
        return icl.InContextSpec(
            self.model,
            self.n_in,
            self.n_out,
            self.d_model,
            self.num_layers,
            self.num_heads,
            self.d_ff,
            self.code_dim,
            self.hnet_hidden,
            self.hnet_num_hidden,
            self.n_templates,
        )

    def build_model(self) -> icl.InContextModel:
        return models.get(self.model, "incontext").build(self)

    @property
    def eval_shots_query(self) -> int:
        return self.shots_query

    def eval_set_names(self):
        if self.environment == "goals":
            return goals.EVAL_SETS
        return ("valid", "test", "ood") + tuple(f"ood_{k}" for k in ht.ood_k_values(self.n_modules))


def env(cfg) -> fewshot.Environment:
    return ENVIRONMENTS[cfg.environment].ENV


def accuracy_key(cfg) -> str:
    """The name of the query accuracy among the metrics of ``cfg``'s environment (``accuracy`` or ``acc``)."""
    return env(cfg).headline


_FORWARD_FLOPS: dict = {}  # (learner, sizes, tokens) -> FLOPs of one forward pass


def forward_flops(cfg, n_support, n_query) -> float:
    """FLOPs of ``cfg``'s learner reading ``n_support`` support tokens and answering ``n_query`` queries, as XLA's
    cost analysis counts them (no compilation); once per learner, sizes and token counts."""
    key = (models.get(cfg.model).build, cfg.spec(), n_support, n_query)
    if key not in _FORWARD_FLOPS:
        model = cfg.build_model()
        shapes = (
            jax.eval_shape(model.init, jax.random.key(0)),
            jax.ShapeDtypeStruct((n_support, cfg.n_in), jnp.float32),
            jax.ShapeDtypeStruct((n_support, cfg.n_out), jnp.float32),
            jax.ShapeDtypeStruct((n_query, cfg.n_in), jnp.float32),
        )
        _FORWARD_FLOPS[key] = fewshot.xla_flops(model.apply, *shapes)
    return _FORWARD_FLOPS[key]


def flops_per_step(cfg) -> float:
    """FLOPs of one outer step of one run: the learner's forward pass over a task's support and query tokens
    (:func:`forward_flops`) times 3 (forward and backward) per task, plus the hyperteacher's teacher."""
    steps = cfg.demo_length if cfg.environment == "goals" else 1  # tokens per shot
    forward = forward_flops(cfg, cfg.shots_support * steps, cfg.shots_query * steps)
    extra = hyperteacher.teacher_flops(cfg) if cfg.environment == "hyperteacher" else 0.0
    return float(cfg.meta_batch * 3 * forward + extra)


def label(cfg):
    task = (
        f"M={cfg.n_modules}, K={cfg.max_hot}"
        if cfg.environment == "hyperteacher"
        else f"demo length {cfg.demo_length}" + ("" if cfg.world == gl.WORLD else f", world {goals.world_label(cfg)}")
    )
    return (
        f"in-context {models.label(cfg.model)} on {cfg.environment} ({task}, d_model {cfg.d_model}) on {cfg.split} "
        f"support: {len(cfg.seeds)} seed(s), {cfg.outer_steps} steps"
    )


# --------------------------------------------------------------------------------------------- presets

# The hyperteacher fields an in-context config takes over from the hyperteacher preset (Fig. 3B's linear hnet).
TASK_FIELDS = (
    "n_modules",
    "max_hot",
    "frac_ood",
    "n_in",
    "n_out",
    "teacher_hidden",
    "temperature",
    "norm_inputs",
    "shots_support",
    "shots_query",
    "outer_steps",
    "meta_batch",
    "outer_schedule",
    "warmup_steps",
    "eval_every",
    "eval_tasks",
    "eval_chunk",
    "probe",
    "ridge_lambda",
    "ridge_cg_iters",
    "seeds",
)
# The goals fields it takes over from the goals preset (Fig. 4E/F's linear hnet), and the sizes of that
# hypernetwork's generated MLP, which the bottleneck learner's hypernetwork takes over.
GOALS_TASK_FIELDS = (
    "shots_support",
    "shots_query",
    "demo_length",
    "outer_steps",
    "meta_batch",
    "eval_every",
    "eval_tasks",
    "eval_chunk",
    "seeds",
    *goals.WORLD_FIELDS,
)
GOALS_HNET_FIELDS = {"hnet_hidden": "hidden", "hnet_num_hidden": "num_hidden", "n_templates": "templates"}


def reference_config(preset, environment="hyperteacher", **overrides):
    """The linear hypernetwork's config of the environment's figure (Fig. 3B or 4E/F) whose task setup an
    in-context config copies; ``overrides`` of task fields apply to it (seeds fix a goals demo length)."""
    if environment == "goals":
        fields = {k: v for k, v in overrides.items() if k in GOALS_TASK_FIELDS}
        return make_config(goals.SECTION, preset, "hnet_linear", **fields)
    fixed = hyperteacher.SECTION.preset(preset).figures["fig3b"].fixed
    fields = {k: v for k, v in overrides.items() if k in TASK_FIELDS and k != "seeds"}
    return make_config(hyperteacher.SECTION, preset, "hnet_linear", **{**fixed, **fields})


def task_fields(preset, model, overrides) -> dict:
    """The task setup an in-context config takes over from its environment's preset (see module docstring)."""
    environment = overrides.get("environment", "hyperteacher")
    reference = reference_config(preset, environment, **{k: v for k, v in overrides.items() if k != "environment"})
    if environment == "goals":
        fields = {name: getattr(reference, name) for name in GOALS_TASK_FIELDS}
        fields.update({ours: getattr(reference, theirs) for ours, theirs in GOALS_HNET_FIELDS.items()})
    else:
        fields = {name: getattr(reference, name) for name in TASK_FIELDS}
    # the learners' sizes and schedule at this preset on this world (what its figure sets)
    figure = "goals" if environment == "goals" else "comparison"
    return {**fields, **PRESETS[preset].figures[figure].fixed}


_SPLITS = dict(split=SPLITS)
_QUICK_LEARNERS = dict(
    d_model=64, num_layers=2, num_heads=4, d_ff=128, code_dim=16, outer_lr=2e-3, outer_weight_decay=1e-2
)
_QUICK_HT = dict(_QUICK_LEARNERS, hnet_hidden=32, n_templates=16)
_QUICK_GOALS = dict(_QUICK_LEARNERS, outer_schedule="warmup_cosine", warmup_steps=40)


# the learners' sizes and schedule at the paper's budgets (the goals bottleneck's hypernetwork takes the goals
# linear hypernetwork's sizes, the hyperteacher one its own)
_PAPER_LEARNERS = dict(
    d_model=128,
    num_layers=4,
    num_heads=4,
    d_ff=256,
    code_dim=32,
    outer_lr=1e-3,
    outer_schedule="warmup_cosine",
    warmup_steps=2000,
    outer_weight_decay=1e-2,
)


def _figures(hyperteacher_sizes, goals_sizes):
    """The comparison on each world (the world is an axis of one value: the figure defines it)."""
    return {
        "comparison": Grid(
            models=LEARNERS,
            fixed=hyperteacher_sizes,
            axes=dict(environment=("hyperteacher",), **_SPLITS),
        ),
        "goals": Grid(models=LEARNERS, fixed=goals_sizes, axes=dict(environment=("goals",), **_SPLITS)),
    }


_SMOKE_LEARNERS = dict(d_model=16, num_layers=1, num_heads=2, d_ff=32, code_dim=8, outer_lr=3e-3, warmup_steps=2)

PRESETS = {
    "paper": Preset(
        # hyperteacher: 0.40M (memory), 0.53M (transformer), 0.65M (bottleneck) parameters, beside 0.31M-0.64M for
        # the paper's models at M = 8; the paper's budget of 200,000 steps of 128 tasks with 256 + 256 shots.
        # goals: ~0.6M (memory, transformer) and ~0.9M (bottleneck) parameters, beside 0.23M-0.92M for the paper's
        # goals models; 200,000 steps of 128 tasks, 1 + 1 demonstrations padded to 120 steps
        "the paper's task setups and budgets (hyperteacher M = 8, K = 2; goals App. C.4); GPU",
        figures=_figures(dict(_PAPER_LEARNERS, hnet_hidden=48, n_templates=32), _PAPER_LEARNERS),
    ),
    "quick": Preset(
        # hyperteacher: ~70k parameters for the memory and the transformer, ~100k for the bottleneck (the paper
        # models at quick: 10k-73k); the hyperteacher quick budget of Fig. 3B (warm-up 100 + cosine over 4,000
        # steps of 8 tasks, every learner of that figure at the same budget). goals: ~120k (transformer), ~180k
        # (memory) and ~360k (bottleneck) parameters, beside the paper models at quick (MAML 59k to the nonlinear
        # hnet 0.92M); the goals quick budget, warm-up + cosine
        "2 CPU cores, minutes per run; the hyperteacher and goals quick task setups",
        figures=_figures(_QUICK_HT, _QUICK_GOALS),
    ),
    "smoke": Preset(
        "seconds; checks that everything runs, shows nothing",
        # the hyperteacher's smoke schedule is constant, so its comparison has no warm-up
        figures=_figures(
            dict({k: v for k, v in _SMOKE_LEARNERS.items() if k != "warmup_steps"}, hnet_hidden=16, n_templates=8),
            _SMOKE_LEARNERS,
        ),
    ),
}


SECTION = fewshot.make_section(
    env,
    "incontext",
    InContextConfig,
    PRESETS,
    flops_per_step=flops_per_step,
    label=label,
    models_=LEARNERS,
    base_fields=task_fields,
    experiment_fields=("split", "environment", "seeds"),
)
