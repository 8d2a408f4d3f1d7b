"""Learners by name: the paper's, the in-context ones and a user's own, all through one registry.

A :class:`Learner` is a name, what kind of learner it is and a ``build(cfg)`` that returns the model for a
section's config: a :class:`compgen.models.Model` (``kind="fewshot"``: adapted by the inner loop) or an
:class:`compgen.models.incontext.InContextModel` (``kind="incontext"``: reads the support set in its forward pass).
A config's ``model`` field names one, in either of two ways:

* a registered name (:func:`register`): the paper's four and the in-context three are registered by the library,
  and a notebook or a script registers its own the same way;
* an import path ``package.module:attribute`` whose attribute is a :class:`Learner` or a ``build`` function: it
  works in every process that can import it (worker processes and Ray tasks included) and needs no registration.

A learner defined outside the library has its code in the results store's key (:func:`code_of`): editing it
retrains its runs and no other.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass

import jax

from compgen.models.base import count_params
from compgen.params import ParameterError

# kind -> how errors name one learner of the kind, and several
KINDS = {
    "fewshot": ("an inner-loop learner", "inner-loop learners"),
    "incontext": ("an in-context learner", "in-context learners"),
}


@dataclass(frozen=True)
class Learner:
    """A learner as the sections train it.

    ``build(cfg)`` returns the model for a section's config (it reads the fields it needs: ``n_in``, ``n_out``,
    ``hidden``, ``num_hidden``, ``n_templates``, ... and raises ``ValueError`` for sizes it cannot take);
    ``label`` names it in tables and figures; ``sized_by``: the config fields that size it (besides ``n_in`` and
    ``n_out``), listed in run labels; its FLOPs per step are derived once per learner and values of these fields.
    """

    name: str
    build: Callable
    kind: str = "fewshot"
    label: str = ""
    sized_by: tuple = ("hidden", "num_hidden")

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Learner kind must be one of {tuple(KINDS)}, got {self.kind!r}")
        if not self.label:
            object.__setattr__(self, "label", self.name)


_REGISTRY: dict = {}


def register(name_or_learner, build: Callable | None = None, **fields) -> Learner:
    """Register a learner: ``register(Learner(...))`` or ``register(name, build, kind=..., label=...)``.

    Registering a name again replaces it (a notebook cell run twice). Returns the learner."""
    found = name_or_learner if isinstance(name_or_learner, Learner) else Learner(name_or_learner, build, **fields)
    if ":" in found.name:
        raise ValueError(f"a registered learner's name must not contain ':' (import paths do), got {found.name!r}")
    _REGISTRY[found.name] = found
    return found


def names(kind: str = "fewshot") -> tuple:
    """The registered learners of ``kind``, in the order they were registered."""
    return tuple(name for name, found in _REGISTRY.items() if found.kind == kind)


def get(name: str, kind: str | None = None) -> Learner:
    """The learner ``name`` names: a registered name or an import path ``package.module:attribute`` (module
    docstring); ``kind`` checks what kind it is. Every failure is one :class:`ParameterError` line."""
    if ":" in name:
        found = _imported(name)
    elif name in _REGISTRY:
        found = _REGISTRY[name]
    else:
        known = names(kind) if kind else tuple(_REGISTRY)
        raise ParameterError(
            f"model must be one of {known} (registered in this process) or an import path package.module:learner, "
            f"got {name!r}"
        )
    if kind is not None and found.kind != kind:
        raise ParameterError(f"model {name!r} is {KINDS[found.kind][0]}; this section trains {KINDS[kind][1]}")
    return found


def _imported(path: str) -> Learner:
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ParameterError(f"model import path must be package.module:learner, got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - any failure to import is the user's module, said in one line
        raise ParameterError(f"model {path!r}: cannot import {module_name} ({type(error).__name__}: {error})") from None
    found = getattr(module, attribute, None)
    if found is None:
        raise ParameterError(f"model {path!r}: module {module_name} has no attribute {attribute!r}")
    if isinstance(found, Learner):
        return Learner(path, found.build, found.kind, found.label, found.sized_by)
    if not callable(found):
        raise ParameterError(f"model {path!r}: {attribute} is neither a Learner nor a build(cfg) function")
    return Learner(path, found, label=attribute)


def label(name: str) -> str:
    """How tables name learner ``name``."""
    return get(name).label


def is_library(found: Learner) -> bool:
    """Whether ``found`` is defined inside this library (its code is in the sections' own fingerprint)."""
    return getattr(_function(found.build), "__module__", "").split(".")[0] == "compgen"


def _function(build):
    """The function under ``build``'s ``functools.partial`` layers (a partial's own module is ``functools``)."""
    while isinstance(build, functools.partial):
        build = build.func
    return build


def known_elsewhere(name: str | None) -> bool:
    """Whether another process (a worker, a Ray task) finds learner ``name`` too: no learner, one of the library's,
    or an import path; a name registered by a notebook or script is known in its own process only."""
    return name is None or ":" in name or is_library(get(name))


def code_of(name: str) -> str | None:
    """The code that defines learner ``name`` when it lives outside the library (None inside it): the source of
    its module and of the modules of the same top-level package that it imports; for a learner defined in a
    notebook or script (``__main__``), the source of its ``build`` and of every function and class of that
    namespace it reaches by name."""
    found = get(name)
    if is_library(found):
        return None
    build = _function(found.build)
    module = sys.modules.get(getattr(build, "__module__", "") or "")
    if module is None or getattr(module, "__file__", None) is None or module.__name__ == "__main__":
        return _namespace_source(build)
    return _package_source(module)


def _package_source(module) -> str:
    top, seen, todo, parts = module.__name__.split(".")[0], set(), [module], []
    while todo:
        current = todo.pop()
        if current.__name__ in seen:
            continue
        seen.add(current.__name__)
        parts.append(f"{current.__name__}\n{inspect.getsource(current)}")
        for value in vars(current).values():
            owner = value if isinstance(value, types.ModuleType) else sys.modules.get(getattr(value, "__module__", ""))
            name = getattr(owner, "__name__", "")
            if isinstance(owner, types.ModuleType) and name.split(".")[0] == top and name != "__main__":
                todo.append(owner)
    return "\n".join(sorted(parts))


def _namespace_source(obj) -> str:
    """Source of ``obj`` and of the functions and classes of its own namespace that it names, transitively."""
    namespace = getattr(obj, "__globals__", None) or vars(sys.modules.get(obj.__module__, types.ModuleType("x")))
    seen, todo, parts = set(), [obj], []
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        try:
            parts.append(inspect.getsource(current))
        except (OSError, TypeError):
            parts.append(repr(current))
        for name in _names_used(current):
            value = namespace.get(name)
            if inspect.isfunction(value) or inspect.isclass(value):
                if getattr(value, "__module__", None) == getattr(obj, "__module__", None):
                    todo.append(value)
    return "\n".join(parts)


def _names_used(obj) -> set:
    """Global names the code of function ``obj`` (or of a class's methods) refers to, nested functions included."""
    codes = (
        [obj.__code__]
        if hasattr(obj, "__code__")
        else [v.__code__ for v in vars(obj).values() if hasattr(v, "__code__")]
    )
    found = set()
    while codes:
        code = codes.pop()
        found.update(code.co_names)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return found


def param_count(cfg) -> int:
    """Number of meta-parameters of ``cfg``'s learner, from their shapes alone (:func:`jax.eval_shape`, nothing
    allocated)."""
    return count_params(jax.eval_shape(cfg.build_model().init, jax.random.key(0)))
