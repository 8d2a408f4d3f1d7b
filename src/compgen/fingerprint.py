"""The code fingerprint of a section: a hash of the library modules its numbers can depend on.

Those modules are the **import closure** of the module that defines the section (:func:`closure`): every library
module it imports, at the top or inside a function, and every module they import in turn. The engine
(:mod:`compgen.runner`, :mod:`compgen.dispatch` and :mod:`compgen.backends`), the results store, logging and the
figures sit outside that closure, so editing them keeps every stored run valid; a test traces a training step and
checks that every library file it executes is inside.

Each module enters as its syntax tree without docstrings and without its top-level ``PRESETS`` assignment
(:func:`code_text`), written out the same way by every Python version, so prose, comments and preset tables can
change without invalidating stored runs, while any change to code does. Everything is computed once per process.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).parent
UNFINGERPRINTED = ("PRESETS",)  # top-level names whose assignment is data, not code (see module docstring)


def module_path(name: str) -> Path:
    """The source file of the library module ``name`` (``compgen.x.y``)."""
    parts = name.split(".")[1:]
    folder = PACKAGE.joinpath(*parts)
    return folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")


@functools.cache
def library_modules() -> frozenset:
    """The names of every module of the library."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return frozenset(names)


@functools.cache
def imports(name: str) -> frozenset:
    """The library modules that module ``name`` imports, anywhere in its file (``from compgen import x`` names
    module ``compgen.x`` when there is one, else the package)."""
    modules, found = library_modules(), set()
    for node in ast.walk(ast.parse(module_path(name).read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("compgen"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("compgen"):
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                found.add(target if target in modules else node.module)
    return frozenset(m for m in found if m != name)


@functools.cache
def closure(name: str) -> tuple:
    """``name`` and every library module it imports, directly or not, sorted (an import of ``compgen.a.b`` also
    runs the packages ``compgen`` and ``compgen.a``)."""
    modules, seen, todo = library_modules(), set(), [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in modules:
            continue
        seen.add(current)
        todo.extend(imports(current))
        todo.extend(".".join(current.split(".")[:i]) for i in range(1, current.count(".") + 1))
    return tuple(sorted(seen))


def _strip(tree: ast.Module) -> ast.Module:
    """The syntax tree without docstrings and without top-level assignments to :data:`UNFINGERPRINTED` names."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    tree.body = [
        node
        for node in tree.body
        if not (
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(
                isinstance(t, ast.Name) and t.id in UNFINGERPRINTED
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        )
    ]
    return tree


def _dump(node) -> str:
    """A syntax tree as text: each node's type and its fields that hold something (``None`` and empty lists left
    out, so a field that a newer Python adds empty, like ``type_params``, changes nothing)."""
    if isinstance(node, ast.AST):
        fields = [f"{k}={_dump(v)}" for k, v in ast.iter_fields(node) if v is not None and v != []]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(map(_dump, node))}]"
    return repr(node)


def source_code_text(source: str) -> str:
    """The code of Python ``source`` as it enters a fingerprint: its syntax tree without docstrings and ``PRESETS``
    (:func:`_strip`), written by :func:`_dump` (see module docstring)."""
    return _dump(_strip(ast.parse(source)))


@functools.cache
def code_text(name: str) -> str:
    """Library module ``name``'s code as it enters a fingerprint (:func:`source_code_text`)."""
    return source_code_text(module_path(name).read_text())


@functools.cache
def of_modules(names: tuple) -> str:
    """A 12-hex-digit hash of the code of the library modules ``names``."""
    digest = hashlib.sha256()
    for name in sorted(set(names)):
        digest.update(name.encode())
        digest.update(code_text(name).encode())
    return digest.hexdigest()[:12]


def of_section(module: str) -> str:
    """The fingerprint of the section defined in library module ``module``: the hash of its :func:`closure`."""
    return of_modules(closure(module))


def joined(base: str, code: str) -> str:
    """A fingerprint ``base`` joined by more ``code`` (a user's learner): a 12-hex-digit hash of both."""
    return hashlib.sha256(f"{base}\n{code}".encode()).hexdigest()[:12]
