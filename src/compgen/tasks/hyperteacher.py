"""The hyperteacher: a teacher network whose hidden layers a hypernetwork generates from a
modular task code (App. C.2).

A task is a code z in {0,1}^(2×M): one row per generated layer, each with 1..K of the M experts
active. The teacher is a 16-32-32-32-8 ReLU MLP in NTK parameterisation without biases; its two
hidden->hidden layers are a bias-free linear function of the flattened code (so one code entry
influences both generated layers, as in the authors' code). Its outputs, standardised per unit
over 1000 fixed inputs, become soft targets at temperature 0.1.

The universe of tasks is every (layer-0 combination, layer-1 combination) pair; a task id is
``c0 * S + c1`` with the combinations of :func:`layer_combinations`. The splits of App. C.2 pick
training and out-of-distribution (OOD) ids from it.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from compgen.initializers import truncated_normal
from compgen.tasks import support

SPLITS = support.SPLITS
N_GENERATED = 2  # generated layers (hidden_0, hidden_1)


# --------------------------------------------------------------------------------------------- teacher


def init_teacher(key, n_modules, n_in=16, hidden=32, n_out=8):
    """Teacher parameters from the run's fixed key; every entry TN(1.0) (App. C.2).

    ``{"input": (n_in, hidden), "output": (hidden, n_out), "bank": (2M, 2, hidden, hidden)}``.
    """
    k_io, k_bank = jax.random.split(key)
    k_in, k_out = jax.random.split(k_io)
    return {
        "input": truncated_normal(k_in, (n_in, hidden), 1.0),
        "output": truncated_normal(k_out, (hidden, n_out), 1.0),
        "bank": truncated_normal(k_bank, (N_GENERATED * n_modules, N_GENERATED, hidden, hidden), 1.0),
    }


def teacher_logits(params, code, x):
    """Raw teacher outputs for task ``code`` (2, M) on inputs ``x`` (N, n_in) -> (N, n_out)."""
    generated = jnp.tensordot(code.reshape(-1), params["bank"], axes=1)  # (2, hidden, hidden)
    h = jax.nn.relu(x @ params["input"] / jnp.sqrt(x.shape[-1]))
    for w in generated:
        h = jax.nn.relu(h @ w / jnp.sqrt(w.shape[0]))
    return h @ params["output"] / jnp.sqrt(h.shape[-1])


def sample_inputs(key, num, n_in):
    """Inputs i.i.d. Uniform[-1, 1]: (num, n_in)."""
    return jax.random.uniform(key, (num, n_in), minval=-1.0, maxval=1.0)


def standardised_logits(params, norm_inputs, code, x):
    """Teacher outputs standardised per unit with the task's mean/std over ``norm_inputs``: (N, n_out)."""
    reference = teacher_logits(params, code, norm_inputs)
    return (teacher_logits(params, code, x) - reference.mean(0)) / reference.std(0)


def task_data(params, norm_inputs, code, key, n_support, n_query, temperature=0.1):
    """Fresh support and query sets of one task: ``((x_s, y_s), (x_q, y_q))`` with soft targets y."""
    x = sample_inputs(key, n_support + n_query, params["input"].shape[0])
    targets = jax.nn.softmax(standardised_logits(params, norm_inputs, code, x) / temperature)
    return (x[:n_support], targets[:n_support]), (x[n_support:], targets[n_support:])


def kl_loss(prediction, target):
    """KL(target ‖ softmax(prediction)) summed over classes, averaged over points."""
    log_q = jax.nn.log_softmax(prediction)
    return jnp.mean(jnp.sum(jax.scipy.special.xlogy(target, target) - target * log_q, axis=-1))


def accuracy(prediction, target):
    """Fraction of points whose predicted class is the target's most likely class."""
    return jnp.mean(jnp.argmax(prediction, -1) == jnp.argmax(target, -1))


# --------------------------------------------------------------------------------------------- task universe


def check_modules(n_modules, max_hot):
    """Raise a ValueError naming the parameter unless 1 <= K <= M."""
    if isinstance(n_modules, bool) or int(n_modules) != n_modules or n_modules < 1:
        raise ValueError(f"n_modules must be a positive integer, got {n_modules!r}")
    if isinstance(max_hot, bool) or int(max_hot) != max_hot or not 1 <= max_hot <= n_modules:
        raise ValueError(f"max_hot (K) must be an integer in 1..n_modules={n_modules}, got {max_hot!r}")


def layer_combinations(n_modules, max_hot):
    """The S = Σ_{k<=K} C(M, k) expert combinations of one layer, ordered by k: (S, M) int32."""
    check_modules(n_modules, max_hot)
    return support.masks_up_to_k(n_modules, max_hot)


