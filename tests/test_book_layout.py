"""Cheap checks of the book's layout: the table of contents, the notebooks' parameters cells and the
Jupyter Book configuration.  They run in well under a second and need no notebook execution."""

import ast
import re
import sys
import types
from pathlib import Path

import pytest

# The book's tools, not the library's: a machine without them (e.g. a GPU image that runs the library's tests)
# skips these checks; `make install` installs both.
jupytext = pytest.importorskip("jupytext", reason="jupytext is not installed (the book's extra: pip install '.[book]')")
yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (the book's extra: pip install '.[book]')")

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("*.py"))


def _load_yaml(name):
    return yaml.safe_load((ROOT / name).read_text())


def _toc_files():
    """Every `file:` entry of _toc.yml (root included), in order."""
    toc = _load_yaml("_toc.yml")
    found = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk({k: v for k, v in toc.items() if k != "root"})
    return found


def _assigned_names(source):
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def test_there_are_notebooks():
    assert NOTEBOOKS, "no book/*.py notebook sources found"


def test_toc_root_is_intro():
    toc = _load_yaml("_toc.yml")
    assert toc.get("format") == "jb-book"
    assert toc["root"] == "book/intro"
    assert (BOOK / "intro.md").is_file()


def test_every_notebook_is_in_toc_and_every_toc_entry_exists():
    entries = _toc_files()
    duplicates = sorted({e for e in entries if entries.count(e) > 1})
    assert not duplicates, f"listed more than once in _toc.yml: {duplicates}"

    listed = {e for e in entries if e != "book/intro"}
    sources = {f"book/{p.stem}" for p in NOTEBOOKS}
    assert not sources - listed, f"book/*.py missing from _toc.yml: {sorted(sources - listed)}"
    missing = sorted(e for e in listed - sources if not (ROOT / f"{e}.md").is_file())
    assert not missing, f"_toc.yml entries with no book/<name>.py or .md source: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_one_parameters_cell_with_preset_and_force(path):
    notebook = jupytext.read(path)
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{path.name}: expected one cell tagged 'parameters', found {len(cells)}"
    assert cells[0].cell_type == "code", f"{path.name}: the parameters cell must be a code cell"
    names = _assigned_names(cells[0].source)
    for required in ("preset", "force"):
        assert required in names, f"{path.name}: parameters cell does not define `{required}`"


def test_config_excludes_generated_folders():
    config = _load_yaml("_config.yml")
    excluded = set(config.get("exclude_patterns", []))
    for folder in (".venv", "_build", "_vendor", "node_modules", "README.md"):
        assert folder in excluded, f"_config.yml exclude_patterns lacks {folder!r}"
    assert str(config["execute"]["execute_notebooks"]) == "off", "notebooks are executed by make, not jupyter-book"
    assert config.get("only_build_toc_files") is True


def _cells(path):
    return [c for c in jupytext.read(path).cells if c.source.strip()]


