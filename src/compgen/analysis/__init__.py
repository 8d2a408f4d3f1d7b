"""The analysis layer: pure functions from runs and records to numbers and claims, below the figures that draw them.

:mod:`~compgen.analysis.claims` (criteria, verdicts, where a claim stands against its criterion),
:mod:`~compgen.analysis.values` (the numbers read from runs), one module per chapter with its claims as data and the
functions that judge them (:mod:`~compgen.analysis.teacher_student`, :mod:`~compgen.analysis.hyperteacher`,
:mod:`~compgen.analysis.preferences`, :mod:`~compgen.analysis.goals`, :mod:`~compgen.analysis.incontext`),
:mod:`~compgen.analysis.compare` (any learner judged by the paper's claims, trained through the dispatcher),
:mod:`~compgen.analysis.finals` (runs from the records' per-seed numbers, pooling over seed sets),
:mod:`~compgen.analysis.counterexamples` (the theory chapter's exact students, fitted) and
:mod:`~compgen.analysis.paper` (the paper's numbers).
"""
