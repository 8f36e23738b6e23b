"""The layering of the packages (README, "Layout"; docs/extending.md): each layer imports only the
layers below it, and no module takes part in an import cycle, at module level, inside functions (a
function-level import is still a dependency) or for type checking only (``if TYPE_CHECKING:``: a
type a module names is a dependency too). Read from the source with ``ast``; nothing is imported.

Inside ``bench/`` the same holds for its packages: cli > studies > run | boards | perf > the
modules of bench/'s root (records, arguments, compose ...), which all may import; run, boards and
perf never import each other, and nothing imports ``bench.cli``."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: top layer first; a module may import its own layer's package and every layer below it
LAYERS = (
    ("bench",),
    ("lit_models.families",),
    ("lit_models.core",),
    ("lit_models.interop", "lit_models.measure"),
    ("retrieval",),
    ("lit_models.objectives",),
    ("lit_models.archs",),
    ("lit_models.metrics", "lit_models.nets"),
    ("datamodules",),
)
PACKAGES = ("bench", "lit_models", "datamodules", "retrieval")
#: bench/'s packages, top first, as LAYERS; a module of bench/'s root (not cli) is in the last
BENCH_LAYERS = (
    ("bench.cli",),
    ("bench.studies",),
    ("bench.run", "bench.boards", "bench.perf"),
    ("bench",),
)


def modules() -> dict[str, Path]:
    found = {}
    for path in REPO.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[0] in PACKAGES:
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # ``from package import module`` imports the module, not the package's own code
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                     for alias in node.names]
        else:
            continue
        for target in names:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return targets


def layer(name: str) -> int:
    for i, packages in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in packages):
            return i
    raise AssertionError(f"{name} belongs to no layer: add its package to LAYERS and the README")


def own_package(name: str) -> str:
    return next(p for packages in LAYERS for p in packages
                if name == p or name.startswith(p + "."))


def bench_package(name: str) -> str:
    """The package of bench/ a module of bench/ belongs to ("bench": bench/'s root)."""
    return next((p for packages in BENCH_LAYERS[:-1] for p in packages
                 if name == p or name.startswith(p + ".")), "bench")


def bench_layer(name: str) -> int:
    return next(i for i, packages in enumerate(BENCH_LAYERS) if bench_package(name) in packages)


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def test_every_import_runs_downward():
    upward = []
    for name, targets in graph().items():
        for target in targets:
            # a package's __init__ is part of its layer ("lit_models" itself is empty)
            if target == "lit_models":
                continue
            same_package = own_package(target) == own_package(name)
            if layer(target) < layer(name) or (layer(target) == layer(name) and not same_package):
                upward.append(f"{name} -> {target}")
    assert not upward, "imports that run upward or sideways: " + ", ".join(sorted(upward))


def test_bench_packages_import_downward():
    upward = []
    for name, targets in graph().items():
        if not name.startswith("bench"):
            continue
        for target in targets:
            if not target.startswith("bench") or bench_package(target) == bench_package(name):
                continue
            if bench_layer(target) <= bench_layer(name):
                upward.append(f"{name} -> {target}")
    assert not upward, "bench/ imports that run upward or sideways: " + ", ".join(sorted(upward))


def test_no_import_cycles():
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_layers_cover_every_module():
    for name in modules():
        if name != "lit_models":  # the namespace of four layers holds no code
            layer(name)
