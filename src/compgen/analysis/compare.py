"""Any learner against the paper's on the paper's claims: :func:`compare`.

Each comparison the book makes of "the hypernetwork" with "the better of ANIL and MAML" (Fig. 3B, 4C, 4E/F) and
the decodability probes (Fig. 3C/D) is a claim function of the runs and of the learners in the hypernetworks' place
(a chapter's ``comparisons``, :class:`compgen.analysis.chapter.Chapter`). :func:`compare` trains (or loads) a
learner's runs of a figure at a preset through the dispatcher, beside the paper's learners' runs of that figure on
the same seeds, and judges the same claims for it by the same criteria, fixed in advance; the paper's hypernetworks
are judged on the same runs for reference. :mod:`compgen.figures.compare` draws and words the result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

from compgen import catalog, dispatch, models, params, results
from compgen.analysis import chapters
from compgen.experiments.fewshot import HNETS
from compgen.runs import Runs
from compgen.section import figure_configs, make_config

# A learner's own hyper-parameters: the fields settings_of takes over from a paper learner's config
LEARNER_FIELDS = (
    "hidden",
    "num_hidden",
    "inner_steps",
    "inner_batch",
    "inner_lr",
    "inner_weight_decay",
    "outer_lr",
    "clip_norm",
    "outer_weight_decay",
)


def compared() -> dict:
    """``{section: Chapter}`` of the chapters whose claims any learner can be judged by (their ``comparisons``)."""
    return {name: c for name, c in chapters.CHAPTERS.items() if c.comparisons}


def settings_of(section: str, preset: str, model: str = "hnet_linear") -> dict:
    """The learner fields (:data:`LEARNER_FIELDS`) of ``model``'s config at ``preset``: a new learner's untuned
    starting point, at the size and inner loop the paper's learner has there."""
    cfg = make_config(catalog.get(section), preset, model)
    return {name: getattr(cfg, name) for name in LEARNER_FIELDS}


def _check_duration(sec, to_train, allow_long) -> None:
    """Refuse, in one line with the estimate, to train ``to_train`` on a CPU when it would take more than
    :data:`LONG_HOURS` at :data:`REFERENCE_GFLOPS` (a lower bound: small products run below a GEMM's speed)."""
    import jax

    flops = sum(sec.cost(c) for c in to_train)
    hours = flops / (REFERENCE_GFLOPS * 1e9) / 3600
    if hours > LONG_HOURS and jax.default_backend() == "cpu" and not params.parse_bool(allow_long, "allow_long"):
        raise params.ParameterError(
            f"compare: the {len(to_train)} runs to train need at least {hours:,.0f} hours on a CPU "
            f"({flops / 1e15:,.1f} PFLOP at {REFERENCE_GFLOPS:.0f} GFLOP/s); "
            "run it on a GPU, or pass training=Training(allow_long=True)"
        )


@dataclass(frozen=True)
class Comparison:
    """The claims of ``learner`` on one figure's ``runs`` at ``preset`` (:func:`compare`), and ``reference``: the
    same claims of the paper's hypernetworks on the same runs."""

    learner: str
    section: str
    figure: str
    preset: str
    runs: Runs
    claims: list
    reference: list


# The speed a CPU's training is estimated at before a long comparison starts: the quick book's reference machine
REFERENCE_GFLOPS = 250.0
LONG_HOURS = 1.0  # a comparison whose runs to train are estimated above this on a CPU needs Training(allow_long=True)


class Training(NamedTuple):
    """How :func:`compare` trains: into ``store`` (default :meth:`compgen.results.Store.default`), the learner's runs
    again where ``force`` (the paper's are loaded where stored), progress to ``log``, and on a CPU runs to train
    estimated above :data:`LONG_HOURS` at :data:`REFERENCE_GFLOPS` refused unless ``allow_long``."""

    store: object = None
    force: bool = False
    log: object = print
    allow_long: bool = False


def compare(learner, section, figure, preset="quick", seeds=None, training=None, **overrides) -> Comparison:
    """Train (or load) ``learner``'s runs of ``figure`` at ``preset`` with ``overrides`` (its own hyper-parameters,
    :data:`LEARNER_FIELDS`: the budget and seeds are the paper's learners'), and the paper's learners' runs of the
    figures the claims read, on ``seeds`` (default: the preset's), as ``training`` says (:class:`Training`); judge
    the figure's claims for the learner and for the paper's hypernetworks.

    ``learner``: a registered name or an import path (:mod:`compgen.models.learners`); ``section``: one of
    the chapters with comparisons (:func:`compared`); ``figure``: one of that chapter's comparisons."""
    not_learners = sorted(set(overrides) - set(LEARNER_FIELDS))
    if not_learners:
        raise params.ParameterError(
            f"compare: {', '.join(not_learners)} {'is' if len(not_learners) == 1 else 'are'} not a learner's field "
            f"(the budget and seeds are the paper's learners'); a learner's fields are {', '.join(LEARNER_FIELDS)}"
        )
    found = compared()
    if section not in found:
        raise params.ParameterError(f"section must be one of {tuple(found)}, got {section!r}")
    chapter = found[section]
    if figure not in chapter.comparisons:
        raise params.ParameterError(f"figure must be one of {tuple(chapter.comparisons)} for {section}, got {figure!r}")
    models.get(learner, "fewshot")
    store, force, log, allow_long = Training() if training is None else training
    sec, store = catalog.get(section), results.Store.default() if store is None else store
    seeds = params.seeds_parameter(seeds)
    shared = {} if seeds is None else {"seeds": seeds}
    read, judge = chapter.reads(figure), chapter.comparisons[figure]
    by_figure = {}
    for name in read:
        paper = figure_configs(sec, name, preset, **shared)
        own = figure_configs(sec, name, preset, model=learner, **shared, **overrides) if name == figure else []
        by_figure[name] = paper + [c for c in own if c not in paper]
    configs = list(dict.fromkeys(c for cs in by_figure.values() for c in cs))
    force, own = params.parse_bool(force, "force"), [c for c in configs if c.model == learner]
    _check_duration(
        sec, [c for c in configs if (force and c in own) or not store.paths(sec, c)[0].exists()], allow_long
    )
    outputs = {}
    for group, again in ((own, force), ([c for c in configs if c not in own], False)):
        outputs.update(zip(group, dispatch.train_or_load(sec, group, store, force=again, log=log)))
    runs = Runs(sec, preset, by_figure, outputs, store=store)
    reference = judge(runs, tuple(m for m in HNETS if m != learner))
    own_claims = [dataclasses.replace(c, paper="–") for c in judge(runs, (learner,))]  # the paper did not run it
    return Comparison(learner, section, figure, preset, runs, own_claims, reference)