def task_codes(n_modules, max_hot, ids=None):
    """Codes of task ``ids`` (default: all S² tasks): (n, 2, M) float32."""
    combos = layer_combinations(n_modules, max_hot)
    s = len(combos)
    ids = np.arange(s * s) if ids is None else np.asarray(ids)
    return np.stack([combos[ids // s], combos[ids % s]], axis=1).astype(np.float32)


def task_split(n_modules, max_hot, split="random", frac_ood=0.25, seed=0, max_redraws=100):
    """Training and OOD task ids of a split (App. C.2): ``(train (n,), ood (m,), redraws)``.

    * ``random``: a permutation of all tasks from ``seed``; the last ⌊frac_ood·S²⌋ are OOD. The
      split is re-drawn (``redraws`` counts how often) until every expert of every layer is active in
      some training task, so the training support is compositional (:func:`compgen.tasks.support.random_split`).
    * ``non_compositional``: OOD = every task whose last generated layer uses expert M-1.
    * ``connected`` / ``disconnected`` (K = 2, M even and > 4): training tasks whose per-layer
      combinations are one-hots or ring pairs at distance 1 and 2 / both layers 1-hot or both 2-hot
      within one half of the experts; OOD = the tasks in neither set.
    """
    check_modules(n_modules, max_hot)
    codes = task_codes(n_modules, max_hot)
    return support.layered_split(codes, max_hot, split, frac_ood, seed, max_redraws, what="tasks")


SPLIT_CHECK_MAX = 100_000  # tasks up to which checking a split draws it (:func:`check_split`)


@functools.lru_cache(maxsize=256)  # a sweep checks one split for each of its models
def check_split(n_modules, max_hot, split="random", frac_ood=0.25, seed=0):
    """Raise ``ValueError`` where :func:`task_split` would, without building the whole universe when it is large:
    a universe of at most :data:`SPLIT_CHECK_MAX` tasks is split as training will split it; a larger one is checked
    by counting (both sets non-empty; the ring splits' conditions). A random split of a larger universe leaves an
    expert out of training only with negligible probability, and :func:`task_split` still checks it when it runs."""
    check_modules(n_modules, max_hot)
    n_tasks = sum(math.comb(n_modules, k) for k in range(1, max_hot + 1)) ** 2
    if n_tasks <= SPLIT_CHECK_MAX:
        task_split(n_modules, max_hot, split, frac_ood, seed)
        return
    if split not in support.SPLITS:
        raise ValueError(f"split must be one of {support.SPLITS}, got {split!r}")
    if not 0.0 < frac_ood < 1.0:
        raise ValueError(f"frac_ood must lie strictly between 0 and 1, got {frac_ood!r}")
    if split in ("connected", "disconnected"):
        support.check_ring_split(n_modules, max_hot, split)
    elif split == "random" and int(math.floor(frac_ood * n_tasks)) in (0, n_tasks):
        raise ValueError(f"frac_ood={frac_ood} leaves no training or no OOD task of {n_tasks}")


def ood_k_values(n_modules):
    """The k of the ``ood_k`` evaluation sets: powers of two up to M."""
    return tuple(2**i for i in range(int(np.log2(n_modules)) + 1))


def sample_codes(key, codes, num):
    """``num`` codes drawn uniformly with replacement from ``codes`` (n, 2, M)."""
    return jnp.asarray(codes)[jax.random.randint(key, (num,), 0, len(codes))]


def sample_k_hot_codes(key, n_modules, k, num):
    """``num`` codes with k distinct experts drawn uniformly in each layer independently: (num, 2, M)."""
    scores = jax.random.uniform(key, (num, N_GENERATED, n_modules))
    kth = jnp.sort(scores, axis=-1)[..., n_modules - k][..., None]
    return (scores >= kth).astype(jnp.float32)


def evaluation_codes(key, n_modules, max_hot, train_ids, ood_ids, num):
    """The fixed evaluation sets of App. C.2: ``{name: codes (num, 2, M) or None}``.

    ``valid``/``test`` draw from the training tasks, ``ood`` from the OOD tasks, and ``ood_k`` from the
    OOD tasks whose every layer has exactly k experts (k <= K; None when there are none) or, for
    k > K, from fresh k-hot codes.
    """
    codes = task_codes(n_modules, max_hot)
    k_train, k_test, k_valid, k_ood, k_aux = jax.random.split(key, 5)
    sets = {
        "valid": sample_codes(k_valid, codes[train_ids], num),
        "test": sample_codes(k_test, codes[train_ids], num),
        "ood": sample_codes(k_ood, codes[ood_ids], num),
    }
    ood = codes[ood_ids]
    for i, k in enumerate(ood_k_values(n_modules)):
        set_key = jax.random.fold_in(k_aux, i)
        if k <= max_hot:
            exact = ood[(ood.sum(-1) == k).all(-1)]
            sets[f"ood_{k}"] = sample_codes(set_key, exact, num) if len(exact) else None
        else:
            sets[f"ood_{k}"] = sample_k_hot_codes(set_key, n_modules, k, num)
    return sets
