"""The four meta-learners of the paper (App. D), shared by every few-shot section, and the in-context
learners of :mod:`compgen.models.incontext`. A model is a :class:`Model`: data plus pure functions."""

from __future__ import annotations

from compgen.models import hypernetwork, mlp
from compgen.models.base import Model, count_params

__all__ = ["MODEL_NAMES", "Model", "count_params", "make_model"]

MODEL_NAMES = ("hnet_linear", "hnet_deepmlp", "anil", "maml")


def make_model(name: str, n_in: int, n_out: int, hidden: int, num_hidden: int, n_templates: int = 0) -> Model:
    """One of :data:`MODEL_NAMES` for inputs of size ``n_in`` and ``n_out`` outputs.

    ``hidden``/``num_hidden`` size the base network (hypernetworks) or the whole MLP (ANIL, MAML);
    ``n_templates`` is the hypernetworks' number of modules T.
    """
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
