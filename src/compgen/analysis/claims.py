"""Claims of the paper, checked on our numbers by a criterion fixed in advance.

A claim compares two quantities measured on the same seeds (paired: each seed has its own teacher, modules or
mazes, so seeds are compared with themselves). The criterion (:func:`paired`) is the one the book states for
every claim:

* **sign**: the difference has the paper's sign on every seed, or on all but one with the mean difference
  above two standard errors of the per-seed differences (with a single seed: that seed); for runs pooled over seed
  sets (``pooled``: a claim judged on every seed the records hold, where "every seed" does not scale with their
  number) the mean difference above two standard errors instead. The rule is an argument of the judgment
  (:meth:`Check.holds_under`, :meth:`ClaimSpec.judge`), read from the runs judged
  (:attr:`compgen.runs.Runs.pooled`);
* **size**: the mean difference reaches ``margin`` (absolute, or relative to the mean of the compared-to
  quantity), and any extra ``level`` condition holds (e.g. "connected students above 0.9").

A :class:`Claim` records the paper's statement, the criterion in words, the paper's number where there is one,
ours, the seeds and the verdict: ``holds``, ``not reproduced at this preset`` or ``not run`` (no stored runs).
A chapter declares each of its claims once, as a :class:`ClaimSpec` (the statement and the criterion fixed in
advance, as data), and judges it on its numbers with :meth:`ClaimSpec.judge`.

Where a judged claim stands (:class:`Standing`, :func:`category`): its mean difference on one axis shared by every
claim, in units of its criterion (0 no difference, 1 the criterion), with two standard errors either side. A claim
whose interval contains its criterion is **at the criterion**: more seeds could move its verdict either way, so it is
counted apart from the claims that hold clearly and those clearly not reproduced (:func:`tally`). The criteria do not
change: the verdict is the one above.
"""

from __future__ import annotations

import dataclasses
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
    (:meth:`sign_ok_under`), the per-seed one unless the runs were pooled.

    ``threshold`` is the mean difference the size criterion asks (the margin, in the differences' units) and
    ``scale`` the unit of :meth:`standing`'s axis: the threshold, or for a claim without a margin (a quantity below a
    level) the level's size; ``level_ok`` the caller's extra condition."""

    differences: tuple
    mean: float
    standard_error: float
    agreeing: int
    size_ok: bool
    threshold: float = 0.0
    scale: float = 1.0
    level_ok: bool = True

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

    def standing(self) -> Standing:
        """Where the mean difference stands against the criterion: ``1 + (mean - threshold) / scale`` (0 no
        difference and 1 the criterion for a claim with a margin; 1 the level for one without), two standard errors
        either side, and whether that interval contains the criterion (never where the extra level condition fails,
        nor for a single value)."""
        if not math.isfinite(self.mean):
            return Standing(math.nan, math.nan, math.nan, False)
        position = 1 + (self.mean - self.threshold) / self.scale
        half = 2 * self.standard_error / self.scale
        edge = self.level_ok and half > 0 and abs(self.mean - self.threshold) < 2 * self.standard_error
        return Standing(position, position - half, position + half, edge)


@dataclass(frozen=True)
class Standing:
    """A claim's mean difference in units of its criterion (:meth:`Check.standing`): ``position`` with two standard
    errors either side (``low``, ``high``), and ``at_criterion``: that interval contains the criterion (1)."""

    position: float
    low: float
    high: float
    at_criterion: bool


def _axis_scale(threshold: float, reference: float) -> float:
    """The unit of the standing axis: the threshold, or the compared-to quantity's size where there is no margin."""
    return threshold if threshold > 0 else (abs(reference) or 1.0)


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
        return Check(tuple(d.tolist()), float("nan"), float("nan"), 0, False, level_ok=bool(level_ok))
    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0
    threshold = margin * (abs(float(worse.mean())) if relative else 1.0)
    return Check(
        tuple(d.tolist()),
        mean,
        se,
        int((d > 0).sum()),
        bool(mean >= threshold and level_ok),
        threshold,
        _axis_scale(threshold, float(worse.mean())),
        bool(level_ok),
    )


