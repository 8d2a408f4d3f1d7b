"""A meta-learner as data plus functions (App. D).

``init(key) -> meta`` draws the meta-parameters, ``fast_init(meta) -> fast`` gives a task's initial fast
parameters, and the forward pass is split into ``features(meta, x)``, the part that does not depend on the
fast parameters, and ``head(meta, fast, features)``. For ANIL the body is all of ``features``, so the inner
loop can compute it once per task (:func:`compgen.meta.adapt`); for the others ``features`` is the identity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax


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


def count_params(tree) -> int:
    """Number of scalars in a pytree."""
    return int(sum(leaf.size for leaf in jax.tree.leaves(tree)))
