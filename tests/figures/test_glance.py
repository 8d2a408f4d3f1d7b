"""The results-at-a-glance page is computed from the store: nothing stored, every claim "not run"."""

import pytest

from compgen import claims as C
from compgen.figures import glance


def test_an_empty_store_gives_not_run_everywhere(store):
    found = glance.claims("smoke")
    assert set(found) == set(glance.CHAPTERS) and all(found.values())
    assert {c.verdict for group in found.values() for c in group} == {C.NOT_RUN}
    page = glance.page("smoke")
    assert "preset **`smoke`**" in page and "were not run" in page and "| figure |" in page


@pytest.mark.parametrize("name", list(glance.CHAPTERS))
def test_every_claim_is_declared_as_a_spec_of_its_chapter(runs_of, name):
    chapter = glance.CHAPTERS[name]
    specs = [value for value in vars(chapter).values() if isinstance(value, C.ClaimSpec)]
    found = chapter.claims(runs_of(name, "paper", lambda c: None))
    assert found and {(c.section, c.criterion) for c in found} <= {(s.section, s.criterion) for s in specs}
    assert not any("{" in text or "}" in text for c in found for text in (c.figure, c.claim, c.paper, c.anchor))
