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


def code_key(preset: str = "quick") -> str:
    """What every section computes, as one key: their :func:`compgen.programs.section_key` values joined. The
    records of the bench and of a book build (step times, book times, GPU checks) carry it."""
    from compgen import programs

    return programs.join_keys(programs.section_key(sec, preset) for sec in SECTIONS.values())
