"""The results-at-a-glance page is computed from the store: nothing stored, every claim "not run"."""

from compgen import claims as C
from compgen.figures import glance


def test_an_empty_store_gives_not_run_everywhere(store):
    found = glance.claims("smoke")
    assert set(found) == set(glance.CHAPTERS) and all(found.values())
    assert {c.verdict for group in found.values() for c in group} == {C.NOT_RUN}
    page = glance.page("smoke")
    assert "preset **`smoke`**" in page and "were not run" in page and "| figure |" in page
