"""The claims of the in-context chapter (beyond the paper), judged from its runs: the bottlenecked in-context learner
against the plain transformer on the hyperteacher tasks and in the compositional-goals world."""

from __future__ import annotations

from compgen.analysis import claims as C
from compgen.analysis.chapter import Chapter
from compgen.analysis.values import final
from compgen.runs import Runs

SECTION = "incontext"
LEAD = 5.0
WORLDS = {
    "hyperteacher": ("comparison", "fig3b", "accuracy", 12.5, "chance"),
    "goals": ("goals", "fig4ef", "acc", 100 / 6, "uniform guess (1 of 6 actions)"),
}


BOTTLENECK = C.ClaimSpec(  # {environment}: a key of WORLDS, {figure}: its figure
    SECTION,
    "in-context ({environment})",
    "the bottlenecked in-context learner (task code + hypernetwork) generalises to new combinations better than "
    "the plain transformer (Kobayashi et al. 2024; not a claim of the paper)",
    f"OOD accuracy ≥ {LEAD:g} points above the transformer's under compositional support",
    anchor="#incontext-{figure}",
    id="bottleneck/{environment}",
    reads=("{figure}",),
)


def runs_by_learner(runs: Runs, paper: Runs, environment):
    """{(model, split): (config, output)} of the in-context learners and the paper's models on one world."""
    figure, paper_figure, *_ = WORLDS[environment]
    out = {}
    for source, fig_name in ((runs, figure), (paper, paper_figure)):
        if source is None:
            continue
        for c in source.configs(fig_name):
            if source.output(c) is not None:
                out[(c.model, c.split)] = (c, source.output(c))
    return out


def accuracy(cfg, output, environment, set_name="ood"):
    """Accuracy (%) at the last evaluation on one evaluation set of one world, per seed: (seeds,)."""
    return final(output, WORLDS[environment][2], cfg.eval_set_names().index(set_name), 100)


def world_claims(runs: Runs, environment) -> list:
    """The bottleneck claim on one world (a key of :data:`WORLDS`)."""
    pool = runs_by_learner(runs, None, environment)
    check, ours, seeds = None, "–", ()
    if ("bottleneck", "random") in pool and ("transformer", "random") in pool:
        (cb, ob), (ct, ot) = pool[("bottleneck", "random")], pool[("transformer", "random")]
        b, t = accuracy(cb, ob, environment), accuracy(ct, ot, environment)
        check = C.paired(b, t, LEAD)
        seeds = cb.seeds
        ours = f"{b.mean():.1f} vs {t.mean():.1f} %: {C.describe_difference(check, ' pts', 1)}"
    return [
        BOTTLENECK.judge(check, ours, seeds, pooled=runs.pooled, environment=environment, figure=WORLDS[environment][0])
    ]


def claims(runs: Runs) -> list:
    """Every claim of the chapter, computed from ``runs`` (stored runs may be missing: "not run")."""
    return [*world_claims(runs, "hyperteacher"), *world_claims(runs, "goals")]


CHAPTER = Chapter(SECTION, "In-context learners (beyond the paper)", claims, (BOTTLENECK,), beyond_the_paper=True)
