"""In-context learners on the hyperteacher tasks (a comparison beyond the paper; see book/incontext.py).

The three learners of :mod:`compgen.models.incontext` (a key-value memory, a transformer, a
transformer with a task-code bottleneck and a hypernetwork) are trained episodically on exactly the
task stream of :mod:`compgen.experiments.hyperteacher`: for the same seed they see the same teacher,
the same task split, the same training tasks in the same order and are evaluated on the same fixed
evaluation tasks with the same support and query points. There is no inner loop: per outer step a
run predicts the query targets of ``meta_batch`` tasks from their support sets and takes a clipped
AdamW step on the mean query KL.

Evaluation reports the query loss and accuracy per evaluation set, and, with ``probe``, the linear
decodability of the task code z from each learner's task representation (the bottleneck's code; the
pooled support states of the others): a ridge decoder fitted on the ``test`` tasks and scored on the
``ood`` tasks, as :func:`compgen.experiments.hyperteacher.evaluate_run` does for the adapted fast
parameters.

The presets and the config lists live in :mod:`compgen.experiments.incontext_presets`.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax

from compgen import experiments, metrics
from compgen.experiments import hyperteacher as hyperteacher_experiment
from compgen.models import incontext
from compgen.tasks import hyperteacher as ht

KIND = "incontext"
ENVIRONMENTS = ("hyperteacher",)
OUTER_SCHEDULES = ("constant", "warmup_cosine")


@dataclass(frozen=True)
class InContextConfig:
    """One in-context learner on the hyperteacher; every seed in ``seeds`` is trained.

    The task fields and their defaults are those of
    :class:`compgen.experiments.hyperteacher.HyperteacherConfig` (the paper's M = 8, K = 2 setting);
    the model fields size :class:`compgen.models.incontext.InContextSpec`.
    """

    model: str = "transformer"
    environment: str = "hyperteacher"
    split: str = "random"
    n_modules: int = 8  # M
    max_hot: int = 2  # K
    frac_ood: float = 0.25
    n_in: int = 16
    n_out: int = 8
    teacher_hidden: int = 32
    temperature: float = 0.1
    norm_inputs: int = 1000
    shots_support: int = 256
    shots_query: int = 256
    d_model: int = 128
    num_layers: int = 4
    num_heads: int = 4
    d_ff: int = 256
    code_dim: int = 32
    hnet_hidden: int = 64
    hnet_num_hidden: int = 3
    n_templates: int = 32
    outer_steps: int = 200_000
    meta_batch: int = 128
    outer_lr: float = 1e-3
    outer_schedule: str = "warmup_cosine"
    warmup_steps: int = 2000
    clip_norm: float = 1.0
    outer_weight_decay: float = 1e-2
    eval_every: int = 1000
    eval_tasks: int = 1024
    eval_chunk: int = 64
    probe: bool = True
    ridge_lambda: float = 1.0
    ridge_cg_iters: int | None = 10
    seeds: tuple = (2020, 2021, 2022)

    def __post_init__(self):
        if self.model not in incontext.INCONTEXT_MODEL_NAMES:
            raise ValueError(f"model must be one of {incontext.INCONTEXT_MODEL_NAMES}, got {self.model!r}")
        if self.environment not in ENVIRONMENTS:
            raise ValueError(f"environment must be one of {ENVIRONMENTS}, got {self.environment!r}")
        positive = ("n_modules", "max_hot", "n_in", "n_out", "teacher_hidden", "norm_inputs", "shots_support",
                    "shots_query", "outer_steps", "meta_batch", "eval_every", "eval_tasks", "eval_chunk")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("temperature", "outer_lr", "clip_norm", "ridge_lambda"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("outer_weight_decay", "warmup_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.outer_schedule not in OUTER_SCHEDULES:
            raise ValueError(f"outer_schedule must be one of {OUTER_SCHEDULES}, got {self.outer_schedule!r}")
        if not self.seeds:
            raise ValueError("seeds must name at least one seed")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        self.spec()  # raises if a model size is invalid
        ht.check_modules(self.n_modules, self.max_hot)
        ht.task_split(self.n_modules, self.max_hot, self.split, self.frac_ood, self.seeds[0])  # raises if invalid

    def spec(self) -> incontext.InContextSpec:
        return incontext.InContextSpec(self.model, self.n_in, self.n_out, self.d_model, self.num_layers,
                                       self.num_heads, self.d_ff, self.code_dim, self.hnet_hidden,
                                       self.hnet_num_hidden, self.n_templates)

    def build_model(self) -> incontext.InContextModel:
        return incontext.make_incontext_model(self.spec())

    def eval_set_names(self):
        return ("valid", "test", "ood") + tuple(f"ood_{k}" for k in ht.ood_k_values(self.n_modules))


CONFIG_CLASS = InContextConfig


def shape_key(cfg: InContextConfig):
    """Fields that fix the compiled program; configs equal here can be vmapped together."""
    varying = {"split", "frac_ood", "seeds"}
    return tuple((f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in varying)


def code():
    """The modules whose source the numbers of this section depend on (see results.code_fingerprint)."""
    import compgen.tasks.support as support_module
    import compgen.tasks.teacher as teacher_module
    from compgen import meta, models
    from compgen.models import hypernetwork, mlp

    return (ht, support_module, teacher_module, hyperteacher_experiment, meta, metrics, models, hypernetwork, mlp,
            incontext, experiments, sys.modules[__name__])


# --------------------------------------------------------------------------------------------- training


def _outer_optimizer(cfg):
    return hyperteacher_experiment._outer_optimizer(cfg)


def init_run(cfg: InContextConfig, run):
    """Initial state of one run, with the keys of :func:`compgen.experiments.hyperteacher.init_run`: the
    seed's key draws the teacher, ``fold_in(key, 1)`` the model, ``split(key, 5)[0]`` the training tasks."""
    root = run["seed_key"]
    params = cfg.build_model().init(jax.random.fold_in(root, 1))
    return {
        "teacher": ht.init_teacher(root, cfg.n_modules, cfg.n_in, cfg.teacher_hidden, cfg.n_out),
        "meta": params,
        "opt_state": _outer_optimizer(cfg).init(params),
        "key": jax.random.split(root, 5)[0],
    }


def _task(cfg, state, run, code, key):
    return ht.task_data(state["teacher"], run["norm_inputs"], code, key, cfg.shots_support, cfg.shots_query,
                        cfg.temperature)


def predict(model, params, support_set, query_set):
    """Query logits of one task from its support set ``(x, y)`` and the query *inputs* only."""
    x_query, _ = query_set  # the query targets never reach the model
    return model.apply(params, support_set[0], support_set[1], x_query)


def task_loss(model, params, support_set, query_set):
    """Query KL of one task predicted in context, and its accuracy: ``(loss, accuracy)``."""
    prediction = predict(model, params, support_set, query_set)
    return ht.kl_loss(prediction, query_set[1]), ht.accuracy(prediction, query_set[1])


def outer_step(cfg: InContextConfig, run, state):
    """One outer step of one run: the hyperteacher's task sampling, query KL, clipped AdamW (skips non-finite)."""
    model = cfg.build_model()
    key, k_codes, k_tasks = jax.random.split(state["key"], 3)
    codes = run["train_codes"][jax.random.randint(k_codes, (cfg.meta_batch,), 0, run["n_train"])]

    def one_task(params, code, task_key):
        k_data, _ = jax.random.split(task_key)  # as the hyperteacher, whose second key drives the inner loop
        support_set, query_set = _task(cfg, state, run, code, k_data)
        return task_loss(model, params, support_set, query_set)

    def meta_loss(params):
        losses, accs = jax.vmap(one_task, (None, 0, 0))(params, codes, jax.random.split(k_tasks, cfg.meta_batch))
        return losses.mean(), accs.mean()

    (loss, acc), grads = jax.value_and_grad(meta_loss, has_aux=True)(state["meta"])
    updates, opt_state = _outer_optimizer(cfg).update(grads, state["opt_state"], state["meta"])
    params = optax.apply_updates(state["meta"], updates)
    step_metrics = {"loss": loss, "accuracy": acc, "grad_norm": optax.tree.norm(grads),
                    "skipped": opt_state.total_notfinite}
    return {**state, "meta": params, "opt_state": opt_state, "key": key}, step_metrics


def evaluate_run(cfg: InContextConfig, run, state):
    """Query loss and accuracy per evaluation set (NaN where a set is empty) and, with ``probe``, the R² of
    a ridge decoder from the task representation to the task code (fit on ``test``, scored on ``ood``).

    The evaluation tasks and their data are those of :func:`compgen.experiments.hyperteacher.evaluate_run`.
    """
    model = cfg.build_model()
    params = state["meta"]
    names = cfg.eval_set_names()
    data_keys = jax.random.split(jax.random.fold_in(run["seed_key"], 2), len(names))

    def task_metrics(args):
        code, key = args
        k_data, _ = jax.random.split(key)
        support_set, query_set = _task(cfg, state, run, code, k_data)
        loss, acc = task_loss(model, params, support_set, query_set)
        return {"loss": loss, "accuracy": acc}, model.task_representation(params, *support_set)

    keys = jax.vmap(lambda k: jax.random.split(k, cfg.eval_tasks))(data_keys)
    flat = lambda a: a.reshape((-1,) + a.shape[2:])
    out, feats = jax.lax.map(task_metrics, (flat(run["eval_codes"]), flat(keys)), batch_size=cfg.eval_chunk)
    out = jax.tree.map(lambda v: v.reshape(len(names), cfg.eval_tasks), out)
    result = {k: jnp.where(run["eval_valid"], v.mean(1), jnp.nan) for k, v in out.items()}
    if cfg.probe:
        feats = feats.reshape((len(names), cfg.eval_tasks, -1))
        test, ood = names.index("test"), names.index("ood")
        flat_code = lambda i: run["eval_codes"][i].reshape(cfg.eval_tasks, -1)
        weights, bias = metrics.ridge_fit(feats[test], flat_code(test), cfg.ridge_lambda, cfg.ridge_cg_iters,
                                          intercept=True, penalise_intercept=True)
        prediction = feats[ood] @ weights + bias
        result["r2_ood"] = metrics.r2_score(prediction, flat_code(ood))
        result["r2_ood_pooled"] = metrics.pooled_r2(prediction, flat_code(ood))
        result["r2_test_pooled"] = metrics.pooled_r2(feats[test] @ weights + bias, flat_code(test))
    return result


def make_train(configs):
    """``(runs, init, chunk, evaluate)`` for every seed of same-shape ``configs`` (one compiled program)."""
    cfg = configs[0]
    experiments.check_group(configs, shape_key, "split, frac_ood and seeds")
    runs = hyperteacher_experiment._run_arrays(configs)  # the hyperteacher's splits and evaluation codes
    return (runs,) + experiments.compile_runs(cfg, runs, init_run, outer_step, evaluate_run)


def describe_group(group):
    c = group[0]
    splits = ", ".join(sorted({g.split for g in group}))
    return (f"in-context {c.model} (M={c.n_modules}, K={c.max_hot}, d_model {c.d_model}) on {splits}: "
            f"{len(group)} config(s) x {len(c.seeds)} seed(s), {c.outer_steps} steps")


def train_group(configs, log=print):
    """Train every seed of same-shape ``configs`` in one compiled program; ``(history, wall_time_s)``."""
    ood = configs[0].eval_set_names().index("ood")

    def describe(step_metrics, evaluation):
        text = f"loss {np.mean(step_metrics['loss'][-1]):.3f}  train acc {np.mean(step_metrics['accuracy'][-1]):.3f}"
        if evaluation is not None:
            text += f"  ood acc {np.mean(evaluation['accuracy'][:, ood]):.3f}"
        return text

    return experiments.train_compiled(make_train, configs, describe, log)


def train_and_store(configs, log=print):
    experiments.train_and_store(sys.modules[__name__], configs, log)


def count_params(cfg: InContextConfig) -> int:
    from compgen import models

    return models.count_params(jax.eval_shape(cfg.build_model().init, jax.random.key(0)))


def flops_per_step(cfg: InContextConfig) -> float:
    """Rough FLOPs of one outer step of one run: 6 x parameters x tokens (forward + backward) plus
    attention scores, plus the teacher. An estimate for scheduling, not a measurement."""
    p = count_params(cfg)
    tokens = cfg.shots_support + cfg.shots_query
    attention = 6 * 2 * cfg.num_layers * cfg.d_model * (cfg.shots_support ** 2 + cfg.shots_query * cfg.shots_support)
    teacher = 2 * (tokens + cfg.norm_inputs) * (cfg.n_in * cfg.teacher_hidden + 2 * cfg.teacher_hidden ** 2
                                                + cfg.teacher_hidden * cfg.n_out)
    return float(cfg.meta_batch * (6 * p * tokens + attention + teacher))


def training_cost(cfg: InContextConfig) -> float:
    return flops_per_step(cfg) * cfg.outer_steps * len(cfg.seeds)


def run(configs, force: bool = False, workers: int | None = None, log=print):
    """Results for each config (a list, in order): dicts of arrays with a leading seed axis.

    Keys: ``steps/{loss,accuracy,grad_norm,skipped}`` (seed, step); ``eval/{loss,accuracy}`` (seed, eval, set);
    with the probe ``eval/r2_ood`` (seed, eval, 2M) and ``eval/r2_{ood,test}_pooled`` (seed, eval); ``eval_steps``.
    """
    return experiments.run(sys.modules[__name__], configs, force, workers, log)
