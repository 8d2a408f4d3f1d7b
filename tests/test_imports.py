"""The library's modules form layers: a module imports only from its own layer or the ones below, and no group of
modules imports itself in a cycle (imports inside functions count too)."""

from compgen import fingerprint

# Lowest first. A module's layer is the one whose prefix matches its name most closely.
LAYERS = [
    (
        "compgen",
        "compgen.params",
        "compgen.fingerprint",
        "compgen.legacy",
        "compgen.recordfile",
        "compgen.records",
        "compgen.steptimes",
        "compgen.booktime",
        "compgen.precision",
        "compgen.rng",
        "compgen.initializers",
        "compgen.storage",
        "compgen.memory",
        "compgen.devices",
        "compgen.allocator",
        "compgen.cores",
        "compgen.timing",
    ),
    ("compgen.tasks", "compgen.models"),
    ("compgen.meta", "compgen.metrics"),
    ("compgen.results", "compgen.checkpoint", "compgen.programs"),
    ("compgen.section", "compgen.runs"),
    ("compgen.experiments", "compgen.catalog", "compgen.bridge"),
    ("compgen.runner",),
    ("compgen.backends",),
    ("compgen.dispatch", "compgen.notebook", "compgen.ledger"),
    ("compgen.analysis",),
    ("compgen.figures",),
    ("compgen.sweeps", "compgen.cli", "compgen.bench", "compgen.__main__"),
]


MODULES = {name: fingerprint.module_path(name) for name in fingerprint.library_modules()}


def layer(name: str) -> int:
    matches = [
        (len(p), index)
        for index, prefixes in enumerate(LAYERS)
        for p in prefixes
        if name == p or (p != "compgen" and name.startswith(p + "."))
    ]
    assert matches, f"{name} is in no layer of tests/test_imports.py"
    return max(matches)[1]


imports = fingerprint.imports  # the library modules a module imports, anywhere in its file


def test_every_module_is_in_a_layer():
    for name in MODULES:
        layer(name)


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [(name, target) for name in MODULES for target in imports(name) if layer(target) > layer(name)]
    assert upward == [], f"upward imports: {upward}"


def test_no_import_cycles():
    graph = {name: imports(name) & set(MODULES) for name in MODULES}
    state, cycles = {}, []

    def visit(node, path):
        state[node] = "active"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "active":
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == [], f"import cycles: {cycles}"


def test_every_imported_library_module_exists():
    missing = [(name, target) for name in MODULES for target in imports(name) if target not in MODULES]
    assert missing == [], f"imports of modules that do not exist: {missing}"
