"""The analysis layer: pure functions from runs and records to numbers and claims, below the figures that draw them.

:mod:`~compgen.analysis.claims` (criteria and verdicts), :mod:`~compgen.analysis.records` (runs from the records'
per-seed numbers, pooling over seed sets), :mod:`~compgen.analysis.counterexamples` (the theory chapter's exact
students, fitted).
"""
