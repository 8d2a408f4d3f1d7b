"""Twin runs with the authors' implementation, judged: a twin record's runs laid out as runs of the chapter and
judged with its own claims.

A twin record (``book/search/twin_<section>.json``, written by ``tools/twin.py``) holds the chapter's claim
configs trained with the reference implementation (``smonsays/modular-hyperteacher`` at a fixed commit), per
seed: the final numbers, the OOD curve, the wall time and the translation of every config field; and, where the
reference cannot express the preset's world, ours trained at the nearest world it does (``Twin.matched``), as the
final numbers per seed of every config (``ours_matched_rows``). What a chapter's twins train and show is its
:class:`compgen.analysis.chapter.Twin` (:func:`twin_of`). No verdict is stored: :func:`judged` lays both
codes' numbers out as runs (:func:`reference_runs`, :func:`ours_runs`) and judges them with the chapter's own
``claims``, the current claim code; :func:`pooled` judges them pooled over every seed set. Building the book needs no
reference checkout.

A record is read by :func:`load_twin` (:mod:`compgen.recordfile`): a damaged one stops the page with one line naming
it and the command that rewrites it. It carries the key of what our chapter's code computes (``code_key``,
:func:`code_key`); :func:`staleness` says when that code changed since, or when the record names none comparable here.
The tables that show all this are :mod:`compgen.figures.twin`'s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np

from compgen import recordfile, records
from compgen.analysis import chapters
from compgen.analysis.chapter import Twin
from compgen.analysis.finals import output_from_finals
from compgen.runs import Runs

# Config fields added after twin records were written, with the default that computes what the runs computed: a run's
# key leaves such a field out at that value, so the records keep their keys.
ADDED_FIELDS = {"fused_inner": None}


def twin_of(chapter: str) -> Twin:
    """What ``chapter``'s twins train and show (its :attr:`compgen.analysis.chapter.Chapter.twin`)."""
    found = chapters.twinned()
    if chapter not in found:
        raise ValueError(f"chapter {chapter!r} is not one of {sorted(found)}, the chapters with twin runs")
    return found[chapter].twin


def matched(chapter: str, preset: str) -> dict:
    """``{figure: config changes}``: the nearest world the reference expresses where it cannot express ``preset``'s
    (empty where it can)."""
    return dict(twin_of(chapter).matched.get(preset, {}))


def load_twin(path) -> records.Twin | None:
    """The twin record at ``path``, checked (:meth:`compgen.records.Record.load`, its chapter one with twin runs),
    or ``None`` if there is none."""
    return records.Twin.load_if_there(path, lambda record: twin_of(record["chapter"]))


def code_key(chapter: str) -> str:
    """The key of our code a twin record of ``chapter`` depends on: what the chapter's section computes
    (:func:`compgen.programs.section_key`)."""
    from compgen import catalog, programs

    return programs.section_key(catalog.get(chapter))


def staleness(record: records.Twin) -> str:
    """Why the twin ``record`` may not show what our current code computes, as words ("" where it is current)."""
    from compgen import programs

    key, versions = record.computed_by()
    return recordfile.stale(key, code_key(record.chapter), versions, programs.versions())


def seed_sets(record: records.Twin) -> list:
    """The record's seed sets, as strings (``"2020,2021,2022"``)."""
    return [records.seed_set_name(seeds) for seeds in record.seed_sets]


