"""Every verdict the book draws from its committed records, held: a refactor must leave them as they are.

The claims judged now from each seed-set record (the second and the third set) and from each twin record (the
authors' code and ours at the matched world, seed set by seed set and pooled) are written one per line, with the
verdict and what was read, and compared with ``tests/golden/claims.txt``. A change of a claim's wording, criterion
or number shows as a diff; where it is meant, rewrite the file with ``UPDATE_GOLDEN=1 pytest
tests/test_golden_claims.py``.
"""

import os
from pathlib import Path

from compgen import records
from compgen.analysis import twin
from compgen.figures import glance

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "claims.txt"
SEARCH = ROOT / "book" / "search"


def _lines(source, claims) -> list:
    return [f"{source} | {c.section} | {c.figure} | {c.claim} | {c.verdict} | {c.ours}" for c in claims or ()]


def judged_lines() -> list:
    lines = []
    for path in glance.SEED_SETS:  # the second set, then the third
        record = records.SeedSet.load(SEARCH.parent / path)
        for name in glance.CHAPTERS:
            runs = glance.set_runs(record, name)
            if runs is not None:
                label = f"{Path(path).stem.replace('_', ' ')} {','.join(map(str, runs.seeds))}"
                lines += _lines(label, glance.CHAPTERS[name].claims(runs))
    for name in glance.CHAPTERS:
        twins = [twin.load_twin(p) for p in sorted(SEARCH.glob(f"twin_{name}*.json"))]
        for record in twins:
            for seeds, found in twin.judged(record).items():
                for who, claims in found.items():
                    lines += _lines(f"twin {name} {seeds} {who}", claims)
        if twins:
            for who in ("authors'", "ours"):
                lines += _lines(f"twin {name} pooled {who}", twin.pooled(twins, who))
    return lines


def test_the_verdicts_of_the_committed_records_are_the_golden_ones():
    lines = judged_lines()
    assert len(lines) > 100  # every chapter's claims, from every record
    text = "\n".join(lines) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    expected = GOLDEN.read_text().splitlines()
    changed = [(a, b) for a, b in zip(expected, lines) if a != b]
    assert len(lines) == len(expected) and not changed, f"{len(lines)} vs {len(expected)} lines; first: {changed[:2]}"


def test_every_committed_record_is_the_current_codes():
    """No committed record is made by other code: the seed sets name the key of what the current code computes, and
    the twins and searches either that or none (as they named no source fingerprint before keys); a refactor keeps
    that, and a change to what a step computes shows here, to re-record or to state."""
    from compgen import catalog, programs, recordfile
    from compgen.figures import search

    for path in glance.SEED_SETS:
        record = records.SeedSet.load(SEARCH.parent / path)
        assert glance.stale_chapters(record) == [], path
    for path in sorted(SEARCH.glob("twin_*.json")):
        assert "other code" not in twin.staleness(twin.load_twin(path)), path
    for path in sorted(SEARCH.glob("*.json")):
        if path.name.startswith("twin_") or path.stem.endswith("_set"):
            continue
        found = search.code_states(search.load_search(path))
        assert set(found) <= {recordfile.CURRENT, recordfile.NOT_RECORDED}, (path, found)
    assert programs.join_keys(["b", "a", "a"]) == programs.join_keys(["a", "b"])  # a shared config counts once
    from compgen import legacy

    assert catalog.code_key() == legacy.CODE[1]  # the step-time and book-time records, current too
