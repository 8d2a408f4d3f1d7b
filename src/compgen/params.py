"""One strict parameter layer for every config, the command line, notebook parameters and sweep files.

A config is a frozen dataclass deriving from :class:`Config`. Each field's type comes from its annotation
(``int``, ``float``, ``bool``, ``str``, ``tuple`` of seeds, or one of these ``| None``) and its allowed values
from :func:`field` metadata (``ge``, ``gt``, ``le``, ``lt``, ``choices``). Validation runs in
``__post_init__``, before anything is compiled, and is strict:

* an integer is an ``int`` (not a ``bool``, a float such as 25.5 or 1e3, nor a string such as "4"); on the command
  line and in the environment it is written in decimal digits (``010`` is 10, ``1_000`` is 1000; ``0x10`` is
  refused);
* a float is a finite number (``nan`` and ``inf`` are refused), given as an ``int`` or a ``float``; ``-0.0`` is
  stored as ``0.0`` (so the same computation has one results-store key);
* a boolean is ``True`` or ``False``, or one of the words true/false/1/0 in any case (:func:`parse_bool`: the one
  rule for configs, ``--set``, sweep files and notebook parameters);
* ``seeds`` is a non-empty list of distinct integers ``0 <= seed < 2**32`` (a PRNG key holds 32 bits of a seed, so
  larger ones would alias smaller ones);
* a string is at most :data:`MAX_TEXT` characters, and a field with ``choices`` takes one of them.

A :class:`ValueError` raised by a config's cross-field rules (:meth:`Config.check`) becomes a
:class:`ParameterError` too. The environment variables the library reads are parsed here as well, every one by the
same rule (:func:`env_text`): unset or empty is the default, blanks around a value are ignored, a value of blanks
only is refused; then as strictly as a field (:func:`env_int`: ASCII digits only; :func:`env_flag`: 0 or 1;
:func:`env_path`: a folder, ``~`` expanded). :func:`check_environment_names` refuses a ``COMPGEN_*`` variable the
library does not read (:data:`ENVIRONMENT`), naming the nearest one it does.

Every error is a :class:`ParameterError` naming the field, what is allowed and what was given.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import os
import re
import types
import typing

import numpy as np

SEED_LIMIT = 2**32  # seeds are 0 <= seed < SEED_LIMIT
MAX_TEXT = 1_000  # characters of a string field (a mask list of the paper is under 40)


class ParameterError(ValueError):
    """A parameter that is not allowed; the message names the field (and the file, where there is one).

    In a notebook (IPython) it shows as its one-line message, without a traceback, so papermill reports the cell's
    error in one line too."""

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


def field(default, *, ge=None, gt=None, le=None, lt=None, choices=None):
    """A dataclass field with its allowed range or choices (see module docstring)."""
    limits = {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt, choices=choices).items() if v is not None}
    return dataclasses.field(default=default, metadata=limits)


def positive(default):
    """An integer field that must be at least 1."""
    return field(default, ge=1)


# --------------------------------------------------------------------------------------------- single values


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _limits_text(meta) -> str:
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return " and ".join(f"{words[k]} {meta[k]}" for k in ("ge", "gt", "le", "lt") if k in meta)


def check_int(name, value, ge=None, gt=None, le=None, lt=None):
    """``value`` as an int, or a :class:`ParameterError` naming ``name``."""
    return _check(name, value, int, {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt).items() if v is not None})


def check_float(name, value, ge=None, gt=None, le=None, lt=None):
    """``value`` as a finite float, or a :class:`ParameterError` naming ``name``."""
    return _check(name, value, float, {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt).items() if v is not None})


def check_seeds(value, name="seeds"):
    """A tuple of distinct ints ``0 <= seed < 2**32`` from a list or tuple; refuses floats, strings, bools, a bare
    int."""
    if not isinstance(value, (list, tuple)):
        raise ParameterError(
            f"{name} must be a list of non-negative integers such as [2020, 2021], got {_short(value)}"
        )
    if not value:
        raise ParameterError(f"{name} must name at least one seed")
    if len(value) > 1_000:
        raise ParameterError(f"{name} must name at most 1000 seeds, got {len(value)}")
    for seed in value:
        if not _is_int(seed) or not 0 <= seed < SEED_LIMIT:
            raise ParameterError(
                f"{name} must be a list of non-negative integers below 2**32 such as [2020, 2021], "
                f"got {_short(list(value))} (entry {_short(seed)})"
            )
    if len(set(int(s) for s in value)) != len(value):
        raise ParameterError(f"{name} must not repeat a seed, got {list(value)!r}")
    return tuple(int(s) for s in value)


def _short(value, limit=80) -> str:
    """``repr(value)``, cut to ``limit`` characters (an error message stays one short line)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 15]}... ({len(text)} characters)"


