"""The library's functions stay small: at most 8 parameters, at most 60 lines unless the docstring says why.

The functions allowed more parameters are named here with the reason; the list cannot go stale (each must still exist
and still need its exception)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "compgen"
MAX_PARAMETERS, MAX_LINES = 8, 60
LONG_REASON = "Kept in one function"  # how a docstring starts the reason a function is longer than MAX_LINES

_TRAINED = "in the training fingerprint: a new signature retrains every stored run and stales every committed record"
MORE_PARAMETERS = {
    "meta.py:adapt": _TRAINED,
    "meta.py:outer_step": _TRAINED,
    "meta.py:fewshot_loss": _TRAINED,
    "experiments/fewshot.py:solve_task": _TRAINED,
    "experiments/fewshot.py:make_section": _TRAINED,
    "tasks/teacher_kernel.py:_kernel": _TRAINED,
    "tasks/teacher_kernel.py:infer_latent": _TRAINED,
    "runner.py:run_steps": "in the step-time records' fingerprint (its docstring)",
    "analysis/compare.py:compare": "the chapter's and README's call: the learner's own fields as keyword overrides",
}


def _functions():
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{path.relative_to(SRC).as_posix()}:{node.name}", node


def _parameters(node) -> int:
    """Every parameter a caller can pass, ``*args`` and ``**kwargs`` one each; ``self``/``cls`` not counted."""
    a = node.args
    named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    own = 1 if named and named[0].arg in ("self", "cls") else 0
    return len(named) - own + (a.vararg is not None) + (a.kwarg is not None)


FUNCTIONS = list(_functions())


def test_the_functions_are_found():
    names = {name for name, _ in FUNCTIONS}
    assert len(FUNCTIONS) > 500 and "runner.py:run_steps" in names


def test_no_function_takes_more_than_eight_parameters_but_those_named_with_their_reason():
    over = {name for name, node in FUNCTIONS if _parameters(node) > MAX_PARAMETERS}
    allowed = set(MORE_PARAMETERS)
    assert over <= allowed, f"over {MAX_PARAMETERS} parameters: {sorted(over - allowed)}"
    assert allowed <= over, f"no longer over {MAX_PARAMETERS}, take off MORE_PARAMETERS: {sorted(allowed - over)}"


def test_a_function_longer_than_sixty_lines_says_why_in_its_docstring():
    unexplained = [
        f"{name} ({node.end_lineno - node.lineno + 1} lines)"
        for name, node in FUNCTIONS
        if node.end_lineno - node.lineno + 1 > MAX_LINES and LONG_REASON not in (ast.get_docstring(node) or "")
    ]
    assert not unexplained, f"over {MAX_LINES} lines without '{LONG_REASON}: ...' in the docstring: {unexplained}"


@pytest.mark.parametrize(
    "source, parameters",
    [("def f(a, b, *c, d, **e): pass", 5), ("class A:\n def m(self, a): pass", 1), ("def f(*, a): pass", 1)],
)
def test_parameters_count_what_a_caller_can_pass(source, parameters):
    node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef))
    assert _parameters(node) == parameters
