"""The hyperteacher experiments (paper §4.1, spec §2): few-shot meta-learning of tasks generated
by a modular teacher, with the four models of spec §2.5.

Per outer step each run samples ``meta_batch`` training tasks, draws their support and query sets
from the teacher inside the compiled step, adapts each model's fast parameters with ``inner_steps``
AdamW steps on the support set and takes a clipped AdamW step on the exact second-order
meta-gradient of the query KL (spec §5.1). Every ``eval_every`` steps it is evaluated, with the same
adaptation, on fixed task sets: ``valid``/``test`` (training tasks), ``ood`` and ``ood_k`` (spec
§2.4), and the linear decodability of the task code from the adapted fast parameters is probed
(spec §2.7).

``run(configs)`` trains every seed of every config; configs that differ only in split, frac_ood or
seeds share one compiled program, vmapped over (config, seed). Results are cached in the store. The
paper's per-model values, the presets and the figures' config lists live in
:mod:`compgen.experiments.hyperteacher_presets`, so that tuning a preset does not change the code
fingerprint the runs are stored under.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from compgen import experiments, meta, metrics, models
from compgen.models import hypernetwork, mlp
from compgen.tasks import hyperteacher as ht
from compgen.tasks import support

OUTER_SCHEDULES = ("constant", "warmup_cosine")
KIND = "hyperteacher"

@dataclass(frozen=True)
class HyperteacherConfig:
    """One hyperteacher training configuration; every seed in ``seeds`` is trained.

    The defaults are the paper's for the linear hypernetwork at M = 8, K = 2 (spec §2.6);
    :func:`make_config` fills in another model's hyper-parameters.
    """

    model: str = "hnet_linear"
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
    hidden: int = 128
    num_hidden: int = 3
    templates_per_module: int = 4  # T = templates_per_module * M (hypernetworks)
    inner_steps: int = 10
    inner_batch: int | None = None  # None: full support set every inner step
    remat: bool = True  # recompute inner steps in the meta-backward: about half the memory (meta.inner_adapt)
    inner_lr: float = 0.3
    inner_weight_decay: float = 1e-4
    gradient: str = "second_order"
    outer_steps: int = 200_000
    meta_batch: int = 128
    outer_lr: float = 1e-3
    outer_schedule: str = "constant"
    warmup_steps: int = 0
    clip_norm: float = 1.0
    outer_weight_decay: float = 1e-2
    eval_every: int = 1000
    eval_tasks: int = 1024
    eval_chunk: int = 64  # tasks adapted at once during evaluation (memory only)
    probe: bool = True
    ridge_lambda: float = 1.0
    ridge_cg_iters: int | None = 10
    seeds: tuple = (2020, 2021, 2022)

    def __post_init__(self):
        if self.model not in models.MODEL_NAMES:
            raise ValueError(f"model must be one of {models.MODEL_NAMES}, got {self.model!r}")
        positive = ("n_modules", "max_hot", "n_in", "n_out", "teacher_hidden", "norm_inputs", "shots_support",
                    "shots_query", "hidden", "num_hidden", "templates_per_module", "inner_steps", "outer_steps",
                    "meta_batch", "eval_every", "eval_tasks", "eval_chunk")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("temperature", "inner_lr", "outer_lr", "clip_norm", "ridge_lambda"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("inner_weight_decay", "outer_weight_decay", "warmup_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.inner_batch is not None and not 1 <= self.inner_batch:
            raise ValueError(f"inner_batch must be None (full batch) or a positive integer, got {self.inner_batch!r}")
        if self.gradient not in meta.GRADIENT_MODES:
            raise ValueError(f"gradient must be one of {meta.GRADIENT_MODES}, got {self.gradient!r}")
        if self.outer_schedule not in OUTER_SCHEDULES:
            raise ValueError(f"outer_schedule must be one of {OUTER_SCHEDULES}, got {self.outer_schedule!r}")
        if self.model.startswith("hnet") and self.num_hidden < 2:
            raise ValueError(f"num_hidden must be >= 2 for a hypernetwork, got {self.num_hidden}")
        if not self.seeds:
            raise ValueError("seeds must name at least one seed")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        ht.check_modules(self.n_modules, self.max_hot)
        ht.task_split(self.n_modules, self.max_hot, self.split, self.frac_ood, self.seeds[0])  # raises if invalid

    @property
    def n_templates(self) -> int:
        return self.templates_per_module * self.n_modules

    def build_model(self) -> models.Model:
        return models.make_model(self.model, self.n_in, self.n_out, self.hidden, self.num_hidden, self.n_templates)

    def eval_set_names(self):
        return ("valid", "test", "ood") + tuple(f"ood_{k}" for k in ht.ood_k_values(self.n_modules))


def shape_key(cfg: HyperteacherConfig):
    """Fields that fix the compiled program; configs equal here can be vmapped together."""
    varying = {"split", "frac_ood", "seeds"}
    return tuple((f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in varying)


CONFIG_CLASS = HyperteacherConfig


def code():
    """The modules whose source the numbers of this section depend on (see results.code_fingerprint)."""
    import compgen.tasks.teacher as teacher_module

    return (ht, support, teacher_module, meta, metrics, models, hypernetwork, mlp, experiments, sys.modules[__name__])


# --------------------------------------------------------------------------------------------- training


def _inner_optimizer(cfg):
    return meta.inner_optimizer(cfg.inner_lr, cfg.inner_weight_decay)


def _outer_optimizer(cfg):
    lr = cfg.outer_lr
    if cfg.outer_schedule == "warmup_cosine":
        lr = optax.warmup_cosine_decay_schedule(0.0, cfg.outer_lr, max(cfg.warmup_steps, 1), cfg.outer_steps,
                                                end_value=0.05 * cfg.outer_lr)
    return meta.outer_optimizer(lr, cfg.clip_norm, cfg.outer_weight_decay)


def _task(cfg, state, run, code, key):
    return ht.task_data(state["teacher"], run["norm_inputs"], code, key, cfg.shots_support, cfg.shots_query,
                        cfg.temperature)


def init_run(cfg: HyperteacherConfig, run):
    """Initial state of one run: the teacher from the seed's key, the model's meta-parameters, AdamW state.

    Keys: the seed's key draws the teacher, the normalisation inputs, the split and the evaluation codes
    (as in the authors' code); ``fold_in(key, 1)`` the model, ``fold_in(key, 2)`` the evaluation data and
    ``split(key, 5)[0]`` the training tasks.
    """
    root = run["seed_key"]
    params = cfg.build_model().init(jax.random.fold_in(root, 1))
    return {
        "teacher": ht.init_teacher(root, cfg.n_modules, cfg.n_in, cfg.teacher_hidden, cfg.n_out),
        "meta": params,
        "opt_state": _outer_optimizer(cfg).init(params),
        "key": jax.random.split(root, 5)[0],
    }


def task_loss(cfg, model, params, support_set, query_set, key, precompute_features=True):
    """Query KL of one task after adaptation, and its accuracy: ``(loss, accuracy)``."""
    loss, (_, prediction) = meta.fewshot_loss(model, params, support_set, query_set, ht.kl_loss,
                                              _inner_optimizer(cfg), cfg.inner_steps, key, cfg.inner_batch,
                                              cfg.gradient, precompute_features, cfg.remat)
    return loss, ht.accuracy(prediction, query_set[1])


def outer_step(cfg: HyperteacherConfig, run, state):
    """One outer step of one run: sample tasks, adapt, meta-gradient, clipped AdamW (skips non-finite)."""
    model = cfg.build_model()
    key, k_codes, k_tasks = jax.random.split(state["key"], 3)
    codes = run["train_codes"][jax.random.randint(k_codes, (cfg.meta_batch,), 0, run["n_train"])]

    def one_task(params, code, task_key):
        k_data, k_inner = jax.random.split(task_key)
        support_set, query_set = _task(cfg, state, run, code, k_data)
        return task_loss(cfg, model, params, support_set, query_set, k_inner)

    (loss, acc), grads = meta.mean_over_tasks(one_task, state["meta"], codes,
                                              jax.random.split(k_tasks, cfg.meta_batch))
    updates, opt_state = _outer_optimizer(cfg).update(grads, state["opt_state"], state["meta"])
    params = optax.apply_updates(state["meta"], updates)
    step_metrics = {"loss": loss, "accuracy": acc, "grad_norm": optax.tree.norm(grads),
                    "skipped": opt_state.total_notfinite}
    return {**state, "meta": params, "opt_state": opt_state, "key": key}, step_metrics


def evaluate_run(cfg: HyperteacherConfig, run, state):
    """Metrics of one run on its fixed evaluation sets (spec §2.4, §2.7).

    Per set (:meth:`HyperteacherConfig.eval_set_names`; NaN where the set is empty): query loss and
    accuracy, support loss before and after adaptation. With ``probe``: a ridge decoder from the
    adapted fast parameters to the task code, fitted on ``test`` and scored on ``ood`` (R² per code
    entry (2M,), and pooled over entries).
    """
    model = cfg.build_model()
    params = state["meta"]
    data_keys = jax.random.split(jax.random.fold_in(run["seed_key"], 2), len(cfg.eval_set_names()))

    def task_metrics(args):
        code, key = args
        k_data, k_inner = jax.random.split(key)
        support_set, query_set = _task(cfg, state, run, code, k_data)
        fast, _ = meta.adapt(model, params, support_set, ht.kl_loss, _inner_optimizer(cfg), cfg.inner_steps, k_inner,
                             cfg.inner_batch)
        prediction = model.apply(params, fast, query_set[0])
        support_loss = lambda f: ht.kl_loss(model.apply(params, f, support_set[0]), support_set[1])
        out = {"loss": ht.kl_loss(prediction, query_set[1]), "accuracy": ht.accuracy(prediction, query_set[1]),
               "inner_loss_init": support_loss(model.fast_init(params)), "inner_loss_final": support_loss(fast)}
        return out, ravel_pytree(fast)[0]

    names = cfg.eval_set_names()
    keys = jax.vmap(lambda k: jax.random.split(k, cfg.eval_tasks))(data_keys)
    # two compiled maps: the probe's sets (test, ood) return the adapted fast parameters, the rest do not
    probed = [names.index("test"), names.index("ood")]
    others = [i for i in range(len(names)) if i not in probed]
    outputs = {}
    for indices, keep in ((probed, True), (others, False)):
        flat = lambda a: a[jnp.asarray(indices)].reshape((-1,) + a.shape[2:])
        fn = task_metrics if keep else (lambda args: (task_metrics(args)[0], None))
        out, feats = jax.lax.map(fn, (flat(run["eval_codes"]), flat(keys)), batch_size=cfg.eval_chunk)
        for j, i in enumerate(indices):
            part = slice(j * cfg.eval_tasks, (j + 1) * cfg.eval_tasks)
            outputs[i] = ({k: jnp.where(run["eval_valid"][i], v[part].mean(), jnp.nan) for k, v in out.items()},
                          None if feats is None else feats[part])
    result = {k: jnp.stack([outputs[i][0][k] for i in range(len(names))]) for k in outputs[0][0]}
    features = {"test": outputs[probed[0]][1], "ood": outputs[probed[1]][1]}
    if cfg.probe:
        flat_code = lambda codes: codes.reshape(codes.shape[0], -1)
        test_codes, ood_codes = (flat_code(run["eval_codes"][cfg.eval_set_names().index(n)]) for n in ("test", "ood"))
        weights, bias = metrics.ridge_fit(features["test"], test_codes, cfg.ridge_lambda, cfg.ridge_cg_iters,
                                          intercept=True, penalise_intercept=True)
        prediction = features["ood"] @ weights + bias
        result["r2_ood"] = metrics.r2_score(prediction, ood_codes)
        result["r2_ood_pooled"] = metrics.pooled_r2(prediction, ood_codes)
        result["r2_test_pooled"] = metrics.pooled_r2(features["test"] @ weights + bias, test_codes)
    return result


def run_arrays(configs):
    """Per-run inputs for a group of same-shape configs, flattened over (config, seed)."""
    cfg = configs[0]
    n_universe = len(ht.task_codes(cfg.n_modules, cfg.max_hot))
    rows = []
    for c in configs:
        for seed in c.seeds:
            train, ood, _ = ht.task_split(c.n_modules, c.max_hot, c.split, c.frac_ood, seed)
            codes = ht.task_codes(c.n_modules, c.max_hot)
            padded = np.zeros((n_universe, 2, c.n_modules), np.float32)
            padded[: len(train)] = codes[train]
            root = jax.random.key(seed)
            sets = ht.evaluation_codes(root, c.n_modules, c.max_hot, train, ood, c.eval_tasks)
            names = c.eval_set_names()
            fallback = np.asarray(sets["ood"])
            rows.append({
                "seed_key": root, "train_codes": padded, "n_train": len(train),
                "norm_inputs": ht.sample_inputs(root, c.norm_inputs, c.n_in),
                "eval_codes": np.stack([fallback if sets[n] is None else np.asarray(sets[n]) for n in names]),
                "eval_valid": np.array([sets[n] is not None for n in names]),
            })
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *rows)


def make_train(configs):
    """The compiled pieces of training every seed of same-shape ``configs`` together.

    Returns ``(runs, init, chunk, evaluate)`` as in :func:`compgen.experiments.teacher_student.make_train`.
    """
    cfg = configs[0]
    experiments.check_group(configs, shape_key, "split, frac_ood and seeds")
    runs = run_arrays(configs)
    return (runs,) + experiments.compile_runs(cfg, runs, init_run, outer_step, evaluate_run)


def describe_group(group):
    c = group[0]
    splits = ", ".join(sorted({g.split for g in group}))
    return (f"{c.model} (M={c.n_modules}, K={c.max_hot}, hidden {c.hidden}) on {splits}: "
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


def forward_macs(cfg: HyperteacherConfig):
    """Multiply-accumulates per data point of the model's features and head, and per weight generation."""
    sizes = [cfg.n_in] + [cfg.hidden] * cfg.num_hidden + [cfg.n_out]
    mlp_macs = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    generation = 0
    if cfg.model.startswith("hnet"):
        params = sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))
        width = cfg.n_templates if cfg.model == "hnet_linear" else hypernetwork.GENERATOR_WIDTH
        generation = width * params
    if cfg.model == "anil":
        return mlp_macs - cfg.hidden * cfg.n_out, cfg.hidden * cfg.n_out, 0
    return 0, mlp_macs, generation


