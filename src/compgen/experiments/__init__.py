"""The sections of the book, each a :class:`compgen.section.Section` value named ``SECTION`` in its module.

:func:`get` imports a section by name; the engine (:mod:`compgen.runner`) trains it. The few-shot sections
(hyperteacher, preferences, goals, in-context) share :mod:`compgen.experiments.fewshot`.
"""

from __future__ import annotations

import importlib

SECTIONS = {
    "teacher_student": "compgen.experiments.teacher_student",
    "hyperteacher": "compgen.experiments.hyperteacher",
    "preferences": "compgen.experiments.preferences",
    "goals": "compgen.experiments.goals",
    "incontext": "compgen.experiments.incontext",
}


def get(name: str):
    """The :class:`compgen.section.Section` called ``name`` (one of :data:`SECTIONS`)."""
    if name not in SECTIONS:
        from compgen.params import ParameterError

        raise ParameterError(f"section must be one of {tuple(SECTIONS)}, got {name!r}")
    return importlib.import_module(SECTIONS[name]).SECTION
