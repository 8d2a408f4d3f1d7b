"""Check a built Jupyter Book the way a reader sees it.

    python tools/check_book.py _build/html --sources book              # the default book (make check-book)
    python tools/check_book.py _build/smoke/_build/html --sources book # the smoke book (make test)

For every page of ``_toc.yml`` it reports, naming the page and the offending text:

* raw markdown in rendered text: a paragraph holding a markdown table row (``|---|``), or a literal
  ``{admonition}``, ``{note}``, ``{figure}``, ``$$`` or triple backtick outside code;
* a heading of the page's source (``book/<name>.py`` or ``.md``) missing from the page's table of contents;
* a figure in a cell output without a caption naming its preset and seeds;
* an error or traceback in a cell output;
* a broken internal link (missing file or missing ``#anchor``);
* math that did not typeset: each page is loaded in headless Chromium and every math element must hold a
  MathJax rendering and no MathJax error (``--no-browser`` skips this).

Exit status 1 when anything is found, 0 otherwise.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup

RAW_MARKUP = ("{admonition}", "{note}", "{figure}", "{warning}", "{glue", "$$", "```", ":::{")
TABLE_ROW = re.compile(r"\|\s*:?[-—–]+:?\s*\|")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@dataclass(frozen=True)
class Problem:
    page: str
    kind: str
    text: str

    def __str__(self):
        text = " ".join(self.text.split())
        return f"{self.page}: {self.kind}: {text[:160]}{'…' if len(text) > 160 else ''}"


# --------------------------------------------------------------------------------------------- pages


def toc_pages(toc_file: Path) -> list[str]:
    """Document names of ``_toc.yml`` (root first), e.g. ``["book/intro", "book/theory", ...]``."""
    names = []
    for line in toc_file.read_text().splitlines():
        match = re.match(r"\s*(?:-\s*)?(?:root|file):\s*(\S+)", line)
        if match:
            names.append(match.group(1))
    return names


def source_headings(source: Path) -> list[str]:
    """Headings of level 2 and below written in a page's markdown (a jupytext ``.py`` or a ``.md``)."""
    lines = source.read_text().splitlines()
    if source.suffix == ".py":  # markdown cells of a jupytext percent notebook: "# %% [markdown]" then "# ..." lines
        markdown, inside = [], False
        for line in lines:
            if line.startswith("# %%"):
                inside = "[markdown]" in line
            elif inside and (line.startswith("# ") or line == "#"):
                markdown.append(line[2:])
        lines = markdown
    headings, fenced = [], False
    for line in lines:
        if re.match(r"\s*(```|:::)", line):
            fenced = not fenced if not re.match(r"\s*(```|:::)\S*\{", line) else True
            if re.match(r"\s*(```|:::)\s*$", line):
                fenced = False
            continue
        match = re.match(r"(#{2,6})\s+(.*)", line)
        if match and not fenced:
            headings.append(match.group(2))
    return headings