def lower(smaller, larger, margin=0.0, relative=False, level_ok=True) -> Check:
    """Check "``smaller`` is below ``larger`` by ``margin``" (e.g. a loss), seed by seed."""
    smaller, larger = np.asarray(smaller, float), np.asarray(larger, float)
    check = paired(-smaller, -larger, 0.0, False, level_ok)
    threshold = margin * (abs(float(larger.mean())) if relative else 1.0)
    return dataclasses.replace(
        check,
        size_ok=bool(check.mean >= threshold and level_ok),
        threshold=threshold,
        scale=_axis_scale(threshold, float(larger.mean())),
    )


@dataclass(frozen=True)
class Lead:
    """ "A learner beats another" as a chapter declares it (the hypernetwork against the better of ANIL and MAML):
    ``margin`` in the values' units (``relative``: a share of the other's mean), ``higher`` whether larger values
    are better (an accuracy) or smaller (a loss), and how the values are written (``digits``; ``unit``, a difference
    of percentages written in points)."""

    margin: float
    higher: bool = True
    relative: bool = False
    digits: int = 1
    unit: str = " %"

    def check(self, own, other, level_ok=True) -> tuple:
        """``(Check, what it read)`` of ``own`` against ``other`` (per-seed values on the same seeds)."""
        judge = paired if self.higher else lower
        found = judge(own, other, self.margin, self.relative, level_ok)
        d, points = self.digits, " pts" if self.unit == " %" else self.unit
        own, other = np.asarray(own, float), np.asarray(other, float)
        return found, f"{own.mean():.{d}f} vs {other.mean():.{d}f}{self.unit}: {describe_difference(found, points, d)}"


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
    id: str = ""  # stable across wording and seed sets: what pairs a claim judged on several runs (:func:`find`)
    reads: tuple = ()  # the figures whose runs it is judged from, its own figure first

    @property
    def holds(self) -> bool:
        return self.verdict == HOLDS


@dataclass(frozen=True)
class ClaimSpec:
    """The fixed parts of a claim: section, figure, the paper's statement, our criterion, the paper's number and
    the figure's anchor in the book.

    Every text is a :meth:`str.format` template filled by :meth:`judge`'s ``fields``, e.g.
    ``"{model}: holding out a module raises the OOD loss"`` (a literal brace is written twice). ``on`` says what the
    check compares: ``"seeds"`` (paired per seed, :data:`SIGN_RULE`) or ``"means"`` (one value per side, the means
    over seeds); the judged criterion ends with the rule in words, so wording and code cannot differ.

    ``id`` is a template too, of fields that name a judged claim rather than word it (``"fig3b-lead/{learner}"``):
    the judged claim's :attr:`Claim.id`, which pairs it across seed sets and codes however it is worded. ``reads``:
    the figures (of the section's) whose runs the claim is judged from, the one it belongs to first (templates as
    well, for a claim judged on one figure of several).
    """

    section: str
    figure: str
    claim: str
    criterion: str
    paper: str = "–"
    anchor: str = ""
    on: str = "seeds"
    id: str = ""
    reads: tuple = ()

    def __post_init__(self):
        if self.on not in ("seeds", "means"):
            raise ValueError(f"ClaimSpec.on must be 'seeds' or 'means', got {self.on!r}")
        if not self.id or not self.reads:
            raise ValueError(f"ClaimSpec {self.figure!r}: give its id and the figures it reads")

    def rule(self, pooled: bool = False) -> str:
        """The rule the criterion is judged by, in words (for runs pooled over seed sets where ``pooled``)."""
        if self.on == "means":
            return MEANS_RULE
        return ("pooled over seeds, " + POOLED_SIGN_RULE) if pooled else ("paired by seed, " + SIGN_RULE)

    def judge(
        self, check: Check | None, ours: str, seeds=(), pooled: bool = False, paper_difference=None, **fields
    ) -> Claim:
        """The :class:`Claim` of ``check`` with this spec's texts filled from ``fields``: ``holds`` where the check
        passes (its sign judged by the rule for runs pooled over seed sets where ``pooled``, the runs' own
        :attr:`compgen.runs.Runs.pooled`), ``not reproduced`` where not, ``not run`` where ``check`` is ``None``;
        a paper number whose fields are not given (a learner the paper did not run) reads "–". Its details keep the
        check's per-seed differences, threshold, scale and standing, and ``paper_difference`` (the paper's own
        difference in the check's units, where it reports one) as its position on the criterion axis."""
        fill = lambda text: text.format(**fields)
        try:
            paper = fill(self.paper)
        except KeyError:  # the paper's number of a learner it did not run
            paper = "–"
        pooled = pooled and self.on == "seeds"
        texts = (self.section, fill(self.figure), fill(self.claim), f"{fill(self.criterion)}; {self.rule(pooled)}")
        named = dict(id=fill(self.id), reads=tuple(fill(r) for r in self.reads))
        if check is None:
            return Claim(*texts, "–", paper, tuple(seeds), NOT_RUN, fill(self.anchor), {}, **named)
        verdict = HOLDS if check.holds_under(pooled) else NOT_REPRODUCED
        details = {"differences": check.differences, "agreeing": check.agreeing, "standing": check.standing()}
        details |= {"threshold": check.threshold, "scale": check.scale}
        if paper_difference is not None:
            details["paper_position"] = 1 + (paper_difference - check.threshold) / check.scale
        return Claim(*texts, ours, paper, tuple(seeds), verdict, fill(self.anchor), details, **named)