def seeds_parameter(value, name="seeds"):
    """A notebook's ``seeds`` parameter: ``None`` (the preset's), a list, or a string holding a list literal
    (``papermill -p seeds '[2020]'`` passes the string ``"[2020]"``); the seeds as a tuple, or a
    :class:`ParameterError`."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip()) if len(value) <= MAX_TEXT else value
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
        if value is None:
            return None
    return check_seeds(value, name)


def check_notebook_parameters(names, allowed):
    """Refuse parameters that papermill injected but the notebook does not have (papermill only warns):
    ``names`` are the notebook's global names, ``allowed`` its parameters. Modules, private names and IPython's
    own names are not parameters."""
    ipython = {"In", "Out", "get_ipython", "exit", "quit", "open"}
    unknown = sorted(
        name
        for name, value in names.items()
        if not name.startswith("_")
        and name not in allowed
        and name not in ipython
        and not isinstance(value, types.ModuleType)
    )
    if unknown:
        raise ParameterError(f"unknown notebook parameter(s) {unknown}; this notebook takes: {', '.join(allowed)}")


# Every environment variable the library reads, with what it sets (check_environment_names refuses any other
# COMPGEN_* variable, naming the nearest of these).
ENVIRONMENT = {
    "COMPGEN_RESULTS": "the results store's folder",
    "COMPGEN_CHECKPOINTS": "the folder of training checkpoints",
    "COMPGEN_CHECKPOINT_EVERY": "evaluations between checkpoints (0 = off)",
    "COMPGEN_WORKERS": "training processes at once",
    "COMPGEN_SHARD_TASKS": "0 or 1: shard a paper-sized run's tasks over the CPU cores",
    "COMPGEN_PIN_WORKERS": "0 or 1: each worker process on a core of its own",
    "COMPGEN_LANES": "0 or 1: configs of one shape train as lanes of one program (default: on an accelerator)",
    "COMPGEN_MATMUL_PRECISION": "the precision of float32 products (default, high, highest)",
    "COMPGEN_KEY_CACHE": "the file that keeps the keys of runs (default .keys.json in the results store's folder)",
}


def check_environment_names(env=None) -> None:
    """Refuse a ``COMPGEN_*`` variable of ``env`` (default: this process's environment) that the library does not
    read (a typo would otherwise be ignored), naming the nearest one it does, and a variable it reads whose value is
    blanks only (:func:`env_text`)."""
    env = os.environ if env is None else env
    for name in sorted(env):
        if name.upper().startswith("COMPGEN_") and name not in ENVIRONMENT:
            near = difflib.get_close_matches(name.upper(), ENVIRONMENT, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}? " if near else ""
            raise ParameterError(f"unknown environment variable {name}: {hint}compgen reads {', '.join(ENVIRONMENT)}")
        if name in ENVIRONMENT:
            env_text(name, env)


def env_text(name, env=None) -> str | None:
    """The value of environment variable ``name`` in ``env`` (default: this process's environment) with the blanks
    around it removed, or ``None`` if it is unset or empty; a value of blanks only is a :class:`ParameterError`. The
    one rule by which every ``COMPGEN_*`` variable is read."""
    text = (os.environ if env is None else env).get(name, "")
    if not text:
        return None
    if not text.strip():
        what = ENVIRONMENT.get(name, "a value")
        raise ParameterError(f"{name} is blank ({_short(text)}); unset it, or set it to {what}")
    return text.strip()


def env_path(name, env=None):
    """The folder named by environment variable ``name`` (:func:`env_text`), with a leading ``~`` or ``~user``
    expanded as a shell does, or ``None`` if it is unset or empty; a ``~user`` that names no user is a
    :class:`ParameterError` (a folder literally named ``~`` is never what was meant)."""
    text = env_text(name, env)
    if text is None:
        return None
    folder = os.path.expanduser(text)
    if folder.startswith("~"):
        raise ParameterError(
            f"{name}={_short(text)}: {text.split(os.sep)[0]} names no user's home folder; give the folder's full path"
        )
    return folder


ENV_INT_LIMIT = 2**31 - 1  # the largest integer an environment variable or a count option takes


def _ascii_int(text):
    text = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError
    return int(text)


def env_int(name, default, ge=0, le=None, meaning=""):
    """The integer in environment variable ``name`` (:func:`env_text`; ASCII digits, at least ``ge`` and at most
    ``le``, else :data:`ENV_INT_LIMIT`), ``default`` if it is unset or empty; else a :class:`ParameterError` naming
    the variable and the range it takes."""
    text = env_text(name)
    if text is None:
        return default
    le = ENV_INT_LIMIT if le is None else le
    try:
        value = _ascii_int(text)
    except ValueError:
        value = None
    if value is None or not ge <= value <= le:
        raise ParameterError(f"{name} must be an integer from {ge} to {le}{meaning}, got {_short(os.environ[name])}")
    return value


def env_flag(name, default=True):
    """The switch in environment variable ``name`` (:func:`env_text`): "1" on, "0" off, unset or empty the default;
    anything else is a :class:`ParameterError`."""
    text = env_text(name)
    if text is None:
        return default
    if text not in ("0", "1"):
        raise ParameterError(f"{name} must be 0 (off) or 1 (on), got {_short(os.environ[name])}")
    return text == "1"


BOOLEAN_WORDS = {"true": True, "1": True, "false": False, "0": False}


def parse_bool(value, name):
    """A bool from a bool, the integers 1 and 0, or one of the words true/false/1/0 in any case, blanks around it
    ignored (papermill passes ``-p x false`` as the string "false", ``--set probe=true`` the word true): the one rule
    for booleans everywhere; anything else is a :class:`ParameterError`."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if _is_int(value) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in BOOLEAN_WORDS:
        return BOOLEAN_WORDS[value.strip().lower()]
    raise ParameterError(f"{name} must be a boolean (true or false), got {_short(value)}")


def _kind(annotation):
    """(base type, optional) of a field annotation: int, float, bool, str or tuple, and whether None is allowed."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _kind(args[0])[0], True
    if origin is tuple or annotation is tuple:
        return tuple, False
    return annotation, False


def _check(name, value, kind, meta, optional=False):
    if value is None:
        if optional:
            return None
        raise ParameterError(f"{name} must not be None")
    allowed = _limits_text(meta)
    if kind is bool:
        return parse_bool(value, name)
    if kind is int:
        if not _is_int(value):
            raise ParameterError(
                f"{name} must be an integer{' ' + allowed if allowed else ''}"
                f"{' or None' if optional else ''}, got {_short(value)}"
            )
        value = int(value)
    elif kind is float:
        if not _is_number(value) or not math.isfinite(float(value)):
            raise ParameterError(
                f"{name} must be a finite number{' ' + allowed if allowed else ''}"
                f"{' or None' if optional else ''}, got {_short(value)}"
            )
        value = float(value) + 0.0  # -0.0 -> 0.0: one value, one results-store key
    elif kind is str:
        if not isinstance(value, str):
            raise ParameterError(f"{name} must be a string, got {_short(value)}")
        if len(value) > MAX_TEXT:
            raise ParameterError(f"{name} must be at most {MAX_TEXT} characters, got {len(value)}")
    elif kind is tuple:
        return check_seeds(value, name)
    if "choices" in meta and value not in meta["choices"]:
        raise ParameterError(f"{name} must be one of {tuple(meta['choices'])}, got {_short(value)}")
    for key, ok in (
        ("ge", lambda v, b: v >= b),
        ("gt", lambda v, b: v > b),
        ("le", lambda v, b: v <= b),
        ("lt", lambda v, b: v < b),
    ):
        if key in meta and not ok(value, meta[key]):
            raise ParameterError(
                f"{name} must be {'an integer' if kind is int else 'a number'} {allowed}, got {value!r}"
            )
    return value


# --------------------------------------------------------------------------------------------- configs


@dataclasses.dataclass(frozen=True)
class Config:
    """Base of every config: fields are validated (and normalised, e.g. seeds to a tuple) on construction,
    then :meth:`check` runs the cross-field rules of the subclass."""

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            kind, optional = _kind(hints[f.name])
            value = _check(f.name, getattr(self, f.name), kind, f.metadata, optional)
            object.__setattr__(self, f.name, value)
        names = {f.name for f in dataclasses.fields(self)}
        if {"eval_every", "outer_steps"} <= names and self.eval_every > self.outer_steps:
            raise ParameterError(
                f"eval_every ({self.eval_every}) must be at most outer_steps ({self.outer_steps}): a run of "
                f"{self.outer_steps} steps never reaches an evaluation every {self.eval_every}"
            )
        try:
            self.check()
        except ParameterError:
            raise
        except ValueError as error:  # a rule of a task module (masks, a world's sizes): still one line
            raise ParameterError(" ".join(str(error).split())) from None

    def check(self):
        """Rules that involve several fields; raise :class:`ParameterError`."""

    @classmethod
    def field_names(cls):
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def describe_field(cls, name) -> str:
        """``name: type (allowed values)`` for error messages and ``compgen-cli list``."""
        f = {f.name: f for f in dataclasses.fields(cls)}[name]
        kind, optional = _kind(typing.get_type_hints(cls)[name])
        text = f"{name}: {getattr(kind, '__name__', kind)}{' | None' if optional else ''}"
        meta = dict(f.metadata)
        if "choices" in meta:
            text += f" in {tuple(meta['choices'])}"
        elif _limits_text(meta):
            text += f" {_limits_text(meta)}"
        return text


def check_overrides(config_class, overrides: dict, where: str = "override", fixed=None):
    """Raise unless every key of ``overrides`` is a field of ``config_class`` (listing the allowed ones) and none
    is fixed by the experiment (``fixed``: {field: why}); the values are checked when the config is built."""
    allowed = config_class.field_names()
    unknown = sorted(set(overrides) - set(allowed))
    if unknown:
        raise ParameterError(
            f"{where}: unknown field(s) {_short(unknown)} of {config_class.__name__}; allowed: {', '.join(allowed)}"
        )
    for name in overrides:
        if fixed and name in fixed:
            raise ParameterError(f"{where}: {name} is set by {fixed[name]} and cannot be overridden")


DECIMAL = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")  # an integer on the command line: decimal digits
NON_DECIMAL = re.compile(r"[+-]?0[xXoObB][0-9a-fA-F_]+")


def parse_literal(text: str, kind=None):
    """A command-line value for a field of type ``kind`` (``None``: unknown): for a string field the text itself
    (or the string a quoted literal holds), so a mask such as ``012`` stays text; for an integer field decimal digits
    (``010`` is 10, ``1_000`` is 1000; ``0x10`` is a :class:`ParameterError`: integers are written in decimal);
    otherwise a Python literal (``2e-3``, ``[100, 101]``, ``True``, ``None``), or the text itself when it is none
    (the word ``true``, which a boolean field reads). Lists become tuples."""
    stripped = text.strip()
    if kind is str:
        try:
            quoted = ast.literal_eval(stripped) if stripped[:1] in "'\"" and len(stripped) <= MAX_TEXT else None
        except (ValueError, SyntaxError):
            quoted = None
        return quoted if isinstance(quoted, str) else text
    if DECIMAL.fullmatch(stripped) and kind in (int, None):
        return int(stripped)
    if NON_DECIMAL.fullmatch(stripped):
        raise ParameterError(f"write integers in decimal digits (e.g. 16), got {_short(text)}")
    try:
        value = ast.literal_eval(text) if len(text) <= MAX_TEXT else text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = text
    return tuple(value) if isinstance(value, list) else value


def parse_assignment(text: str, config_class=None):
    """``FIELD=VALUE`` of ``--set`` -> ``(field, value)``, the value read for the field's type in ``config_class``
    (:func:`parse_literal`)."""
    if "=" not in text:
        raise ParameterError(f"--set takes FIELD=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    name = name.strip()
    kind, optional = None, False
    if config_class is not None and name in config_class.field_names():
        kind, optional = _kind(typing.get_type_hints(config_class)[name])
    if optional and value.strip() == "None":
        return name, None
    return name, parse_literal(value, kind)


def parse_assignments(texts, config_class=None) -> dict:
    """Every ``--set FIELD=VALUE`` of ``texts`` as a dict (values read for ``config_class``'s field types); a field
    given twice with different values is a :class:`ParameterError` (it would otherwise be the last one, silently)."""
    out = {}
    for text in texts:
        name, value = parse_assignment(text, config_class)
        if name in out and out[name] != value:
            raise ParameterError(
                f"--set {name} is given twice, as {_short(out[name])} and {_short(value)}; give it once"
            )
        out[name] = value
    return out
