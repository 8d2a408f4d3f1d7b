"""The book's figures and tables: one module per section, a function per paper figure.

A chapter trains (or loads) its runs once (:func:`compgen.notebook.train`), and each figure cell is one call, e.g.
``hyperteacher.fig3b(runs)``, that returns a :class:`FigureResult`: the figure, its caption (naming the preset,
the steps and the seeds), a markdown table of our numbers beside the paper's, and the claims the chapter's analysis
module judges (``compgen.analysis.<chapter>``, whose ``claims(runs)`` the results-at-a-glance page calls on stored
runs). In a notebook the result displays itself in that order; elsewhere :meth:`FigureResult.markdown` gives the
text.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np

from compgen import section
from compgen.analysis import paper
from compgen.analysis.values import (  # noqa: F401  (the numbers the figures draw, read where the claims read them)
    MONOLITHIC,
    SPLITS,
    Versus,
    best_per_seed,
    final,
    learners_of,
    on_seeds,
    size_grid,
    versus_monolithic,
)
from compgen.experiments.fewshot import HNETS, MODEL_LABELS
from compgen.figures import plots, verdicts
from compgen.runs import Runs

FIGURE_WIDTH = 7.2  # inches: the book's text column at 100 px per inch
SPLIT_GROUPS = ("compositional (random)", "non-compositional")  # the bars of a figure over the two supports


# --------------------------------------------------------------------------------------------- the paper's numbers


paper_numbers = paper.paper_numbers  # the paper's numbers, for the chapters' figure modules


# --------------------------------------------------------------------------------------------- display


def png(fig, dpi=200) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def show_figure(fig):
    """Display a matplotlib figure at its size in the book's column (rendered at 2x for sharp screens)."""
    from IPython.display import Image, display

    display(Image(png(fig), width=int(round(fig.get_figwidth() * 100))))


@dataclass
class FigureResult:
    """A paper figure as the book shows it: figure, caption, table, claims (and notes), in reading order."""

    figure: object = None
    caption: str = ""
    table: str = ""
    claims: list = field(default_factory=list)
    notes: str = ""

    def markdown(self) -> str:
        parts = [
            f"*{self.caption}*" if self.caption else "",
            self.table,
            verdicts.markdown_table(self.claims, link=False) if self.claims else "",
            self.notes,
        ]
        return "\n\n".join(p for p in parts if p)

    def _ipython_display_(self):
        from IPython.display import Markdown, display

        if self.figure is not None:
            show_figure(self.figure)
        if self.caption:
            display(Markdown(f"**{'Figure' if self.figure is not None else 'Table'}.** {self.caption}"))
        for part in (self.table, verdicts.markdown_table(self.claims, link=False) if self.claims else "", self.notes):
            if part:
                display(Markdown(part))


class FigureResults(tuple):
    """Several :class:`FigureResult` that belong together (a figure's panels, a world's pictures), shown one after
    another: what a figure function returns when it draws more than one figure. Like a :class:`FigureResult`, it
    displays itself as a notebook cell's value."""

    def markdown(self) -> str:
        return "\n\n".join(r.markdown() for r in self)

    def _ipython_display_(self):
        show(*self)


def show(*results):
    """Display several :class:`FigureResult` (or markdown strings) one after another."""
    from IPython.display import Markdown, display

    for result in results:
        display(Markdown(result) if isinstance(result, str) else result)


# --------------------------------------------------------------------------------------------- text


def mean_std(values, digits=3) -> str:
    """``"mean ± std"`` of ``values`` (NaNs ignored); ``"value (1 seed)"`` when only one value is finite."""
    values = np.asarray(values, float)
    if not np.isfinite(values).any():
        return "n/a"
    if np.isfinite(values).sum() == 1:
        return f"{np.nanmean(values):.{digits}f} (1 seed)"
    return f"{np.nanmean(values):.{digits}f} ± {np.nanstd(values):.{digits}f}"


def _mean_or_na(values, digits=2) -> str:
    """The mean of the defined (finite) ``values``, or ``"n/a"`` where none is (e.g. R² with nothing to explain)."""
    values = np.asarray(values, float)
    return f"{values[np.isfinite(values)].mean():.{digits}f}" if np.isfinite(values).any() else "n/a"


def joined(values) -> str:
    """The distinct ``values``, sorted, joined by "/": ``joined([3, 1, 3]) == "1/3"``."""
    return "/".join(map(str, sorted(set(values))))


def caption(what, preset, cfgs, labels=None, details=()) -> str:
    """``"{what}. Preset {preset}: {details}; outer steps {label} {n}, ...; seeds {seeds}."``"""
    cfgs = [c for c in cfgs if c is not None]
    steps = {}
    for c in cfgs:
        name = (labels or {}).get(getattr(c, "model", None), getattr(c, "model", "")) if labels else ""
        steps.setdefault(name, set()).add(c.outer_steps)
    steps_text = ", ".join(
        f"{label + ' ' if label else ''}{'/'.join(f'{n:,}' for n in sorted(n_steps))}"
        for label, n_steps in steps.items()
    )
    detail = "".join(f"{d}; " for d in details)
    return (
        f"{what}. Preset {preset}: {detail}outer steps {steps_text}; "
        f"seeds {', '.join(map(str, sorted({s for c in cfgs for s in c.seeds})))}."
    )


