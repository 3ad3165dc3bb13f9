"""The shape of harness/: its packages in layers, each importing only those below it, no
module importing one that imports it back, and no module or function past its size.

Every import counts, at the top of a module, inside a function or under TYPE_CHECKING: a
lower layer that needs a higher one at all is the design going wrong, wherever it hides."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"

# Lowest first: a package may import its own modules and those of the packages before it.
# docs/architecture.md says what each holds and why it sits where it does.
LAYERS = (
    "base",
    "gate",
    "spec",
    "repository",
    "boundary",
    "workers",
    "record",
    "checks",
    "step",
    "readers",
    "importers",
    "cli",
)
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(HARNESS.rglob("*.py")):
        parts = path.relative_to(HARNESS.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The harness modules `name` imports, wherever in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        found |= {t for t in targets if t in known and t != name}
    return found


def layer(name: str) -> int | None:
    """The layer of a module of a layered package; None for the top package itself."""
    parts = name.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 else None


GRAPH = {name: imported(name, path, set(modules())) for name, path in modules().items()}


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in HARNESS.iterdir() if (p / "__init__.py").exists()}
    assert packages - {"__pycache__"} == set(LAYERS)
    loose = sorted(p.name for p in HARNESS.glob("*.py") if p.name != "__init__.py")
    assert loose == [], "every module belongs to a package"


def test_no_package_imports_a_higher_one() -> None:
    upward = [
        f"{name} -> {dep}"
        for name, deps in sorted(GRAPH.items())
        for dep in sorted(deps)
        if layer(name) is not None and (layer(dep) or 0) > (layer(name) or 0)
    ]
    assert upward == []


def test_no_import_circles() -> None:
    """Tarjan's strongly connected components: any with two modules is a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert circles == []


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_and_functions_stay_small(name: str) -> None:
    path = modules()[name]
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{path.name} is over {MAX_MODULE_LINES}"
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            # A longer function says why on the line before it: "# long: <reason>".
            reason = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            if node.decorator_list:
                first = node.decorator_list[0].lineno
                reason = lines[first - 2].strip() if first > 1 else ""
            assert size <= MAX_FUNCTION_LINES or reason.startswith("# long:"), (
                f"{path.name}: {node.name} is {size} lines"
            )
