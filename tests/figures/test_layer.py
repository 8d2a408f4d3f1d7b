"""The figures draw and render; they do not train, fit, or read files but through the record layer.

Training and fitting are the runner's and the analysis layer's (:mod:`compgen.analysis`); the records the book draws
are read through :mod:`compgen.recordfile`, :mod:`compgen.ledger` and the results store's API."""

import ast
import re

import pytest

from compgen import fingerprint

FIGURES = sorted(n for n in fingerprint.library_modules() if n == "compgen.figures" or n.startswith("compgen.figures."))
ENGINE = (
    "compgen.runner",
    "compgen.dispatch",
    "compgen.backends",
    "compgen.meta",
    "compgen.checkpoint",
    "compgen.storage",
)
FITTING = ("optax",)
READS = r"\bopen\(|\.read_text\(|\.read_bytes\(|\bjson\.loads?\(|\bnp\.load\(|\bpickle\."


def _tree(name):
    return ast.parse(fingerprint.module_path(name).read_text())


@pytest.mark.parametrize("name", FIGURES)
def test_a_figures_module_neither_trains_nor_fits_nor_reads_files(name):
    engine = {i for i in fingerprint.imports(name) if any(i == e or i.startswith(e + ".") for e in ENGINE)}
    assert not engine, f"{name} imports the training engine: {sorted(engine)}"
    external = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.Import):
            external |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            external.add(node.module.split(".")[0])
    assert not external & set(FITTING), f"{name} imports an optimiser: it fits something"
    found = re.findall(READS, fingerprint.module_path(name).read_text())
    assert not found, f"{name} reads files itself ({found}); read records through compgen.recordfile"


# What judges a claim: the analysis layer's criteria (compgen.analysis.claims), their checks, a spec's judge and the
# pooling of seed sets. A figures module may call the analysis for claims; it does not compute a verdict itself.
JUDGING = {
    ("compgen.analysis.claims", "paired"),
    ("compgen.analysis.claims", "lower"),
    ("compgen.analysis.finals", "pool"),
}


def _aliases(tree) -> dict:
    """{name in the module: the library module or module.attribute it stands for}, from its imports."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("compgen"):
            for a in node.names:
                found[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                found[a.asname or a.name] = a.name
    return found


def _judging_calls(name) -> list:
    """The calls of module ``name`` that judge (:data:`JUDGING`, a spec's ``judge``, an analysis ``*_check``)."""
    tree = _tree(name)
    aliases, found = _aliases(tree), []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute):
            owner = aliases.get(f.value.id, "") if isinstance(f.value, ast.Name) else ""
            analysis_check = owner.startswith("compgen.analysis") and f.attr.endswith("_check")
            if (owner, f.attr) in JUDGING or f.attr == "judge" or analysis_check:
                found.append(f"{ast.unparse(f)} (line {node.lineno})")
        elif isinstance(f, ast.Name):
            source = aliases.get(f.id, "")  # an imported function: compgen.analysis.claims.paired, say
            if tuple(source.rsplit(".", 1)) in JUDGING or (source.startswith("compgen.analysis") and
                                                           f.id.endswith("_check")):  # fmt: skip
                found.append(f"{f.id} (line {node.lineno})")
    return found


DRAWS = ("plots.", "ax.", "fig.", "axes", "matplotlib")


@pytest.mark.parametrize("name", FIGURES)
def test_a_figures_module_draws_or_words_and_never_judges(name):
    """What its functions do: each module draws (matplotlib, or compgen.figures.plots) or words (builds text from
    what it is given), and none computes a verdict (the analysis layer's criteria, checks and pooling)."""
    judging = _judging_calls(name)
    assert not judging, f"{name} judges claims itself ({judging}); that belongs in compgen.analysis"
    tree = _tree(name)
    source = fingerprint.module_path(name).read_text()
    draws = any(d in source for d in DRAWS)
    words = any(isinstance(n, ast.JoinedStr) for n in ast.walk(tree)) or ".join(" in source
    assert draws or words, f"{name} neither draws nor words anything"


def test_the_judging_check_finds_a_verdict_computed_in_a_figure(tmp_path, monkeypatch):
    """A module that calls the criteria itself is found."""
    source = "from compgen.analysis import claims as C\n\ndef bad(a, b):\n    return C.paired(a, b)\n"
    monkeypatch.setattr(fingerprint, "module_path", lambda name: tmp_path / "m.py")
    (tmp_path / "m.py").write_text(source)
    assert _judging_calls("compgen.figures.fake") == ["C.paired (line 4)"]