def prose_share(path) -> float:
    """Characters of markdown cells over characters of the cells a reader sees (not those tagged remove-cell, such
    as the Colab install cell) of a notebook source."""
    cells = [c for c in _cells(path) if "remove-cell" not in c.metadata.get("tags", [])]
    prose = sum(len(c.source) for c in cells if c.cell_type == "markdown")
    return prose / max(1, sum(len(c.source) for c in cells))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_prose_with_figures_from_the_library(path):
    """At least 70 % prose; no loop in a notebook builds a table or a figure (that is the library's job)."""
    assert prose_share(path) >= 0.70, f"{path.name}: prose is {prose_share(path):.0%} of the characters"
    for cell in _cells(path):
        if cell.cell_type == "code":
            tree = ast.parse(cell.source)
            loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.ListComp, ast.DictComp))]
            text = cell.source
            assert not (loops and ("|---" in text or "plt." in text or "lines.append" in text)), (
                f"{path.name}: a loop builds a table or figure in the notebook:\n{text[:300]}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_directives_use_colon_fences(path):
    """A backtick fence's info string may not contain backticks (CommonMark): a title with `code` breaks it."""
    for cell in _cells(path):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                assert not line.lstrip().startswith("```{"), f"{path.name}: use :::{{...}} fences: {line}"


def test_the_repository_address_is_written_once():
    address = _load_yaml("_config.yml")["repository"]["url"]
    for path in NOTEBOOKS:
        assert address not in path.read_text(), f"{path.name} repeats the repository address; use `repository`"
    assert "repository" in (ROOT / "Makefile").read_text()


def test_every_chapter_has_the_same_colab_cell_and_it_refuses_no_repository():
    """One install cell for Colab in every notebook (tests/test_colab.py runs it); without `repository` it stops with
    one line instead of installing `git+None`."""
    cells = set()
    for path in NOTEBOOKS:
        text = path.read_text()
        start = text.index("# In Colab:")
        cells.add(text[start : text.index("# %%", start)])
    assert len(cells) == 1
    cell = cells.pop()
    sys.modules["google.colab"] = types.ModuleType("google.colab")  # as in Colab
    try:
        with pytest.raises(ValueError, match="repository is not set"):
            exec(cell, {"repository": None})
    finally:
        del sys.modules["google.colab"]


def test_the_readme_is_for_users():
    """At most 200 lines, and what is true now: no issue numbers, no dates, no commits (measurements live in
    book/records/, drawn by the appendix)."""
    text = (BOOK.parent / "README.md").read_text()
    assert len(text.splitlines()) <= 200, f"README.md has {len(text.splitlines())} lines"
    for pattern in (r"\bissues? #?\d+", r"\b20\d\d-\d\d-\d\d\b", r"\bat (commit )?[0-9a-f]{7,40}\b"):
        found = re.findall(pattern, text, flags=re.I)
        assert not found, f"README.md: {found[:3]}"
    for section in (
        "Read it",
        "Rebuild it",
        "Change a parameter",
        "Open a chapter in Colab",
        "Run on a GPU",
        "Run on a cluster (Ray)",
        "The results store",
        "Layout",
        "Contributing",
    ):
        assert f"\n## {section}\n" in text, section


HISTORY = {
    "a date": r"\b20\d\d-\d\d-\d\d\b|\b(?:January|February|March|April|May|June|July|August|September|October|"
    r"November|December) 20\d\d\b",
    "a commit": r"\b(?:commit|commits|at) [0-9a-f]{7,40}\b",
    "history": r"\b(?:[Uu]ntil|[Ss]ince|[Bb]efore) 20\d\d\b",
    "the spec": r"spec §",
}
DURATION = (
    r"\b(?:\d+(?:\.\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|twenty|thirty|sixty)[ -]"
    r"(?:minutes?|seconds?|hours?)\b"
)


def _comments_and_docstrings(path: Path) -> list:
    """``[(line, text)]``: the comments of a Python, shell or requirements file, and a Python file's docstrings."""
    import ast
    import io
    import tokenize

    source = path.read_text()
    if path.suffix != ".py":
        return [(i, line) for i, line in enumerate(source.splitlines(), 1) if line.lstrip().startswith("#")]
    found = [
        (t.start[0], t.string)
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and ast.get_docstring(
            node
        ):
            found.append((node.body[0].lineno, ast.get_docstring(node, clean=False)))
    return found


def test_code_and_prose_say_what_is_true_now():
    """Comments and docstrings in src/ and tools/, and the chapters' markdown, describe what is true now: no dates,
    commits or "until ..." (history lives in git, measurements in book/records/), no "spec §" (a reader cannot open
    it), and the chapters type no durations (the book's costs are computed from its records)."""
    root = BOOK.parent
    problems = []
    files = [*root.glob("src/**/*.py"), *root.glob("tools/*.py"), *root.glob("tools/*.sh"), *root.glob("tools/*.txt")]
    for path in sorted(files):
        for line, text in _comments_and_docstrings(path):
            problems += [
                f"{path.relative_to(root)}:{line}: {what}" for what, p in HISTORY.items() if re.search(p, text)
            ]
    for path in sorted(BOOK.glob("*.py")):
        for line, text in enumerate(path.read_text().splitlines(), 1):
            if text.startswith("#"):
                for what, pattern in {**HISTORY, "a typed duration": DURATION}.items():
                    if re.search(pattern, text):
                        problems.append(f"{path.relative_to(root)}:{line}: {what}: {text.strip()[:80]}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_with_its_default_parameters_passes_its_own_parameter_check(path, monkeypatch):
    """Everything up to the notebook's ``check_parameters(globals())`` line, run as papermill runs it: a name the
    imports leave in the notebook (a function imported by name, say) would be taken for an unknown parameter."""
    text = path.read_text()
    end = text.index("\n", text.index("notebook.check_parameters(globals()"))
    monkeypatch.chdir(BOOK)
    exec(compile(text[:end], str(path), "exec"), {"__name__": "__main__"})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_headings_never_skip_a_level(path):
    """jupyter-book (with --warningiserror) refuses a page whose headings go from H1 to H3: each heading of the
    notebook's prose is at most one level below the one before."""
    notebook = jupytext.read(path)
    levels = [
        len(line) - len(line.lstrip("#"))
        for cell in notebook.cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if re.match(r"#+ ", line)
    ]
    jumps = [(a, b) for a, b in zip(levels, levels[1:]) if b > a + 1]
    assert not jumps, f"{path.name}: heading levels {jumps}"
