"""Learners by name: the paper's, the in-context ones and a user's own, all through one registry.

A :class:`Learner` is a name, what kind of learner it is and a ``build(cfg)`` that returns the model for a
section's config: a :class:`compgen.models.Model` (``kind="fewshot"``: adapted by the inner loop) or an
:class:`compgen.models.incontext.InContextModel` (``kind="incontext"``: reads the support set in its forward pass).
A config's ``model`` field names one, in either of two ways:

* a registered name (:func:`register`): the paper's four and the in-context three are registered by the library
  (:func:`is_library`; their names cannot be registered again), and a notebook or a script registers its own the
  same way;
* an import path ``package.module:attribute`` whose attribute is a :class:`Learner` or a ``build`` function defined
  in that module: it works in every process that can import it (worker processes and Ray tasks included) and needs
  no registration.

A learner defined outside the library is checked when a config names it (:func:`check`: every failure is one
:class:`ParameterError` line naming the learner) and keyed in the results store by what it computes
(:func:`code_of`): the programs its functions lower to at the config's shapes.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from compgen.models.base import Model, count_params
from compgen.models.incontext import InContextModel
from compgen.params import ParameterError

# kind -> how errors name one learner of the kind, and several
KINDS = {
    "fewshot": ("an inner-loop learner", "inner-loop learners"),
    "incontext": ("an in-context learner", "in-context learners"),
}
MODEL_TYPES = {"fewshot": Model, "incontext": InContextModel}  # what a learner of each kind builds
# The support and query points of the shapes a user's learner is checked and keyed at: two sizes, so that a learner
# whose programs change with the number of points (a branch on a shape) is keyed by both.
PROBE_SIZES = ((3, 2), (5, 4))
PROBE_POINTS = PROBE_SIZES[0]
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")  # a registered name: no blanks, no ':' (import paths have one)


@dataclass(frozen=True)
class Learner:
    """A learner as the sections train it.

    ``build(cfg)`` returns the model for a section's config (it reads the fields it needs: ``n_in``, ``n_out``,
    ``hidden``, ``num_hidden``, ``n_templates``, ... and raises ``ValueError`` for sizes it cannot take);
    ``label`` names it in tables and figures; ``sized_by``: the config fields that size it (besides ``n_in`` and
    ``n_out``), listed in run labels; its FLOPs per step are derived once per learner and values of these fields.
    Each field is checked on construction (one :class:`ParameterError` line).
    """

    name: str
    build: Callable
    kind: str = "fewshot"
    label: str = ""
    sized_by: tuple = ("hidden", "num_hidden")

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ParameterError(f"a learner's name must be a non-empty string, got {self.name!r}")
        if self.kind not in KINDS:
            raise ParameterError(f"learner {self.name!r}: kind must be one of {tuple(KINDS)}, got {self.kind!r}")
        if not callable(self.build):
            raise ParameterError(f"learner {self.name!r}: build must be a function build(cfg), got {self.build!r}")
        if not isinstance(self.label, str):
            raise ParameterError(f"learner {self.name!r}: label must be a string, got {self.label!r}")
        if not (isinstance(self.sized_by, tuple) and all(isinstance(f, str) for f in self.sized_by)):
            raise ParameterError(
                f"learner {self.name!r}: sized_by must be a tuple of field names, got {self.sized_by!r}"
            )
        if not self.label:
            object.__setattr__(self, "label", self.name)


_REGISTRY: dict = {}
_LIBRARY: dict = {}  # name -> the Learner the library registered under it (:func:`seal_library`)


def register(name_or_learner, build: Callable | None = None, *, replace: bool = False, **fields) -> Learner:
    """Register a learner: ``register(Learner(...))`` or ``register(name, build, kind=..., label=...)``.

    A name is letters, digits, ``_``, ``.`` and ``-`` (no blanks, no ``:``). A name that is registered already is
    refused unless ``replace=True`` or its ``build`` is a new definition of the same function (a notebook cell
    run twice: same module and qualified name); the library's names never. Returns the learner."""
    found = name_or_learner if isinstance(name_or_learner, Learner) else Learner(name_or_learner, build, **fields)
    if not NAME.fullmatch(found.name):
        raise ParameterError(
            f"a registered learner's name is letters, digits, '_', '.' and '-' (no blanks; ':' marks an import "
            f"path), got {found.name!r}"
        )
    if found.name in _LIBRARY:
        raise ParameterError(
            f"learner {found.name!r} is the library's and cannot be registered again; choose another name"
        )
    old = _REGISTRY.get(found.name)
    if old is not None and not replace and _definition(old.build) != _definition(found.build):
        raise ParameterError(
            f"learner {found.name!r} is registered already (build {_definition(old.build)[1]}); "
            "pass replace=True to replace it, or choose another name"
        )
    _REGISTRY[found.name] = found
    return found


