"""Claims of the paper, checked on our numbers by a criterion fixed in advance.

A claim compares two quantities measured on the same seeds (paired: each seed has its own teacher, modules or
mazes, so seeds are compared with themselves). The criterion (:func:`paired`) is the one the book states for
every claim:

* **sign**: the difference has the paper's sign on every seed, or on all but one with the mean difference
  above two standard errors of the per-seed differences (with a single seed: that seed); for runs pooled over seed
  sets (``pooled``: a claim judged on every seed the records hold, where "every seed" does not scale with their
  number) the mean difference above two standard errors instead. The rule is an argument of the judgment
  (:meth:`Check.holds_under`, :meth:`ClaimSpec.judge`), read from the runs judged
  (:attr:`compgen.notebook.Runs.pooled`);
* **size**: the mean difference reaches ``margin`` (absolute, or relative to the mean of the compared-to
  quantity), and any extra ``level`` condition holds (e.g. "connected students above 0.9").

A :class:`Claim` records the paper's statement, the criterion in words, the paper's number where there is one,
ours, the seeds and the verdict: ``holds``, ``not reproduced at this preset`` or ``not run`` (no stored runs).
A chapter declares each of its claims once, as a :class:`ClaimSpec` (the statement and the criterion fixed in
advance, as data), and judges it on its numbers with :meth:`ClaimSpec.judge`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

HOLDS, NOT_REPRODUCED, NOT_RUN = "holds", "not reproduced at this preset", "not run"

# The sign rules of :func:`paired`, in the words every criterion ends with (ClaimSpec.judge adds them).
SIGN_RULE = "the paper's sign on every seed, or on all but one with the mean above two standard errors"
POOLED_SIGN_RULE = "the mean above two standard errors of the per-seed differences"
MEANS_RULE = "judged on the means over seeds"


@dataclass(frozen=True)
class Check:
    """The outcome of :func:`paired`: the per-seed differences (in the paper's direction), their mean and
    standard error, how many seeds have the paper's sign, and whether the size passes; the sign is judged by a rule
    (:meth:`sign_ok_under`), the per-seed one unless the runs were pooled."""

    differences: tuple
    mean: float
    standard_error: float
    agreeing: int
    size_ok: bool

    def sign_ok_under(self, pooled: bool = False) -> bool:
        """The sign criterion: the paper's sign on every seed, or on all but one with the mean above two standard
        errors; ``pooled``: the mean above two standard errors (see the module docstring)."""
        n, mean, se = len(self.differences), self.mean, self.standard_error
        if not math.isfinite(mean):
            return False
        if pooled:
            return mean > 2 * se and mean > 0
        return self.agreeing == n or (n > 2 and self.agreeing == n - 1 and mean > 2 * se)

    def holds_under(self, pooled: bool = False) -> bool:
        return self.sign_ok_under(pooled) and self.size_ok

    @property
    def sign_ok(self) -> bool:
        return self.sign_ok_under(False)

    @property
    def holds(self) -> bool:
        return self.holds_under(False)


def paired(better, worse, margin=0.0, relative=False, level_ok=True) -> Check:
    """Check "``better`` exceeds ``worse`` by ``margin``" seed by seed (arrays over the same seeds).

    ``relative``: the margin is a fraction of ``mean(worse)`` (for losses pass ``better = -loss`` ... or use
    :func:`lower`). ``level_ok``: an extra condition already evaluated by the caller.
    """
    better, worse = np.asarray(better, float), np.asarray(worse, float)
    if better.shape != worse.shape or better.size == 0:
        raise ValueError(f"paired values must have the same non-empty shape, got {better.shape} and {worse.shape}")
    d = better - worse
    if not np.all(np.isfinite(d)):
        return Check(tuple(d.tolist()), float("nan"), float("nan"), 0, False)
    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0
    scale = abs(float(worse.mean())) if relative else 1.0
    return Check(tuple(d.tolist()), mean, se, int((d > 0).sum()), bool(mean >= margin * scale and level_ok))


def lower(smaller, larger, margin=0.0, relative=False, level_ok=True) -> Check:
    """Check "``smaller`` is below ``larger`` by ``margin``" (e.g. a loss), seed by seed."""
    smaller, larger = np.asarray(smaller, float), np.asarray(larger, float)
    check = paired(-smaller, -larger, 0.0, False, level_ok)
    scale = abs(float(larger.mean())) if relative else 1.0
    return Check(
        check.differences,
        check.mean,
        check.standard_error,
        check.agreeing,
        bool(check.mean >= margin * scale and level_ok),
    )


@dataclass(frozen=True)
class Claim:
    """One claim of the paper and our verdict on it (see module docstring)."""

    section: str
    figure: str
    claim: str
    criterion: str
    ours: str = "–"
    paper: str = "–"
    seeds: tuple = ()
    verdict: str = NOT_RUN
    anchor: str = ""  # the figure's label in the book, for links
    details: dict = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return self.verdict == HOLDS


def judge(
    section, figure, claim, criterion, check: Check | None, ours: str, seeds=(), paper="–", anchor="", pooled=False
) -> Claim:
    """A :class:`Claim` from a :class:`Check` (``None``: not run), its sign judged by the per-seed rule, or by the
    pooled one where ``pooled``."""
    if check is None:
        return Claim(section, figure, claim, criterion, "–", paper, tuple(seeds), NOT_RUN, anchor, {})
    verdict = HOLDS if check.holds_under(pooled) else NOT_REPRODUCED
    return Claim(
        section,
        figure,
        claim,
        criterion,
        ours,
        paper,
        tuple(seeds),
        verdict,
        anchor,
        {"differences": check.differences, "agreeing": check.agreeing},
    )


@dataclass(frozen=True)
class ClaimSpec:
    """The fixed parts of a claim: section, figure, the paper's statement, our criterion, the paper's number and
    the figure's anchor in the book.

    Every text is a :meth:`str.format` template filled by :meth:`judge`'s ``fields``, e.g.
    ``"{model}: holding out a module raises the OOD loss"`` (a literal brace is written twice). ``on`` says what the
    check compares: ``"seeds"`` (paired per seed, :data:`SIGN_RULE`) or ``"means"`` (one value per side, the means
    over seeds); the judged criterion ends with the rule in words, so wording and code cannot differ.
    """

    section: str
    figure: str
    claim: str
    criterion: str
    paper: str = "–"
    anchor: str = ""
    on: str = "seeds"

    def __post_init__(self):
        if self.on not in ("seeds", "means"):
            raise ValueError(f"ClaimSpec.on must be 'seeds' or 'means', got {self.on!r}")

    def rule(self, pooled: bool = False) -> str:
        """The rule the criterion is judged by, in words (for runs pooled over seed sets where ``pooled``)."""
        if self.on == "means":
            return MEANS_RULE
        return ("pooled over seeds, " + POOLED_SIGN_RULE) if pooled else ("paired by seed, " + SIGN_RULE)

    def judge(self, check: Check | None, ours: str, seeds=(), pooled: bool = False, **fields) -> Claim:
        """The :class:`Claim` of :func:`judge` with this spec's texts filled from ``fields`` (``check`` ``None``:
        not run), judged by the rule for runs pooled over seed sets where ``pooled`` (the runs' own
        :attr:`compgen.notebook.Runs.pooled`); a paper number whose fields are not given (a learner the paper did not
        run) reads "–"."""
        fill = lambda text: text.format(**fields)
        try:
            paper = fill(self.paper)
        except KeyError:  # the paper's number of a learner it did not run
            paper = "–"
        return judge(
            self.section,
            fill(self.figure),
            fill(self.claim),
            f"{fill(self.criterion)}; {self.rule(pooled and self.on == 'seeds')}",
            check,
            ours,
            seeds,
            paper=paper,
            anchor=fill(self.anchor),
            pooled=pooled and self.on == "seeds",
        )


def describe_difference(check: Check, unit="", digits=2) -> str:
    """``"+6.3 ± 1.1 pts (3/3 seeds)"``: the mean difference, its standard error and the seeds agreeing."""
    if not math.isfinite(check.mean):
        return "non-finite"
    n = len(check.differences)
    spread = f" ± {check.standard_error:.{digits}f}" if n > 1 else ""
    return f"{check.mean:+.{digits}f}{spread}{unit} ({check.agreeing}/{n} seeds)"
