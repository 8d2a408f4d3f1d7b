"""The sections of the book by name: :data:`SECTIONS` maps each name to its :class:`compgen.section.Section` value.

The registry sits outside :mod:`compgen.experiments`, so no section's code fingerprint (the import closure of its
module, :mod:`compgen.fingerprint`) includes another section's code.
"""

from __future__ import annotations

from compgen.experiments import goals, hyperteacher, incontext, preferences, teacher_student

SECTIONS = {m.SECTION.name: m.SECTION for m in (teacher_student, hyperteacher, preferences, goals, incontext)}


def get(name: str):
    """The :class:`compgen.section.Section` called ``name`` (one of :data:`SECTIONS`)."""
    if name not in SECTIONS:
        from compgen.params import ParameterError

        raise ParameterError(f"section must be one of {tuple(SECTIONS)}, got {name!r}")
    return SECTIONS[name]
