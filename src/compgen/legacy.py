"""The keys runs and records carried before they were keyed by their programs, and what they migrate to.

Until then a run or a record carried the source fingerprint of its section's code (:mod:`compgen.fingerprint`); now
it carries the key of what that code computes (:mod:`compgen.programs`). :data:`LEGACY` holds, per section, the last
such fingerprint and the section's key (:meth:`compgen.section.Section.code_key` at quick) computed at that very code
under :data:`VERSIONS`; :data:`CODE` the same for the records that name every section's code (step times, book times,
GPU checks: :func:`compgen.steptimes.code_fingerprint` then). A run or record of that fingerprint computes what a
section whose key is still that one computes, and migrates to it (:func:`key`); one of any other fingerprint does
not, and shows as made by other code.
"""

from __future__ import annotations

VERSIONS = {"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "optax": "0.2.8", "numpy": "2.4.6"}
LEGACY = {
    "teacher_student": ("a5045b267dc1", "e3bf246f39c193f9"),
    "hyperteacher": ("97dbc278b8bf", "8c42a8115739a21b"),
    "preferences": ("e723735d2589", "32cef1a5d64ced7e"),
    "goals": ("7abd321cfe72", "fd39b9f39346b33d"),
    "incontext": ("1ca1caeddd08", "55ecb0e24676d7fe"),
}
CODE = ("eae939663639", "7b5160182c1f5637")  # every section's key joined (compgen.programs.join_keys)


def key(section: str | None, fingerprint: str | None) -> str | None:
    """The key a run or record of ``section`` (``None``: of every section's code, :data:`CODE`) that carries the
    source ``fingerprint`` migrates to, or ``None`` where that is not the last fingerprint (:data:`LEGACY`)."""
    old, new = CODE if section is None else LEGACY.get(section, (None, None))
    return new if fingerprint and fingerprint == old else None
