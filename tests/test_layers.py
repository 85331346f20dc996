"""The layers of the code base, read from the imports (ast): every arrow points down.

zoo <- runner.matrix <- {runner.measure, runner.store} <- runner.steps <- runner.backends
<- runner.cell <- runner.triage <- runner.schedule <- {runner.plan, runner.env, runner.report}
<- runner.cluster <- runner.session <- runner.cli; the dashboard imports only the torch-free
vocabulary
(runner.matrix, runner.store.schema, runner.backends.registry and what they import).
CONTRIBUTING.md says where a new module goes.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("zoo", "runner", "dashboard")

# Rank of each layer: a module may import modules of its own or a lower rank; two
# layers of one rank may not import each other.
RANKS = {
    "zoo": 0,
    "runner": 0,  # the package itself: empty
    "runner.matrix": 1,
    "runner.measure": 2,
    "runner.store": 2,
    "runner.steps": 3,
    "runner.backends": 4,
    "runner.cell": 5,
    "runner.triage": 6,
    "runner.schedule": 7,
    "runner.plan": 8,
    "runner.env": 8,
    "runner.report": 8,
    "runner.cluster": 9,
    "runner.session": 10,
    "runner.cli": 11,
    "dashboard": 12,
}
# What the dashboard may import of the runner: what browsing results needs, no torch.
DASHBOARD_RUNNER = (
    "runner.matrix",
    "runner.store.schema",
    "runner.backends.registry",
    "runner.steps.registry",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }


def imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """Every project module ``path`` imports, at the top or inside functions.
    ``from package import module`` imports that module (the package is already being
    imported by then); ``from module import name`` imports the module."""
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    return {item for item in found if item in modules}


def layer(name: str) -> str:
    for prefix in sorted(RANKS, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return prefix
    raise AssertionError(f"{name} belongs to no layer: add it to RANKS (and CONTRIBUTING.md)")


def edges() -> list[tuple[str, str]]:
    """(importer, imported) for every import of one project module by another."""
    modules = project_modules()
    return [
        (name, target)
        for name, path in modules.items()
        for target in sorted(imports(path, name, set(modules)))
        if target in modules and target != name
    ]


def wrong_arrows(found: list[tuple[str, str]]) -> list[str]:
    """The imports that point up the layers, or across two layers of one rank."""
    wrong = []
    for source, target in found:
        source_layer, target_layer = layer(source), layer(target)
        if source_layer != target_layer and RANKS[target_layer] >= RANKS[source_layer]:
            wrong.append(f"{source} -> {target}")
    return wrong


def cycle(found: list[tuple[str, str]]) -> list[str] | None:
    """An import cycle among ``found``, as the modules along it, or None."""
    graph: dict[str, set[str]] = {}
    for source, target in found:
        graph.setdefault(source, set()).add(target)
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for child in sorted(graph.get(node, ())):
            if (found_cycle := visit(child)) is not None:
                return found_cycle
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        if (found_cycle := visit(node)) is not None:
            return found_cycle
    return None


def test_every_module_has_a_layer():
    for name in project_modules():
        layer(name)


def test_every_import_points_down_the_layers():
    assert wrong_arrows(edges()) == []


def test_no_import_cycles():
    assert cycle(edges()) is None


def test_the_dashboard_imports_only_the_torch_free_vocabulary():
    found = edges()
    wrong = [
        f"{source} -> {target}"
        for source, target in found
        if layer(source) == "dashboard"
        and target.startswith("runner")
        and not target.startswith(DASHBOARD_RUNNER)
    ]
    assert wrong == []
    # ... and that vocabulary imports nothing more of the runner than itself, the step
    # names and the package roots.
    allowed = (*DASHBOARD_RUNNER, "runner.steps.registry")
    leaks = [
        f"{source} -> {target}"
        for source, target in found
        if source.startswith(DASHBOARD_RUNNER)
        and target.startswith("runner.")
        and not target.startswith(allowed)
        and target not in ("runner.steps", "runner.backends", "runner.store")
    ]
    assert leaks == []


def test_the_checks_see_a_wrong_arrow_and_a_cycle():
    """The checks themselves can fail: an arrow up, one across a rank, and a cycle."""
    assert wrong_arrows([("runner.measure.timing", "runner.schedule.executor")]) == [
        "runner.measure.timing -> runner.schedule.executor"
    ]
    assert wrong_arrows([("runner.measure.timing", "runner.store.db")]) != []
    assert wrong_arrows([("runner.cell", "runner.measure.timing")]) == []
    assert cycle([("runner.a", "runner.b"), ("runner.b", "runner.a")]) == [
        "runner.a",
        "runner.b",
        "runner.a",
    ]
