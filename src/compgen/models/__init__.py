"""The four meta-learners of the paper (spec §2.5), shared by every few-shot section.

A model is data plus functions (:class:`Model`): ``init(key) -> meta`` draws the meta-parameters,
``fast_init(meta) -> fast`` gives a task's initial fast parameters, and the forward pass is split
into ``features(meta, x)``, the part that does not depend on the fast parameters, and
``head(meta, fast, features)``. For ANIL the body is all of ``features``, so the inner loop can
compute it once per task (:func:`compgen.meta.fewshot_loss`); for the others ``features`` is the
identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax

MODEL_NAMES = ("hnet_linear", "hnet_deepmlp", "anil", "maml")


@dataclass(frozen=True)
class Model:
    name: str
    init: Callable  # key -> meta pytree
    fast_init: Callable  # meta -> fast pytree (a task's starting point)
    features: Callable  # (meta, x (N, n_in)) -> features (N, ...)
    head: Callable  # (meta, fast, features) -> outputs (N, n_out)

    def apply(self, meta, fast, x):
        """Outputs of the model with fast parameters ``fast`` on inputs ``x``: (N, n_in) -> (N, n_out)."""
        return self.head(meta, fast, self.features(meta, x))


def make_model(name: str, n_in: int, n_out: int, hidden: int, num_hidden: int, n_templates: int = 0) -> Model:
    """One of :data:`MODEL_NAMES` for inputs of size ``n_in`` and ``n_out`` outputs.

    ``hidden``/``num_hidden`` size the base network (hypernetworks) or the whole MLP (ANIL, MAML);
    ``n_templates`` is the hypernetworks' number of modules T.
    """
    from compgen.models import hypernetwork, mlp

    for field, value in (("n_in", n_in), ("n_out", n_out), ("hidden", hidden), ("num_hidden", num_hidden)):
        if int(value) < 1:
            raise ValueError(f"{field} must be a positive integer, got {value!r}")
    if name in ("hnet_linear", "hnet_deepmlp"):
        if int(n_templates) < 1:
            raise ValueError(f"n_templates must be a positive integer for {name}, got {n_templates!r}")
        if num_hidden < 2:
            raise ValueError(f"num_hidden must be >= 2 for a hypernetwork (it has a hidden group), got {num_hidden}")
        return hypernetwork.hypernetwork(name, n_in, n_out, hidden, num_hidden, n_templates)
    if name == "anil":
        return mlp.anil(n_in, n_out, hidden, num_hidden)
    if name == "maml":
        return mlp.maml(n_in, n_out, hidden, num_hidden)
    raise ValueError(f"model must be one of {MODEL_NAMES}, got {name!r}")


def count_params(tree) -> int:
    """Number of scalars in a pytree."""
    return int(sum(leaf.size for leaf in jax.tree.leaves(tree)))
