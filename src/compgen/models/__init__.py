"""The learners: the paper's four meta-learners (App. D), shared by every few-shot section, and the in-context
learners of :mod:`compgen.models.incontext`, each registered by name (:mod:`compgen.models.learners`, where a
user registers their own). A meta-learner is a :class:`Model`: data plus pure functions."""

from __future__ import annotations

from compgen.models import hypernetwork, incontext, mlp
from compgen.models.base import Model, count_params
from compgen.models.learners import (
    Learner,
    check,
    code_of,
    get,
    is_library,
    known_elsewhere,
    label,
    model_of,
    names,
    param_count,
    register,
    seal_library,
)

__all__ = [
    "Learner",
    "Model",
    "check",
    "code_of",
    "count_params",
    "get",
    "is_library",
    "known_elsewhere",
    "label",
    "model_of",
    "names",
    "param_count",
    "register",
]

HNET_SIZES = ("hidden", "num_hidden", "n_templates")


def _hypernetwork(name):
    return lambda cfg: hypernetwork.hypernetwork(name, cfg.n_in, cfg.n_out, cfg.hidden, cfg.num_hidden, cfg.n_templates)


register("hnet_linear", _hypernetwork("hnet_linear"), label="Linear hnet", sized_by=HNET_SIZES)
register("hnet_deepmlp", _hypernetwork("hnet_deepmlp"), label="Nonlinear hnet", sized_by=HNET_SIZES)
register("anil", lambda cfg: mlp.anil(cfg.n_in, cfg.n_out, cfg.hidden, cfg.num_hidden), label="ANIL")
register("maml", lambda cfg: mlp.maml(cfg.n_in, cfg.n_out, cfg.hidden, cfg.num_hidden), label="MAML")

_IN_CONTEXT = dict(kind="incontext", sized_by=("d_model", "num_layers"))
register("kv_memory", lambda cfg: incontext.kv_memory(cfg.spec()), label="KV memory (meta seq2seq)", **_IN_CONTEXT)
register("transformer", lambda cfg: incontext.transformer(cfg.spec()), label="Transformer", **_IN_CONTEXT)
register(
    "bottleneck", lambda cfg: incontext.bottleneck(cfg.spec()), label="Bottleneck transformer + hnet", **_IN_CONTEXT
)
seal_library()  # the names above are the library's: never registered again, keyed by the library's code