def eval_curves(runs: Runs, cfgs, metric: str, labels, scale=1.0, sets=("test", "ood")) -> dict:
    """``{"<learner>, <split>": (evaluation steps, {set: (seeds, evaluations)})}`` of ``metric`` (×``scale``) on the
    evaluation ``sets`` of each config of ``cfgs`` (learners named by ``labels``): what
    :func:`compgen.figures.plots.accuracy_curves` draws."""
    data = {}
    for c in cfgs:
        out, names = runs.output(c), c.eval_set_names()
        data[f"{labels[c.model]}, {c.split.replace('_', '-')}"] = (
            out["eval_steps"],
            {s: scale * np.asarray(out[f"eval/{metric}"])[:, :, names.index(s)] for s in sets},
        )
    return data


@dataclass(frozen=True)
class Metric:
    """An evaluation metric as a table shows it: ``eval/<name>`` ×``scale``, headed ``label``, ``digits`` after the
    point."""

    name: str
    label: str
    scale: float = 1.0
    digits: int = 1


def learning_diagnosis(runs: Runs, figure: str, metric: Metric, extra=(), row="model", test_set=None, **where):
    """What each run of ``figure`` (its configs matching ``where``, e.g. ``split="random"``) did over training, as a
    markdown table with one row per config, named by its field ``row`` (the model by default; ``"split"`` compares
    one learner's supports), every value a mean over seeds:

    * ``metric`` on the OOD set at every evaluation, and its change over the second half of training (last
      evaluation minus the one at half the steps; near 0 is a plateau);
    * with ``test_set`` (e.g. ``"test"``), ``metric`` on that in-distribution set at the last evaluation, so that
      the OOD column minus this one is what new combinations cost;
    * each ``(name, column label)`` of ``extra`` on the OOD set at the last evaluation (×``metric.scale``, mean ±
      std);
    * the inner loop on OOD tasks at the last evaluation: the support loss at the shared fast initialisation and
      after adaptation;
    * the R² of the task latent decoded from the adapted fast parameters (pooled, OOD) at the first and the
      last evaluation (``–`` where the runs have no probe).
    """
    label, scale, digits, metric = metric.label, metric.scale, metric.digits, metric.name
    cfgs = [c for c in runs.configs(figure, **where) if runs.output(c) is not None]
    # a figure's learners share one budget, hence one list of evaluation steps
    steps = [int(s) for s in runs.output(cfgs[0])["eval_steps"]] if cfgs else [0]
    middle = min(int(np.searchsorted(steps, steps[-1] / 2)), len(steps) - 1)
    columns = [(test_set, f"{label} on {test_set} tasks")] if test_set else []
    rows = []
    for cfg in cfgs:
        out, names = runs.output(cfg), cfg.eval_set_names()
        ood = names.index("ood")
        curve = scale * np.asarray(out[f"eval/{metric}"])[:, :, ood].mean(0)
        cells = [" → ".join(f"{v:.{digits}f}" for v in curve), f"{curve[-1] - curve[middle]:+.{digits}f}"]
        cells += [mean_std(final(out, metric, names.index(name), scale), digits) for name, _ in columns]
        cells += [mean_std(final(out, name, ood, scale), digits) for name, _ in extra]
        inner = [np.mean(final(out, f"inner_loss_{when}", ood)) for when in ("init", "final")]
        cells.append(f"{inner[0]:.3f} → {inner[1]:.3f}")
        r2 = out.get("eval/r2_ood_pooled")
        cells.append("–" if r2 is None else " → ".join(_mean_or_na(np.asarray(r2)[:, i]) for i in (0, -1)))
        name = getattr(cfg, row)
        rows.append(f"| {MODEL_LABELS.get(name, name) if row == 'model' else name} | " + " | ".join(cells) + " |")
    columns += list(extra)
    head = (
        f"| {row} | OOD {label} at steps {', '.join(f'{s:,}' for s in steps)} | change, step "
        f"{steps[middle]:,} → {steps[-1]:,} | "
        + "".join(f"{column} | " for _, column in columns)
        + f"support loss before → after the inner loop | R² of the task latent, step {steps[0]:,} → {steps[-1]:,} |"
    )
    rule = "|---|---|---|" + "---|" * len(columns) + "---|---|"
    return "\n".join([head, rule, *(rows or ["| – | not run at this preset |" + " |" * (len(columns) + 3)])])


