"""Check that no result in the book's prose is typed by hand.

    python tools/check_prose.py book                                      # the lint (make lint, CI)
    python tools/check_prose.py book --quick _build/html --smoke _build/smoke/_build/html   # both builds

**The lint** reads every markdown cell of the chapters' sources (``book/*.py``, jupytext percent format) and flags
each decimal number (``0.079``, ``2.0``) and percentage (``37 %``) that is neither in math (``$0.9$``), nor in code
(`` `inner_lr = 0.2` ``), nor marked as a value with its source by the ``abbr`` role
(``{abbr}`0.67–0.85 (the paper's Table A1)```, rendered as the value with its source on hover). Results the book
shows come from the runs and records as cell outputs (:mod:`compgen.figures`), never from a markdown cell; the
paper's numbers and configuration values may stay as text, marked. Integers (steps, sizes, seeds) pass.

**The cross-build check** (with ``--quick`` and ``--smoke``, after ``make book`` and ``make test``) reads the
rendered text of every chapter of both builds and reports each number with two or more decimals that the quick
book shows, the sources do not hold, and the smoke book shows verbatim in its prose (outside what code cells
display): a result that did not change with the preset was typed, not computed.

Exit status 1 when anything is found.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

NUMBER = re.compile(r"(?<![\w.])(?:\d+\.\d+|\d+(?:\.\d+)?\s?%)(?![\w.]*\d)")
# Spans a number may stand in: display and inline math, code, the abbr role (a value marked with its source), a
# link's target, an HTML tag.
EXEMPT = re.compile(
    r"\$\$.*?\$\$|\$[^$\n]+\$|``.*?``|`[^`\n]+`|\]\([^)]*\)|<[^>]+>"
    r"|§\s?\d+(?:\.\d+)*|\b(?:Figs?|Tables?|App|Appendix|Eqs?|Alg|Algorithm|Section)\.?\s[A-Z]?\d+(?:\.\d+)*",
    re.S,
)  # (the last two: references to the paper's sections, figures, tables, appendices and equations)
DECIMAL = re.compile(r"(?<![\w.])[-+−]?\d+\.\d{2,}(?![\w.]*\d)")  # a result-like number of the rendered text


def markdown_cells(source: Path) -> list:
    """``[(first line number, text)]`` of the markdown cells of a jupytext percent file (the ``# `` comment prefix
    removed); a ``.md`` file is one cell."""
    lines = source.read_text().splitlines()
    if source.suffix == ".md":
        return [(1, "\n".join(lines))]
    cells, current, start = [], None, 0
    for number, line in enumerate(lines, 1):
        if line.startswith("# %%"):
            if current is not None:
                cells.append((start, "\n".join(current)))
            current = [] if "[markdown]" in line else None
            start = number + 1
        elif current is not None:
            current.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    if current is not None:
        cells.append((start, "\n".join(current)))
    return cells


def hand_typed(source: Path) -> list:
    """``[(line, number, context)]``: every decimal number or percentage of the markdown cells of ``source`` that
    is neither in math nor code nor marked (see the module docstring)."""
    found = []
    for start, text in markdown_cells(source):
        kept = EXEMPT.sub(lambda m: " " * len(m.group(0)), text)
        for match in NUMBER.finditer(kept):
            line = start + kept.count("\n", 0, match.start())
            context = text[max(0, match.start() - 40) : match.end() + 20].replace("\n", " ")
            found.append((line, match.group(0), context))
    return found


def rendered_numbers(html_file: Path, prose_only: bool = False) -> set:
    """The numbers with two or more decimals in a rendered page's text (outside scripts and styles); with
    ``prose_only``, in its prose alone: the text of its markdown cells, not what a code cell displays (figures, tables
    and findings computed from runs and records, which may rightly show a record's numbers in both builds)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html_file.read_text(), "html.parser")
    for tag in soup(["script", "style"]):
        tag.decompose()
    if prose_only:
        for tag in soup.select("div.cell, div.cell_output, div.cell_input"):
            tag.decompose()
    return {m.group(0).lstrip("+-−") for m in DECIMAL.finditer(soup.get_text(" "))}


def shared_results(quick: Path, smoke: Path, sources: Path) -> list:
    """``[(page, number)]``: numbers the quick build's page shows and the smoke build's page shows in its prose, that
    the sources do not hold (a result that did not change with the preset, typed where the lint does not look)."""
    files = [p for suffix in ("py", "md", "bib") for p in sources.glob(f"*.{suffix}")]  # (a citation holds numbers)
    typed = {m.group(0).lstrip("+-−") for p in files for m in DECIMAL.finditer(p.read_text())}
    found = []
    for page in sorted(quick.glob("book/*.html")):
        other = smoke / page.relative_to(quick)
        if other.exists():
            common = (rendered_numbers(page) & rendered_numbers(other, prose_only=True)) - typed
            found += [(page.name, n) for n in sorted(common)]
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path, help="the folder of the chapters' sources (book)")
    parser.add_argument("--quick", type=Path, help="the quick build's HTML folder (_build/html)")
    parser.add_argument("--smoke", type=Path, help="the smoke build's HTML folder (_build/smoke/_build/html)")
    args = parser.parse_args(argv)
    problems = 0
    for source in sorted([*args.sources.glob("*.py"), *args.sources.glob("*.md")]):
        for line, number, context in hand_typed(source):
            print(f"{source}:{line}: a number typed in prose: {number!r} in “…{context}…” (compute it, or mark it)")
            problems += 1
    if args.quick and args.smoke:
        for page, number in shared_results(args.quick, args.smoke, args.sources):
            print(f"{page}: {number} is shown by the quick and the smoke build alike: typed, not computed?")
            problems += 1
    print(f"check_prose: {problems} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
