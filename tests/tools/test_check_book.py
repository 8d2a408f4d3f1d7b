"""The book check finds each defect it promises to find, and passes a clean page."""

import importlib.util
import sys
from pathlib import Path

import pytest

# tools/check_book.py reads HTML with BeautifulSoup, a tool of the book's: a machine without it skips these tests
pytest.importorskip("bs4", reason="beautifulsoup4 is not installed (the book's extra: pip install '.[book]')")

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("check_book", ROOT / "tools" / "check_book.py")
check_book = importlib.util.module_from_spec(spec)
sys.modules["check_book"] = check_book  # dataclasses look their module up
spec.loader.exec_module(check_book)

SOURCE = """# %% [markdown]
# # Chapter
#
# ## First part
#
# :::{note}
# A note.
# :::
#
# ## Second part
"""

CLEAN_BODY = """
<nav id="pst-page-toc-nav"><a href="#first-part">First part</a><a href="#second-part">Second part</a></nav>
<article>
<section id="first-part"><h2>First part</h2><p>Prose with a <a href="#second-part">link</a>.</p></section>
<section id="second-part"><h2>Second part</h2>
<div class="cell"><div class="cell_input"><pre>```not prose```</pre></div>
<div class="cell_output"><img src="x.png"/><p>Figure. Fig. 1. Preset smoke: seeds 2020.</p>
<table><tr><td>a</td></tr></table></div></div>
</section></article>
"""


def _book(tmp_path, body, source=SOURCE):
    html = tmp_path / "html" / "book"
    html.mkdir(parents=True)
    (html / "chapter.html").write_text(f"<html><body>{body}</body></html>")
    (tmp_path / "html" / "book" / "x.png").write_bytes(b"png")
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "chapter.py").write_text(source)
    toc = tmp_path / "_toc.yml"
    toc.write_text("format: jb-book\nroot: book/chapter\n")
    return check_book.check_book(tmp_path / "html", sources, toc, browser=False)


def test_a_clean_page_passes(tmp_path):
    assert _book(tmp_path, CLEAN_BODY) == []


@pytest.mark.parametrize(
    "defect, body",
    [
        (
            "markdown table rendered as text",
            CLEAN_BODY.replace("<p>Prose", "<p>| a | b | |---|---| | 1 | 2 |</p><p>Prose"),
        ),
        ("markdown table rendered as text", CLEAN_BODY.replace("<p>Prose", "<p>| a | |—| | 1 |</p><p>Prose")),
        ("literal '{admonition}'", CLEAN_BODY.replace("<p>Prose", "<p>```{admonition} Why the</p><p>Prose")),
        ("literal '$$'", CLEAN_BODY.replace("<p>Prose", "<p>$$ x $$</p><p>Prose")),
        (
            "heading missing from the contents",
            CLEAN_BODY.replace('<a href="#second-part">Second part</a></nav>', "</nav>"),
        ),
        ("figure without a caption", CLEAN_BODY.replace("<p>Figure. Fig. 1. Preset smoke: seeds 2020.</p>", "")),
        ("error output", CLEAN_BODY.replace("<table>", '<div class="output traceback">Traceback: boom</div><table>')),
        (
            "C++ log line in an output",
            CLEAN_BODY.replace(
                "<table>",
                '<div class="cell_output"><pre>E1128 09:30:00.123456  4321 slow_operation_alarm.cc:73] '
                "Constant folding took 2m. Very slow compile? If you want to file a bug</pre></div><table>",
            ),
        ),
        ("broken link (no such anchor)", CLEAN_BODY.replace('href="#second-part">link', 'href="#nowhere">link')),
        ("broken link (no such file)", CLEAN_BODY.replace('href="#second-part">link', 'href="other.html">link')),
    ],
)
def test_each_defect_is_found_and_named(tmp_path, defect, body):
    problems = _book(tmp_path, body)
    assert problems and all(p.page == "book/chapter.html" for p in problems)
    assert any(defect in p.kind for p in problems), [str(p) for p in problems]


def test_a_swallowed_heading_is_found(tmp_path):
    body = CLEAN_BODY.replace(
        '<section id="second-part"><h2>Second part</h2>', "<section><pre>## Second part</pre>"
    ).replace('<a href="#second-part">Second part</a>', "")
    body = body.replace('href="#second-part">link', 'href="#first-part">link')
    problems = _book(tmp_path, body)
    assert any("not rendered as a heading" in p.kind for p in problems)


def test_math_errors_and_untypeset_math_are_found():
    good = '<span class="math"><mjx-container>x</mjx-container></span>'
    assert check_book.check_math("p", good) == []
    assert check_book.check_math("p", '<span class="math">\\(x\\)</span>')[0].kind == "math not typeset"
    error = (
        '<span class="math"><mjx-container><mjx-merror data-mjx-error="Undefined control sequence"/>'
        "</mjx-container></span>"
    )
    assert "Undefined control sequence" in check_book.check_math("p", error)[0].text


def test_source_headings_skip_fenced_blocks():
    source = SOURCE + "# ```python\n# ## not a heading\n# ```\n"
    assert check_book.source_headings(_write(source)) == ["First part", "Second part"]


def _write(text, name="x.py"):
    import tempfile

    path = Path(tempfile.mkdtemp()) / name
    path.write_text(text)
    return path
