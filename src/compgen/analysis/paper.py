"""The numbers the paper reports, section by section (its tables), as data: ``paper_numbers.json`` beside this
module, each section's entry saying in ``about`` what they are."""

from __future__ import annotations

import functools
import json
from importlib import resources


@functools.cache
def _paper_numbers() -> dict:
    return json.loads(resources.files(__package__).joinpath("paper_numbers.json").read_text(encoding="utf-8"))


def paper_numbers(section_name: str) -> dict:
    """The numbers the paper reports for ``section_name`` (its tables)."""
    return _paper_numbers()[section_name]
