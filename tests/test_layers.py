"""The package layers: no package imports one above it, there is no import cycle between
packages, and the search imports no backend, interpreter, measurement or MLX.

The import graph is read from the source's own ``import`` statements, those inside functions
included. ``python tests/test_layers.py`` prints it, one package per line.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folders installed under another name (pyproject's package-dir).
FOLDERS = {"kir": "kir", "backends": "kir.backends", "frontends": "kir.frontends",
           "rewrites": "kir.rewrites", "grammar": "kir.grammar"}
# Lowest first; a package may import packages of its own layer's predecessors only.
LAYERS = [
    ("kir.errors", "kir.version", "kir.target"),
    ("kir.limits",),
    ("kir.ir",),
    ("kir.analysis",),
    ("kir.spec",),
    ("kir.interp",),
    ("kir.rules",),
    ("kir.rewrites",),
    ("kir.cost",),
    ("kir.search",),
    ("kir.frontends", "kir.grammar"),
    ("kir.backends",),
    ("kir.emulate",),
    ("kir.driver",),
    ("kir.measure",),
    ("kir.report",),
    ("kir.api",),
    ("kir.cluster",),
    ("kir.commands", "kir"),
]
LEVEL = {package: level for level, names in enumerate(LAYERS) for package in names}


def modules() -> dict[str, Path]:
    """Every module by its installed name."""
    found = {}
    for folder, name in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([name, *parts])] = path
    return found


def package_of(module: str) -> str:
    """The layer package a module belongs to: ``kir.ir.nodes`` → ``kir.ir``."""
    parts = module.split(".")
    candidate = ".".join(parts[:2])
    return candidate if candidate in LEVEL else module


def import_graph() -> dict[str, set[str]]:
    """Package → the packages its modules import (top-level and deferred imports alike)."""
    mods = modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods
                           else node.module for a in node.names]
            else:
                continue
            for target in targets:
                found = resolve(target) if target.startswith("kir") else None
                if found and package_of(found) != package_of(name):
                    edges[package_of(name)].add(package_of(found))
    return edges


def test_every_package_has_a_layer():
    unknown = {package_of(m) for m in modules()} - set(LEVEL)
    assert not unknown, f"packages without a layer in LAYERS: {sorted(unknown)}"


def test_no_package_imports_a_layer_above_it():
    upward = [f"{source} imports {target}" for source, targets in import_graph().items()
              for target in targets if LEVEL[target] >= LEVEL[source]
              and not (LEVEL[target] == LEVEL[source] and source == "kir")]
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


def test_no_import_cycle_between_packages():
    graph = import_graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            raise AssertionError("import cycle: " + " -> ".join(cycle))


def test_search_imports_no_backend_interpreter_measurement_or_mlx():
    """Every kir.search module imports with those packages blocked (a blocked module in
    sys.modules makes any import of it fail), in a fresh interpreter."""
    search_modules = sorted(m for m in modules() if m.startswith("kir.search"))
    blocked = ["kir.backends", "kir.interp", "kir.measure", "mlx", "mlx.core"]
    script = ("import sys, importlib\n"
              f"for name in {blocked!r}: sys.modules[name] = None\n"
              f"for name in {search_modules!r}: importlib.import_module(name)\n"
              "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


if __name__ == "__main__":
    graph = import_graph()
    for package in sorted(LEVEL, key=LEVEL.get):
        print(f"{LEVEL[package]:2d} {package} -> {', '.join(sorted(graph.get(package, ()))) or '-'}")