def plain(markdown: str) -> str:
    """Heading text as rendered: no markdown emphasis, code, math delimiters or link targets."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"[`*_$\\]", "", text)
    return normalise(text)


def normalise(text: str) -> str:
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return re.sub(r"\s+", " ", text).strip().lower()


# --------------------------------------------------------------------------------------------- static checks


def _visible_text_nodes(soup):
    """Text nodes of the article that a reader sees as prose (code cell sources excluded)."""
    article = soup.select_one("article") or soup
    for node in article.find_all(string=True):
        if not (node.find_parent(["script", "style"]) or node.find_parent(class_="cell_input")):
            yield node


def check_raw_markup(page, soup):
    problems = []
    article = soup.select_one("article") or soup
    for paragraph in article.find_all(["p", "li", "td"]):
        if TABLE_ROW.search(paragraph.get_text()):
            problems.append(Problem(page, "markdown table rendered as text", paragraph.get_text()))
    seen = set()
    for node in _visible_text_nodes(soup):
        for token in RAW_MARKUP:
            if token in node and (token, str(node)[:60]) not in seen:
                seen.add((token, str(node)[:60]))
                problems.append(Problem(page, f"literal {token!r} in rendered text", str(node)))
    return problems


def check_headings(page, soup, source: Path | None):
    if source is None or not source.exists():
        return []
    toc = soup.select_one("#pst-page-toc-nav") or soup.select_one("nav.page-toc")
    listed = {normalise(a.get_text(" ", strip=True)) for a in toc.select("a")} if toc else set()
    body = {normalise(h.get_text(" ", strip=True).rstrip("#")) for h in soup.select("article h2, article h3")}
    problems = []
    for heading in source_headings(source):
        text = plain(heading)
        if text not in listed:
            where = "rendered but not in the page's contents" if text in body else "not rendered as a heading"
            problems.append(Problem(page, f"heading missing from the contents ({where})", heading))
    return problems


def check_figures(page, soup):
    problems = []
    for image in soup.select(".cell_output img"):
        output = image.find_parent(class_="cell_output")
        after = []
        for sibling in (
            image.find_parent(class_="output").find_next_siblings() if image.find_parent(class_="output") else []
        ):
            after.append(sibling.get_text(" ", strip=True))
        if not after:  # images are often wrapped directly in the cell_output container
            block = image
            while block.parent is not None and block.parent is not output:
                block = block.parent
            after = [s.get_text(" ", strip=True) for s in block.find_next_siblings()]
        caption = next((text for text in after if text), "")
        if not (re.search(r"\bpreset\b", caption, re.I) and re.search(r"\bseeds?\b", caption, re.I)):
            problems.append(
                Problem(
                    page,
                    "figure without a caption naming its preset and seeds",
                    f"{image.get('src', '')} followed by: {caption[:100]!r}",
                )
            )
    return problems


# A line that C++ code (XLA, its compiler, absl logging) wrote to the process's stderr: the slow-compile alarm, or an
# absl/glog line "E1128 09:30:00.123456  1234 file.cc:56] ...". The kernels leave those in the build's log.
CPP_LOG = re.compile(r"Very slow compile\?|XLA_FLAGS=--xla_dump_to|\b[EWIF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]")


def check_errors(page, soup):
    problems = []
    for output in soup.select(".cell_output .traceback, .cell_output .error, .cell_output .stderr"):
        text = output.get_text(" ", strip=True)
        if "traceback" in " ".join(output.get("class", [])) or re.search(r"Traceback|Error\b|Exception", text):
            problems.append(Problem(page, "error output", text))
    for output in soup.select(".cell_output"):
        found = CPP_LOG.search(output.get_text(" ", strip=True))
        if found:
            problems.append(Problem(page, "C++ log line in an output", found.group(0)))
    return problems


def check_links(page, soup, html_file: Path, ids_of):
    problems = []
    for link in soup.select("article a[href]"):
        href = link["href"]
        parts = urlsplit(href)
        if parts.scheme or href.startswith(("mailto:", "//")):
            continue
        target = html_file if not parts.path else (html_file.parent / unquote(parts.path)).resolve()
        if not target.exists():
            problems.append(Problem(page, "broken link (no such file)", href))
        elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in ids_of(target):
            problems.append(Problem(page, "broken link (no such anchor)", href))
    return problems


# --------------------------------------------------------------------------------------------- browser


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def rendered_dom(chromium: str, html_file: Path, profile: Path, budget_ms: int = 20000) -> str:
    """The page's DOM after its scripts ran (MathJax typesets during the virtual time budget)."""
    command = [
        chromium,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={budget_ms}",
        "--dump-dom",
        html_file.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    if done.returncode != 0 or "<html" not in done.stdout:
        raise RuntimeError(f"chromium failed on {html_file}: {done.stderr[-500:]}")
    return done.stdout


def check_math(page, dom: str):
    soup = BeautifulSoup(dom, "html.parser")
    problems = []
    for error in soup.find_all(["mjx-merror"]) + soup.select("[data-mjx-error]"):
        problems.append(Problem(page, "math error (MathJax)", error.get("data-mjx-error") or error.get_text()))
    for math in soup.select(".math"):
        if not math.find("mjx-container"):
            problems.append(Problem(page, "math not typeset", math.get_text()))
    return problems


# --------------------------------------------------------------------------------------------- driver


def check_book(html_root: Path, sources: Path, toc_file: Path, browser: bool = True) -> list[Problem]:
    ids_cache = {}

    def ids_of(path: Path):
        if path not in ids_cache:
            soup = BeautifulSoup(path.read_text(errors="replace"), "html.parser")
            ids_cache[path] = {tag["id"] for tag in soup.select("[id]")}
        return ids_cache[path]

    problems = []
    chromium = find_chromium() if browser else None
    if browser and chromium is None:
        problems.append(
            Problem(
                "(book)",
                "no Chromium found for the math check",
                "install it (apt-get install chromium) or pass --no-browser",
            )
        )
    profile = Path(tempfile.mkdtemp(prefix="check-book-"))
    try:
        for doc in toc_pages(toc_file):
            html_file = html_root / f"{doc}.html"
            page = f"{doc}.html"
            if not html_file.exists():
                problems.append(Problem(page, "page missing from the build", str(html_file)))
                continue
            soup = BeautifulSoup(html_file.read_text(errors="replace"), "html.parser")
            name = Path(doc).name
            source = next((p for p in (sources / f"{name}.py", sources / f"{name}.md") if p.exists()), None)
            problems += check_raw_markup(page, soup)
            problems += check_headings(page, soup, source)
            problems += check_figures(page, soup)
            problems += check_errors(page, soup)
            problems += check_links(page, soup, html_file, ids_of)
            if chromium:
                problems += check_math(page, rendered_dom(chromium, html_file, profile))
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return problems


CHECKS = (
    "markdown table rendered as text; literal {admonition} {note} {figure} $$ ``` in rendered text; "
    "source heading missing from the page's contents; figure without a caption naming preset and seeds; "
    "error or traceback output; broken internal link (file or anchor); math not typeset or MathJax error "
    "(headless Chromium)"
)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("html", type=Path, help="the built HTML folder, e.g. _build/html")
    parser.add_argument("--sources", type=Path, default=Path("book"), help="folder of book/<name>.py|.md sources")
    parser.add_argument("--toc", type=Path, default=Path("_toc.yml"))
    parser.add_argument("--no-browser", action="store_true", help="skip the math check in headless Chromium")
    args = parser.parse_args(argv)
    problems = check_book(args.html, args.sources, args.toc, browser=not args.no_browser)
    pages = len(toc_pages(args.toc))
    for problem in problems:
        print(problem)
    print(f"check_book: {len(problems)} problem(s) in {pages} page(s) of {args.html}  [checks: {CHECKS}]")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