def find(claims, claim):
    """The claim of ``claims`` (judged on other runs: another seed set, the pooled seeds, the authors' code) that is
    ``claim``, by its :attr:`Claim.id`; ``None`` where there is none."""
    return next((c for c in claims or () if c.id == claim.id), None)


HOLDS_CLEARLY, AT_CRITERION, FAILS_CLEARLY = "holds clearly", "at the criterion", "clearly not reproduced"
CATEGORIES = (HOLDS_CLEARLY, AT_CRITERION, FAILS_CLEARLY, NOT_RUN)  # what :func:`category` answers, in this order


def category(claim: Claim) -> str:
    """One of :data:`CATEGORIES`: not run, at the criterion (its interval contains the criterion, whatever its
    verdict), else its verdict, which is then clear."""
    if claim.verdict == NOT_RUN:
        return NOT_RUN
    standing = claim.details.get("standing")
    if standing is not None and standing.at_criterion:
        return AT_CRITERION
    return HOLDS_CLEARLY if claim.holds else FAILS_CLEARLY


def tally(claims) -> dict:
    """``{category: how many of claims}`` for every one of :data:`CATEGORIES` (:func:`category`)."""
    found = [category(c) for c in claims]
    return {k: found.count(k) for k in CATEGORIES}


def verdict_words(claim: Claim) -> str:
    """The verdict as the book words it everywhere: "holds", "not reproduced" or "not run", with ", at the
    criterion" where the claim's interval contains its criterion."""
    words = {HOLDS: "holds", NOT_REPRODUCED: "not reproduced", NOT_RUN: "not run"}[claim.verdict]
    return words + (", at the criterion" if category(claim) == AT_CRITERION else "")


def describe_difference(check: Check, unit="", digits=2) -> str:
    """``"+6.3 ± 1.1 pts (3/3 seeds)"``: the mean difference, its standard error and the seeds agreeing."""
    if not math.isfinite(check.mean):
        return "non-finite"
    n = len(check.differences)
    spread = f" ± {check.standard_error:.{digits}f}" if n > 1 else ""
    return f"{check.mean:+.{digits}f}{spread}{unit} ({check.agreeing}/{n} seeds)"
