"""The layering, read from the source: the core imports no backend and no host, backends import only the core's
storage contract, and no module of ours is part of an import circle (imports under `TYPE_CHECKING` excepted: they
never run)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("identity_proto", "backends", "identity_hosting", "identity_testing")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {_module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}
    found["asgi_app"] = ROOT / "asgi_app.py"
    return found


def _runtime_imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Our modules that `path` imports when it runs (at module level or in a function)."""
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    imported: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            imported.add(base)
            imported.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in imported if module in known and module != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _runtime_imports(path, name, known) for name, path in modules.items()}


def test_no_module_of_ours_is_part_of_an_import_circle() -> None:
    graph = _graph()
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    # A package importing its own submodules (its curated face) is not a circle unless a submodule imports it back.
    assert circles == [], "\n".join(" -> ".join(circle) for circle in circles)


def test_the_core_imports_no_backend_and_no_host() -> None:
    graph = _graph()
    for module, targets in graph.items():
        if module.startswith("identity_proto"):
            outside = sorted(t for t in targets if not t.startswith("identity_proto"))
            assert outside == [], (module, outside)


def test_backends_import_only_the_cores_storage_contract() -> None:
    # The contract: effects, records and change sets, the store protocols, and StorageUnavailable, the one error a
    # store raises.
    allowed = (
        "backends",
        "identity_proto.effects",
        "identity_proto.records",
        "identity_proto.drivers",
        "identity_proto.changes",
        "identity_proto.errors",
    )
    for module, targets in _graph().items():
        if module.startswith("backends"):
            outside = sorted(t for t in targets if not t.startswith(allowed))
            assert outside == [], (module, outside)