def seal_library() -> None:
    """Mark every learner registered so far as the library's (called once, by :mod:`compgen.models`)."""
    _LIBRARY.update(_REGISTRY)


def _definition(build) -> tuple:
    """Where ``build`` (under its ``functools.partial`` layers) is defined: (module, qualified name)."""
    function = _function(build)
    return getattr(function, "__module__", None), getattr(function, "__qualname__", repr(function))


def names(kind: str = "fewshot") -> tuple:
    """The registered learners of ``kind``, in the order they were registered."""
    return tuple(name for name, found in _REGISTRY.items() if found.kind == kind)


def get(name: str, kind: str | None = None) -> Learner:
    """The learner ``name`` names: a registered name or an import path ``package.module:attribute`` (module
    docstring); ``kind`` checks what kind it is. Every failure is one :class:`ParameterError` line."""
    if isinstance(name, str) and ":" in name:
        found = _imported(name)
    elif isinstance(name, str) and name in _REGISTRY:
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
    if not module_name or not attribute or ":" in attribute:
        raise ParameterError(f"model import path must be package.module:learner, got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except SystemExit as error:  # a module that exits on import is the user's module, said in one line
        raise ParameterError(f"model {path!r}: importing {module_name} exited (SystemExit {error.code!r})") from None
    except Exception as error:  # noqa: BLE001 - any failure to import is the user's module, said in one line
        raise ParameterError(f"model {path!r}: cannot import {module_name} ({_said(error)})") from None
    found = getattr(module, attribute, None)
    if found is None:
        raise ParameterError(f"model {path!r}: module {module_name} has no attribute {attribute!r}")
    if isinstance(found, Learner):
        return Learner(path, found.build, found.kind, found.label, found.sized_by)
    if not (inspect.isfunction(found) and found.__module__ == module.__name__):
        raise ParameterError(
            f"model {path!r}: {attribute} must be a Learner or a build(cfg) function defined in {module_name}"
        )
    return Learner(path, found, label=attribute)


def _said(error: BaseException) -> str:
    """An exception as one short line: ``Type: first line of its message``."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def label(name: str) -> str:
    """How tables name learner ``name``."""
    return get(name).label


def is_library(found: Learner) -> bool:
    """Whether ``found`` is one the library registered (its code is in the sections' own fingerprint)."""
    return _LIBRARY.get(found.name) is found


def _function(build):
    """The function under ``build``'s ``functools.partial`` layers."""
    while isinstance(build, functools.partial):
        build = build.func
    return build


def known_elsewhere(name: str | None) -> bool:
    """Whether another process (a worker, a Ray task) finds learner ``name`` too: no learner, one of the library's,
    or an import path; a name registered by a notebook or script is known in its own process only."""
    return name is None or ":" in name or is_library(get(name))


# --------------------------------------------------------------------------------------------- a user's learner


def model_of(cfg, kind: str):
    """``cfg``'s learner built for ``cfg`` (``cfg.model`` of ``kind``). A learner outside the library is checked
    (:func:`check`); any failure is one :class:`ParameterError` line naming the learner."""
    found = get(cfg.model, kind)
    return found.build(cfg) if is_library(found) else check(found, cfg)


def check(found: Learner, cfg):
    """The model ``found`` builds for ``cfg``, its functions traced at the config's shapes (:func:`probes`): the model
    is of its kind's type, its parameters and outputs are floating point, its outputs are ``(points, n_out)`` and have
    a derivative in the parameters; and built twice it lowers to the same programs (:func:`lowered`), so that its key
    is the same in every process. Whatever it raises or returns otherwise is one :class:`ParameterError` line naming
    the learner."""
    model = _built(found, cfg)
    if lowered(found, model, cfg) != lowered(found, _built(found, cfg), cfg):
        raise ParameterError(
            f"model {found.name!r}: two builds of it for the same config lower to different programs (a random or "
            "time-dependent build?), so its runs cannot be keyed: build the same model every time"
        )
    return model


def _built(found: Learner, cfg):
    try:
        model = found.build(cfg)
    except ParameterError:
        raise
    except Exception as error:  # noqa: BLE001 - a user's build may raise anything: one line naming it
        raise ParameterError(f"model {found.name!r}: build(cfg) raised {_said(error)}") from None
    wanted = MODEL_TYPES[found.kind]
    if not isinstance(model, wanted):
        raise ParameterError(
            f"model {found.name!r}: build(cfg) must return a {wanted.__module__}.{wanted.__name__}, "
            f"got {type(model).__name__}"
        )
    return model


def probes(found: Learner, model, cfg, points=PROBE_POINTS) -> dict:
    """``{name: (function, *argument shapes)}``: the functions of ``model`` (built by ``found`` for ``cfg``) at the
    config's shapes with ``points`` (support, query) points, and the gradient of the summed outputs with respect to the
    parameters (it holds any custom derivative rule). Checks what :func:`check` says, in one line."""
    n_support, n_query = points

    def shape_of(what, fn, *args):
        try:
            return jax.eval_shape(fn, *args)
        except Exception as error:  # noqa: BLE001 - a user's function may raise anything: one line naming it
            raise ParameterError(f"model {found.name!r}: {what} raised {_said(error)}") from None

    def floating(what, tree):
        bad = [leaf.dtype for leaf in jax.tree.leaves(tree) if not jnp.issubdtype(leaf.dtype, jnp.floating)]
        if bad or not jax.tree.leaves(tree):
            got = f"dtype {bad[0]}" if bad else "nothing"
            raise ParameterError(f"model {found.name!r}: {what} must be floating-point arrays, got {got}")

    key = jax.random.key(0)
    x_s = jax.ShapeDtypeStruct((n_support, cfg.n_in), jnp.float32)
    if found.kind == "fewshot":
        meta = shape_of("init(key)", model.init, key)
        floating("the meta-parameters init(key)", meta)
        fast = shape_of("fast_init(meta)", model.fast_init, meta)
        floating("the fast parameters fast_init(meta)", fast)
        features = shape_of("features(meta, x)", model.features, meta, x_s)
        output = shape_of("head(meta, fast, features)", model.head, meta, fast, features)
        loss = lambda meta, fast, x: jnp.sum(model.apply(meta, fast, x))
        found_probes = {
            "init": (model.init, key),
            "fast_init": (model.fast_init, meta),
            "features": (model.features, meta, x_s),
            "head": (model.head, meta, fast, features),
            "gradient": (jax.grad(loss, argnums=(0, 1)), meta, fast, x_s),
        }
        points = n_support
    else:
        params_ = shape_of("init(key)", model.init, key)
        floating("the parameters init(key)", params_)
        y_s = jax.ShapeDtypeStruct((n_support, cfg.n_out), jnp.float32)
        x_q = jax.ShapeDtypeStruct((n_query, cfg.n_in), jnp.float32)
        output = shape_of("apply(params, x_s, y_s, x_q)", model.apply, params_, x_s, y_s, x_q)
        shape_of("task_representation(params, x_s, y_s)", model.task_representation, params_, x_s, y_s)
        loss = lambda p, a, b, c: jnp.sum(model.apply(p, a, b, c))
        found_probes = {
            "init": (model.init, key),
            "apply": (model.apply, params_, x_s, y_s, x_q),
            "task_representation": (model.task_representation, params_, x_s, y_s),
            "gradient": (jax.grad(loss), params_, x_s, y_s, x_q),
        }
        points = n_query
    if not isinstance(output, jax.ShapeDtypeStruct) or output.shape != (points, cfg.n_out):
        got = getattr(output, "shape", type(output).__name__)
        raise ParameterError(
            f"model {found.name!r}: outputs must have shape (points, n_out) = {(points, cfg.n_out)}, got {got}"
        )
    floating("its outputs", output)
    gradient, *arguments = found_probes["gradient"]
    shape_of("the gradient of its outputs in its parameters (the meta-learning step needs one)", gradient, *arguments)
    return found_probes


def lowered(found: Learner, model, cfg) -> str:
    """The StableHLO of each of :func:`probes` at every size of :data:`PROBE_SIZES`, lowered for a CPU, without
    source locations, at JAX's default matmul precision, with the module's name dropped."""
    parts = []
    with jax.default_matmul_precision(None):
        for points in PROBE_SIZES:
            for name, (fn, *shapes) in probes(found, model, cfg, points).items():
                text = jax.jit(fn).trace(*shapes).lower(lowering_platforms=("cpu",)).as_text(debug_info=False)
                parts.append(f"{name} {points}\n" + re.sub(r"^module @\S+", "module", text, count=1))
    return "\n".join(parts)


def code_of(cfg) -> str | None:
    """What ``cfg``'s learner computes, as text, where it is defined outside the library (None inside it, whose code
    is in the section's fingerprint): the StableHLO of each of its :func:`probes` at both sizes of
    :data:`PROBE_SIZES` (:func:`lowered`), checked to be the same for two builds (:func:`check`).

    It holds everything the programs compute from: constants (a module's ``EXPERTS = 8``), ``functools.partial``
    arguments, helpers from any module or package, custom derivative rules. It cannot hold what no program shows:
    ``label`` and ``sized_by`` (presentation only) and the learner's behaviour at shapes other than the probes' (a
    run's own key, :func:`compgen.programs.run_key`, lowers its programs at its config's shapes); it changes with a
    function's name inside a program, a parameter's key, the JAX version, and (for host callbacks) every process."""
    found = get(cfg.model)
    if is_library(found):
        return None
    return lowered(found, _built(found, cfg), cfg)


def param_count(cfg) -> int:
    """Number of meta-parameters of ``cfg``'s learner, from their shapes alone (:func:`jax.eval_shape`, nothing
    allocated)."""
    return count_params(jax.eval_shape(cfg.build_model().init, jax.random.key(0)))
