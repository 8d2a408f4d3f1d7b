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


@pytest.mark.parametrize("name", FIGURES)
def test_a_figures_module_draws_or_renders(name):
    """Each module draws (matplotlib, or the shared helpers of compgen.figures.plots) or renders (a function that
    returns a FigureResult or text)."""
    draws = {"compgen.figures.plots", "compgen.figures.gridplots"} & set(fingerprint.imports(name))
    source = fingerprint.module_path(name).read_text()
    returns = [
        ast.unparse(f.returns)
        for f in ast.walk(_tree(name))
        if isinstance(f, ast.FunctionDef) and f.returns is not None and not f.name.startswith("_")
    ]
    renders = any(r in ("FigureResult", "str") for r in returns)
    assert draws or "import matplotlib" in source or renders, f"{name} neither draws nor renders"
