#!/usr/bin/env python3
"""The import graph of app/, mm/, rag/ and bench/: import circles, upward imports, and imports
of the engine's insides.

`python scripts/import_graph.py [ROOT]` prints what it finds and exits 1 if anything was found.
Every import counts, also those inside functions and under `if TYPE_CHECKING:`: a circle that
only type checkers follow is still a circle for a reader.

Layers, top to bottom (a module may import its own layer and those below it):
  entry points (app/__main__.py, app/server.py, app/keys_cli.py, app/cluster, bench/) ->
  routes (the `*_routes.py` modules under app/api) -> services (app/chat, app/docs, the rest of
  app/api, app/config.py, app/config_derived.py) -> storage (app/db, app/media) ->
  engine (app/engine) -> cache (app/cache) -> libraries (mm, rag).
A route module imports no other route module (routes are adapters: what two share is a service).
`rag` and `mm` never import `app`; nothing under them imports `bench` or `tests`.

Doors: the rest of app/ imports from app/engine only the modules at its root (`Engine`, its
config, requests, events, results, the tokenizer views); its subpackages (core, kv, blend,
speculation, llama) are its insides. Attribute reach into `Engine`'s parts is ruff's SLF001's
(its parts are private). bench/ and tests/ sit outside the package and may import anything.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("app", "mm", "rag", "bench")
# First-party roots an import may name without being scanned (importing them is upward).
OTHER_ROOTS = ("tests",)

# A module under app/api whose name ends so is a route module (app/api/openai/openai_routes.py).
ROUTE_SUFFIX = "_routes"
ROUTES = (7, "routes")

# (module prefix, layer, name): the longest matching prefix decides; higher layers are higher.
LAYERS: tuple[tuple[str, int, str], ...] = (
    ("tests", 9, "tests"),
    ("bench", 8, "entry point"),
    ("app.__main__", 8, "entry point"),
    ("app.server", 8, "entry point"),
    ("app.router_server", 8, "entry point"),
    ("app.keys_cli", 8, "entry point"),
    ("app.config_reference", 8, "entry point"),
    ("app.cluster", 8, "entry point"),
    ("app.api", 6, "services"),
    ("app.chat", 6, "services"),
    ("app.docs", 6, "services"),
    ("app.router", 6, "services"),
    ("app.config", 6, "services"),
    ("app.config_derived", 6, "services"),
    ("app.db", 5, "storage"),
    ("app.media", 5, "storage"),
    ("app.engine", 4, "engine"),
    ("app.cache", 3, "cache"),
    ("app", 3, "cache"),  # app/__init__.py
    ("mm", 1, "library"),
    ("rag", 1, "library"),
)


# Packages entered only through the modules at their root, from the rest of app/.
DOORS = ("app.engine",)


@dataclass(slots=True)
class Report:
    circles: list[list[str]] = field(default_factory=list)  # each sorted, with its length > 1
    upward: list[str] = field(default_factory=list)  # "importer -> imported (why)"
    inside: list[str] = field(default_factory=list)  # "importer -> a door's inside module"

    @property
    def clean(self) -> bool:
        return not self.circles and not self.upward and not self.inside


def layer_of(module: str) -> tuple[int, str]:
    if module.startswith("app.api.") and module.rpartition(".")[2].endswith(ROUTE_SUFFIX):
        return ROUTES
    best: tuple[str, int, str] | None = None
    for prefix, rank, name in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and (
            best is None or len(prefix) > len(best[0])
        ):
            best = (prefix, rank, name)
    if best is None:
        raise ValueError(f"{module} is in no layer")
    return best[1], best[2]


def modules_of(root: Path) -> dict[str, Path]:
    """Every module of the scanned packages: dotted name -> file."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    """Dotted names imported: `from a import b` gives a.b (module a.b if there is one, else a:
    see `_resolve`)."""
    package = module if is_package else module.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.extend(f"{base}.{alias.name}" for alias in node.names)
    return names


def _resolve(name: str, known: set[str]) -> str | None:
    """The first-party module `name` means (its longest known prefix), else None."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def import_graph(root: Path) -> dict[str, set[str]]:
    """importer -> first-party modules it imports (scanned ones, or roots like `tests`)."""
    files = modules_of(root)
    known = set(files) | set(OTHER_ROOTS)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        targets = set()
        for name in _imported_names(tree, module, is_package):
            target = _resolve(name, known)
            # A package's own submodules (`from app.engine import x` inside app/engine) and
            # a module's import of its parent package are not edges between modules.
            if target is not None and target != module and not module.startswith(target + "."):
                targets.add(target)
        graph[module] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def upward(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for importer in sorted(graph):
        rank, name = layer_of(importer)
        for target in sorted(graph[importer]):
            target_rank, target_name = layer_of(target)
            library_to_app = importer.split(".")[0] in ("mm", "rag") and target.startswith("app")
            route_to_route = (rank, name) == (target_rank, target_name) == ROUTES
            if target_rank > rank or library_to_app or route_to_route:
                found.append(f"{importer} ({name}) -> {target} ({target_name})")
    return found


def inside_doors(graph: dict[str, set[str]], packages: set[str]) -> list[str]:
    """Imports from the rest of app/ of a door's inside: a module of one of its subpackages
    (`packages`: the dotted names that are packages, not modules)."""
    found = []
    for importer in sorted(graph):
        if importer.split(".")[0] != "app":
            continue
        for door in DOORS:
            if importer == door or importer.startswith(door + "."):
                continue
            for target in sorted(graph[importer]):
                rest = target.removeprefix(door + ".").split(".")
                at_root = target == door or (len(rest) == 1 and target not in packages)
                if target.startswith(door + ".") and not at_root:
                    found.append(f"{importer} -> {target} (import from {door}'s root modules)")
    return found


def check(root: Path) -> Report:
    graph = import_graph(root)
    packages = {m for m, path in modules_of(root).items() if path.name == "__init__.py"}
    return Report(circles(graph), upward(graph), inside_doors(graph, packages))


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[1]
    report = check(root)
    for circle in report.circles:
        print("circle: " + " <-> ".join(circle))
    for line in report.upward:
        print("upward: " + line)
    for line in report.inside:
        print("inside a door: " + line)
    if report.clean:
        print(f"import graph of {', '.join(PACKAGES)}: no circle, nothing upward, doors kept")
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