def flops_per_step(cfg: HyperteacherConfig) -> float:
    """Analytic FLOPs of one outer step of one run (spec §7.1 conventions: backward = 2x forward,
    meta-backward through the unroll = 2x the inner loop)."""
    feature, head, generation = forward_macs(cfg)
    batch = cfg.inner_batch or cfg.shots_support
    inner = cfg.inner_steps * 3 * (batch * head + generation)
    shots = cfg.shots_support + cfg.shots_query
    teacher = (shots + cfg.norm_inputs) * (cfg.n_in * cfg.teacher_hidden + 2 * cfg.teacher_hidden ** 2
                                           + cfg.teacher_hidden * cfg.n_out)
    per_task = 3 * inner + 3 * shots * feature + 3 * (cfg.shots_query * head + generation) + teacher
    return 2.0 * per_task * cfg.meta_batch


def training_cost(cfg: HyperteacherConfig) -> float:
    return flops_per_step(cfg) * cfg.outer_steps * len(cfg.seeds)


def run(configs, force: bool = False, workers: int | None = None, log=print):
    """Results for each config (a list, in order): dicts of arrays with a leading seed axis.

    Keys: ``steps/{loss,accuracy,grad_norm,skipped}`` (seed, step); ``eval/{loss,accuracy,inner_loss_init,
    inner_loss_final}`` (seed, eval, set); with the probe ``eval/r2_ood`` (seed, eval, 2M) and
    ``eval/r2_{ood,test}_pooled`` (seed, eval); ``eval_steps`` (eval,).
    """
    return experiments.run(sys.modules[__name__], configs, force, workers, log)
