"""What a chapter's notebook calls before its figures: check its parameters, then train or load its runs.

:func:`train` builds every config of a section's figures at a preset (:func:`compgen.section.figure_configs`),
trains or loads them (:func:`compgen.dispatch.train_or_load`) and returns them as :class:`Runs`, which the figure
functions of :mod:`compgen.figures` read; :func:`stored` gives the runs a store holds without training.
:func:`open_book` is what a chapter opened in Colab calls once it has installed compgen.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from compgen import bridge, catalog, dispatch, runner, section
from compgen.runs import Runs

NOTEBOOK_PARAMETERS = ("preset", "force", "seeds", "repository")  # every chapter's parameters cell


def check_parameters(names: dict, *extra: str) -> None:
    """Check a notebook's parameters before anything runs: ``names`` is the notebook's ``globals()``, ``extra``
    the parameters it has besides :data:`NOTEBOOK_PARAMETERS`. papermill only warns about a parameter the notebook
    does not have (``-p presett smoke``); here it is a :class:`compgen.params.ParameterError`, and so is a bad
    preset, force or seeds value."""
    from compgen import params

    params.check_notebook_parameters(names, NOTEBOOK_PARAMETERS + extra)
    if names.get("preset") not in section.PRESET_NAMES:
        raise params.ParameterError(f"preset must be one of {section.PRESET_NAMES}, got {names.get('preset')!r}")
    params.parse_bool(names.get("force", False), "force")
    params.seeds_parameter(names.get("seeds"))


def split_repository(repository: str) -> tuple[str, str]:
    """``(address, commit)`` of a ``repository`` parameter, ``<address>@<commit>`` (papermill's: ``_config.yml``'s
    address at the commit a notebook was executed at); ``commit`` is empty where none is named (an ``@`` in the
    address's host part, as in ``git@host:path``, is not a commit)."""
    address, at, commit = repository.rpartition("@")
    return (address, commit) if at and "/" not in commit and ":" not in commit else (repository, "")


def open_book(repository: str, home=None) -> Path:
    """Open the book of ``repository`` (:func:`split_repository`) as a chapter in Colab needs it, having installed
    compgen from there: clone it into ``<home>/compgen-companion`` (``~`` by default) unless it is there, check out
    its commit and make its ``book/`` folder the working directory, where a chapter reads its records. Returns it."""
    from compgen import params

    if not repository:
        raise params.ParameterError("repository is not set: give where compgen comes from, as <address>@<commit>")
    address, commit = split_repository(repository)
    checkout = Path(home or os.path.expanduser("~")) / "compgen-companion"
    if not checkout.is_dir():
        subprocess.run(["git", "clone", "-q", address, str(checkout)], check=True)
    if commit:
        subprocess.run(["git", "-C", str(checkout), "checkout", "-q", commit], check=True)
    os.chdir(checkout / "book")
    return checkout / "book"


def chapter_configs(section_name: str, preset: str, seeds=None, figures=None, **overrides):
    """``{figure: [configs]}`` of a section at a preset (every figure unless ``figures``), a point of the scale bridge
    (``bridge-x4``, :func:`compgen.bridge.figure_configs`) included; ``seeds`` (a list, or a string holding one, as
    papermill passes ``-p seeds '[2020]'``) replaces every config's seeds."""
    from compgen import params

    dispatch.check_environment()  # first: building a config may start JAX's backend, which reads XLA_FLAGS
    sec = catalog.get(section_name)
    seeds = params.seeds_parameter(seeds)
    if seeds is not None:
        overrides["seeds"] = seeds
    names = figures or sec.figures("quick" if bridge.parse(preset) else preset)
    return sec, {name: bridge.figure_configs(sec, name, preset, **overrides) for name in names}


def train(
    section_name: str, preset: str = "quick", seeds=None, force=False, figures=None, log=print, store=None, **overrides
) -> Runs:
    """Train (or load) every run of a section's figures at ``preset`` (:func:`compgen.dispatch.train_or_load`, into
    ``store``, default :meth:`compgen.results.Store.default`) and return them as :class:`Runs`.

    Progress lines go to ``log`` while training; a last line says how many runs were trained and how long it
    took.
    """
    from compgen import params, results

    force = params.parse_bool(force, "force")
    store = results.Store.default() if store is None else store
    sec, by_figure = chapter_configs(section_name, preset, seeds, figures, **overrides)
    configs = list(dict.fromkeys(c for cs in by_figure.values() for c in cs))
    stored = 0 if force else sum(store.paths(sec, c)[0].exists() for c in configs)
    start = time.perf_counter()
    outputs = dict(zip(configs, dispatch.train_or_load(sec, configs, store, force=force, log=log)))
    wall = time.perf_counter() - start
    log(
        f"[{section_name}] {len(configs)} config(s): {len(configs) - stored} trained, {stored} loaded from the "
        f"store, {wall:.0f} s"
    )
    return Runs(sec, preset, by_figure, outputs, wall, len(configs) - stored, store)


def stored(section_name: str, preset: str = "quick", seeds=None, store=None, **overrides) -> Runs:
    """The section's runs at ``preset`` as far as ``store`` (default :meth:`compgen.results.Store.default`) holds
    them; nothing is trained."""
    sec, by_figure = chapter_configs(section_name, preset, seeds, **overrides)
    from compgen import results

    store = results.Store.default() if store is None else store
    configs = list(dict.fromkeys(c for cs in by_figure.values() for c in cs))
    outputs = {c: runner.load(sec, c, store, log=lambda _: None) for c in configs}
    return Runs(sec, preset, by_figure, outputs, store=store)
