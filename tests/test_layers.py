"""The package's layers hold: read from its imports (ast), not from a picture that can go stale.

formats → retrieval → evaluation → tracking / reporting → experiment / labelling → commands: a
module imports only its own subpackage and the layers below it, two subpackages of one layer do not
import each other, and no modules import one another in a circle. The shared basics (`errors`,
`settings`, `text`, `progress`) sit under everything; the commands (`python -m sweep.best`, ...)
and the package's public face (`sweep/__init__.py`) over everything. Imports under `if
TYPE_CHECKING:` count: a type named across layers is a dependency all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"
BASICS = {"errors", "settings", "text", "progress"}
LAYERS = {
    "formats": 1,
    "retrieval": 2,
    "evaluation": 3,
    "tracking": 4,
    "reporting": 4,
    "experiment": 5,
    "labelling": 5,
}
COMMANDS = 6


def modules() -> dict[str, Path]:
    found = {}
    for path in SOURCE.rglob("*.py"):
        parts = list(path.relative_to(SOURCE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that module `name` imports (`from a import b` is a.b when that is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {module for module in found if module in known and module != name}


def layer(module: str) -> tuple[str, int]:
    """The module's part of the package and that part's rank."""
    parts = module.split(".")
    if parts[0] != "sweep":
        return parts[0], COMMANDS
    if len(parts) == 1:
        return "sweep", COMMANDS + 1  # the public face re-exports from every layer
    if parts[1] in BASICS:
        return "basics", 0
    if parts[1] in LAYERS:
        return parts[1], LAYERS[parts[1]]
    return "commands", COMMANDS


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def test_no_module_imports_a_higher_layer_or_a_neighbour_of_its_own_layer():
    wrong = []
    for module, imported in graph().items():
        part, rank = layer(module)
        for target in imported:
            target_part, target_rank = layer(target)
            if target_rank > rank or (target_rank == rank and target_part != part and rank != COMMANDS):
                wrong.append(f"{module} ({part}) imports {target} ({target_part})")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_modules_import_one_another_in_a_circle():
    edges = graph()
    circles = []
    # Tarjan's strongly connected components: any with two or more modules is a circle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in edges:
        if module not in index:
            visit(module)
    assert not circles, circles


# commands whose name a library module had first: `python -m sweep.golden` (a golden set's diff and
# drift) is what users type; `sweep.formats.golden` (reading and writing it) is public API
NAMED_ON_THE_COMMAND_LINE = {"sweep.golden"}


def test_module_names_are_unique_across_the_package():
    """One name, one module: `best` or `store` twice is a guess for the reader, commands aside
    (`python -m sweep.pool` is a command's name; the library's module of it is named otherwise)."""
    seen: dict[str, list[str]] = {}
    for module in modules():
        last = module.rpartition(".")[2]
        if "." in module and last not in ("__main__",) and module not in NAMED_ON_THE_COMMAND_LINE:
            seen.setdefault(last, []).append(module)
    repeated = {name: sorted(found) for name, found in seen.items() if len(found) > 1}
    assert not repeated, repeated


def test_the_checks_see_a_circle_and_an_upward_import(tmp_path):
    """The tests above would pass on a package they cannot read: made to fail on one they can."""
    (tmp_path / "a.py").write_text("from sweep.formats import b\nimport sweep.experiment.trial\n")
    found = imports("sweep.formats.a", tmp_path / "a.py", {"sweep.formats.b", "sweep.experiment.trial"})
    assert found == {"sweep.formats.b", "sweep.experiment.trial"}
    assert layer("sweep.formats.a")[1] < layer("sweep.experiment.trial")[1]