def differences_table(runs: Runs, figure: str, labels=None) -> str:
    """Markdown: the fields of each model's config of ``figure`` that differ from the paper's configuration."""
    rows, seen = [], set()
    for cfg in runs.figures.get(figure, []):
        model = getattr(cfg, "model", None)
        if model in seen:
            continue
        seen.add(model)
        diffs = section.differences_from_paper(runs.section, cfg)
        text = ", ".join(f"`{name}` {ours} (paper {paper})" for name, ours, paper in diffs) or "none"
        rows.append(f"| {(labels or {}).get(model, model or 'student')} | {text} |")
    return "| model | fields that differ from the paper's configuration |\n|---|---|\n" + "\n".join(rows)


def header(runs: Runs, figure: str, labels=None) -> str:
    """The chapter's header: preset, its purpose, seeds, what was trained, and the differences from the paper."""
    from compgen import results

    p = runs.section.preset(runs.preset)
    commit = results._git_commit()[:12]
    lead = (
        f"**Preset `{runs.preset}`** ({p.description}); seeds {', '.join(map(str, runs.seeds))}; built from "
        f"commit `{commit}`. "
    )
    if runs.trained:
        lead += (
            f"{runs.trained} of {len(runs.outputs)} configs were trained for this build ({runs.wall_s / 60:.1f} min)."
        )
    else:
        lead += f"All {len(runs.outputs)} configs were loaded from the results store."
    cost = training_cost(runs)
    if cost:
        lead += (
            f" Training them took {cost['minutes']:.1f} process-minutes (each run's own clock, as stored), "
            f"{cost['minutes'] * cost['gemm'] / 250:.1f} scaled to a GEMM rate of 250 GFLOP/s (the training "
            f"machines read {cost['gemm']:.0f})."
        )
    return lead + "\n\n" + differences_table(runs, figure, labels)


def training_cost(runs: Runs) -> dict | None:
    """``{"minutes", "gemm"}``: the process-minutes the stored runs of ``runs`` took (their ``provenance`` wall
    time, compilation included) and the mean GEMM rate of the machines that trained them, weighted by time; ``None``
    where no run records it."""
    if runs.store is None:
        return None
    seconds, weighted = 0.0, 0.0
    for cfg, output in runs.outputs.items():
        prov = None if output is None else runs.store.provenance(runs.section, cfg)
        if prov is None:
            continue
        wall, gemm = prov.get("wall_time_s"), prov.get("gemm_gflops")
        if wall and gemm:
            seconds, weighted = seconds + wall, weighted + wall * gemm
    return {"minutes": seconds / 60, "gemm": weighted / seconds} if seconds else None


def summary_table(sec, configs, outputs) -> str:
    """A markdown table of every config's final evaluation metrics (mean ± std over seeds), for the command line."""
    lines = []
    for cfg, out in zip(configs, outputs):
        names = cfg.eval_set_names()
        metric = next((m for m in ("accuracy", "acc", "alignment") if f"eval/{m}" in out), "loss")
        values = np.asarray(out[f"eval/{metric}"])[:, -1]
        cells = (
            [mean_std(values)]
            if values.ndim == 1
            else [mean_std(values[:, names.index(n)]) for n in ("test", "ood") if n in names]
        )
        lines.append(f"| {sec.label(cfg)} | {metric} | " + " | ".join(cells) + " |")
    return "| run | metric | final value(s) (test, ood) |\n|---|---|---|\n" + "\n".join(lines)


def accuracy_bars(groups, series, values, chance=None, chance_label="chance"):
    """:func:`compgen.figures.plots.grouped_bars` of OOD accuracy in % (0 to 100), ``chance`` (if given) dashed."""
    return plots.grouped_bars(
        groups, series, values, "OOD accuracy (%)", ylim=(0, 100), reference=chance, reference_label=chance_label
    )


def size_heatmap(
    grid,
    hidden,
    templates,
    label: str,
    fmt="{:.1f}",
    across="number of modules T",
    down="hidden width of the base network",
):
    """The heatmap of a :func:`size_grid`: width down, number of modules across, ``label`` on the colour bar."""
    rows, cols = [str(h) for h in hidden], [str(t) for t in templates]
    return plots.heatmap(grid, rows, cols, across, down, label, fmt=fmt)


def size_figures(
    runs: Runs, figure: str, value, label: str, caption_of, claims: list, best=max, fmt="{:.1f}"
) -> FigureResults:
    """A size-sweep figure (Fig. A8, A10): one :func:`size_heatmap` per hypernetwork with stored runs of ``figure``,
    captioned by ``caption_of(model, configs)``, with the model's claims of ``claims`` (id ``<figure>/<model>``)."""
    out = []
    for m in HNETS:
        cfgs, hidden, templates, grid = size_grid(runs, figure, m, value, best)
        if cfgs:
            fig = size_heatmap(grid, hidden, templates, label, fmt)
            mine = [c for c in claims if c.id == f"{figure}/{m}"]
            out.append(FigureResult(fig, caption_of(m, cfgs), claims=mine))
    return FigureResults(out)
