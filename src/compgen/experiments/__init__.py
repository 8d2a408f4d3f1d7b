"""The sections of the book, each a :class:`compgen.section.Section` value named ``SECTION`` in its module.

:mod:`compgen.catalog` finds them by name; the engine (:mod:`compgen.runner`) trains them. The few-shot sections
(hyperteacher, preferences, goals, in-context) share :mod:`compgen.experiments.fewshot`.
"""
