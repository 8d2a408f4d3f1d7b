"""The library's functions stay small: at most 8 parameters, none excepted, and at most 60 lines unless the docstring
says why."""

import ast

import pytest

from compgen import fingerprint

MAX_PARAMETERS, MAX_LINES = 8, 60
LONG_REASON = "Kept in one function"  # how a docstring starts the reason a function is longer than MAX_LINES


def _functions():
    """``(module:function, node)`` for every function of every library module (:func:`fingerprint.library_modules`)."""
    for module in sorted(fingerprint.library_modules()):
        for node in ast.walk(ast.parse(fingerprint.module_path(module).read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{module}:{node.name}", node


def _parameters(node) -> int:
    """Every parameter a caller can pass, ``*args`` and ``**kwargs`` one each; ``self``/``cls`` not counted."""
    a = node.args
    named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    own = 1 if named and named[0].arg in ("self", "cls") else 0
    return len(named) - own + (a.vararg is not None) + (a.kwarg is not None)


FUNCTIONS = list(_functions())


def test_the_functions_are_found():
    names = {name for name, _ in FUNCTIONS}
    assert len(FUNCTIONS) > 500 and "compgen.runner:run_steps" in names


def test_no_function_takes_more_than_eight_parameters():
    over = sorted(name for name, node in FUNCTIONS if _parameters(node) > MAX_PARAMETERS)
    assert not over, f"over {MAX_PARAMETERS} parameters: {over}"


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