def run_key(cfg, seed, commit: str) -> str:
    """A stable key of one (config, seed) of the reference at ``commit``: the config with that seed alone."""
    from compgen import results

    fields = {**results.config_dict(cfg), "seeds": [int(seed)]}
    fields = {k: v for k, v in fields.items() if not (k in ADDED_FIELDS and v == ADDED_FIELDS[k])}
    payload = json.dumps({"class": type(cfg).__name__, "commit": commit, **fields}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def claim_configs(chapter: str, preset: str, seeds):
    """(section, {figure: configs}) of the chapter's claim figures at ``preset`` with ``seeds``, each moved to the
    nearest world the reference expresses (:func:`matched`) where it cannot express the preset's."""
    from compgen.notebook import chapter_configs

    figures = twin_of(chapter).figures
    sec, by_figure = chapter_configs(chapter, preset, None if seeds is None else list(seeds), figures)
    changes = matched(chapter, preset)
    return sec, {f: [dataclasses.replace(c, **changes.get(f, {})) for c in cs] for f, cs in by_figure.items()}


def reference_output(chapter: str, cfg, runs: list) -> dict:
    """The reference's runs of ``cfg`` (one summary per seed, in ``cfg.seeds`` order) laid out as our runs'
    outputs at their last evaluation (:func:`compgen.analysis.finals.output_from_finals`), so that a chapter's
    ``claims`` reads them: ``eval/<metric>`` (seeds, 1, n_sets) and, where recorded, ``eval/r2_ood_pooled`` (seeds, 1);
    teacher-student ``eval/alignment`` (seeds, 1)."""
    if chapter == "teacher_student":
        return output_from_finals({"eval/alignment": [r["final"]["alignment"] for r in runs]})
    names = cfg.eval_set_names()
    values = {f"eval/{m}": [[r["final"][n][m] for n in names] for r in runs] for m in runs[0]["final"]["ood"]}
    if "r2_ood_pooled" in runs[0]:
        values["eval/r2_ood_pooled"] = [r["r2_ood_pooled"] for r in runs]
    return output_from_finals(values)


def _runs(chapter: str, preset: str, seeds, output_of):
    sec, by_figure = claim_configs(chapter, preset, seeds)
    outputs = {c: output_of(c) for cs in by_figure.values() for c in cs}
    return Runs(sec, preset, by_figure, outputs)


def reference_runs(record: records.Twin, seeds):
    """The reference's runs of the record on ``seeds``, as a :class:`compgen.runs.Runs` of the chapter's claim
    figures (a config without every seed recorded: not run)."""
    chapter, commit = record.chapter, record.reference["commit"]

    def output_of(cfg):
        found = [record.runs.get(run_key(cfg, s, commit)) for s in cfg.seeds]
        return reference_output(chapter, cfg, found) if all(found) else None

    return _runs(chapter, record.preset, seeds, output_of)


def ours_runs(record: records.Twin, seeds):
    """Ours at the record's matched world on ``seeds`` (its ``ours_matched_rows``: every headline number per seed,
    which is what the claims read), as runs; ``None`` where the twins ran at the preset's own world (ours are then the
    chapter's runs)."""
    if not record.matched_world:
        return None
    chapter = record.chapter
    rows = {(tuple(r["row"].items()), tuple(r["seeds"])): r["values"] for r in record.ours_matched_rows}
    figures = {c: f for f, cs in claim_configs(chapter, record.preset, seeds)[1].items() for c in cs}

    def output_of(cfg):
        from compgen import results

        values = rows.get((tuple(config_row(chapter, figures[cfg], results.config_dict(cfg)).items()), cfg.seeds))
        return None if values is None else headline_output(chapter, cfg, values)

    return _runs(chapter, record.preset, seeds, output_of)


def judged(record: records.Twin, chapter_claims=None) -> dict:
    """``{seed set: {"authors'": [Claim], "ours": [Claim] or None}}``: the chapter's claims judged now on the
    reference's runs and on ours at the matched world (``None`` without one), seed set by seed set. ``chapter_claims``
    (default: the chapter's ``claims``) judges a :class:`compgen.runs.Runs`."""
    if chapter_claims is None:
        chapter_claims = chapters.get(record.chapter).claims
    found = {}
    for seeds in record.seed_sets:
        ours = ours_runs(record, seeds)
        found[records.seed_set_name(seeds)] = {
            "authors'": chapter_claims(reference_runs(record, seeds)),
            "ours": None if ours is None else chapter_claims(ours),
        }
    return found


def pooled(twins: list, who: str, chapter_claims=None) -> list | None:
    """The chapter's claims judged by the rule for pooled runs on every seed of ``twins``
    (twin records of one chapter) whose seed set has every config of the claim figures, for ``who`` ("authors'" or
    "ours" at the matched world); ``None`` for ours without a matched world."""
    from compgen.analysis import finals as rec

    if chapter_claims is None:
        chapter_claims = chapters.get(twins[0].chapter).claims
    sets, seen = [], set()
    for record in twins:
        for seeds in record.seed_sets:
            if seen & set(seeds):
                continue
            seen |= set(seeds)
            runs = reference_runs(record, seeds) if who == "authors'" else ours_runs(record, seeds)
            if runs is None:
                return None
            if not rec.missing(runs):  # a set of a few configs only (more seeds of one learner) is not pooled
                sets.append(runs)
    if not sets:
        return None
    return chapter_claims(rec.pool(*sets))


def config_row(chapter: str, figure: str, fields: dict) -> dict:
    """How one config appears in a twin table (its figure and the fields that tell it apart), from its fields
    (``fields``: a config as a dict; seeds are not part of a row)."""
    return {"figure": figure, **{column: cell(fields) for column, cell in twin_of(chapter).rows.items()}}


def metric_name(metric: str, set_name: str | None) -> str:
    """The name a final number is kept under in a twin record: ``"<evaluation set>/<metric>"``, or the metric."""
    return metric if set_name is None else f"{set_name}/{metric}"


def our_finals(chapter: str, cfg, output) -> dict:
    """Our run's final numbers of the twin tables per seed, raw, by :func:`metric_name`: what a record keeps."""
    from compgen.analysis.values import final

    return {
        metric_name(metric, set_name): final(output, metric, cfg.eval_set_names().index(set_name) if set_name else None)
        for metric, set_name, _ in twin_of(chapter).headlines.values()
    }


def headline_output(chapter: str, cfg, values: dict) -> dict:
    """Our run's output laid out again from its final numbers (:func:`our_finals`, per seed) by
    :func:`compgen.analysis.finals.output_from_finals`: ``eval/<metric>`` at one evaluation, the headline's evaluation
    set filled and the others NaN. The claims of the twins' chapters read no other number
    (``tests/figures/test_twin.py`` checks it)."""
    names = cfg.eval_set_names() if hasattr(cfg, "eval_set_names") else ()
    finals = {}
    for metric, set_name, _ in twin_of(chapter).headlines.values():
        per_seed = np.asarray(values[metric_name(metric, set_name)], float)
        if set_name is None:
            finals[f"eval/{metric}"] = per_seed
        else:
            per_set = finals.setdefault(f"eval/{metric}", np.full((len(per_seed), len(names)), np.nan))
            per_set[:, names.index(set_name)] = per_seed
    return output_from_finals(finals)
