"""The arrows point one way: no import cycle between antiloop's modules, and a core without edges.

The graph holds every import statement of the package: at module level, inside functions and
under ``TYPE_CHECKING`` (a cycle there is still two modules that each need the other), with
relative imports resolved. A package's ``__init__`` is a node of its own; importing a submodule
does not count as importing its parent.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "antiloop"

#: The edges: storage, people, the service, the frameworks, the agent hooks, the embedders.
EDGES = ("stores", "approval", "server", "integrations", "hooks", "embed")


def modules(root: Path = SRC / PACKAGE) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


#: The pure core: it reads steps and decides, and never reaches an edge. Every module of the
#: ``antiloop.core`` folder, and the config reader beside it.
CORE = (
    *(m for m in modules() if m == "antiloop.core" or m.startswith("antiloop.core.")),
    "antiloop.config",
)


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` names, its dots resolved against ``module``."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
    return ".".join([*anchor, node.module] if node.module else anchor)


def _is_type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST, typing: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in the tree; with ``typing=False``, none under TYPE_CHECKING."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        if not typing and _is_type_checking(node):
            assert isinstance(node, ast.If)
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def imports_of(
    module: str, path: Path, known: Mapping[str, Path], typing: bool = True
) -> Iterator[str]:
    """The package's modules that ``module`` imports, anywhere in its source.

    With ``typing=False``, the imports that run: those under ``TYPE_CHECKING`` left out.
    """
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in _import_nodes(tree, typing):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name
        else:
            base = _base(module, is_package, node)
            for alias in node.names:
                name = f"{base}.{alias.name}"
                if name in known:  # ``from pkg import submodule``
                    yield name
                elif base in known:
                    yield base


def import_graph(typing: bool = True) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (itself left out); see ``imports_of``."""
    known = modules()
    return {m: set(imports_of(m, p, known, typing)) - {m} for m, p in known.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def path_through(graph: Mapping[str, set[str]], component: list[str]) -> list[str]:
    """One cycle inside a component, as the chain of imports that closes it."""
    members = set(component)
    start = component[0]
    trail = [start]
    seen = {start}
    while True:
        nxt = sorted(graph[trail[-1]] & members)
        back = [n for n in nxt if n in seen]
        if back:
            return [*trail[trail.index(back[0]) :], back[0]]
        step = next(n for n in nxt if n not in seen)
        trail.append(step)
        seen.add(step)


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """Module level, in a function, under TYPE_CHECKING, relative, ``from pkg import module``."""
    pkg = tmp_path / "antiloop"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import antiloop.b\n")
    (pkg / "b.py").write_text("def f():\n    from antiloop import c\n")
    (pkg / "c.py").write_text(
        "import typing\nif typing.TYPE_CHECKING:\n    from antiloop.sub import d\n"
    )
    (pkg / "sub" / "__init__.py").write_text("from . import d\n")
    (pkg / "sub" / "d.py").write_text("from ..a import x\nfrom .e import y\n")
    (pkg / "sub" / "e.py").write_text("")
    known = modules(pkg)
    graph = {m: set(imports_of(m, p, known)) - {m} for m, p in known.items()}
    assert graph["antiloop.a"] == {"antiloop.b"}
    assert graph["antiloop.b"] == {"antiloop.c"}
    assert graph["antiloop.c"] == {"antiloop.sub.d"}
    assert graph["antiloop.sub"] == {"antiloop.sub.d"}
    assert graph["antiloop.sub.d"] == {"antiloop.a", "antiloop.sub.e"}
    assert cycles(graph) == [["antiloop.a", "antiloop.b", "antiloop.c", "antiloop.sub.d"]]
    running = {m: set(imports_of(m, p, known, typing=False)) - {m} for m, p in known.items()}
    assert running["antiloop.c"] == set()  # only under TYPE_CHECKING
    assert running["antiloop.b"] == {"antiloop.c"}
    assert cycles(running) == []
    assert path_through(graph, cycles(graph)[0]) == [
        "antiloop.a",
        "antiloop.b",
        "antiloop.c",
        "antiloop.sub.d",
        "antiloop.a",
    ]


def test_no_import_cycle() -> None:
    """No two of antiloop's modules need each other, however indirectly."""
    graph = import_graph()
    assert len(graph) > 100  # the package itself was read, not an empty folder
    found = [f"{{{', '.join(c)}}}: {' -> '.join(path_through(graph, c))}" for c in cycles(graph)]
    assert not found, "import cycles:\n" + "\n".join(found)


def _loaded_by(module: str) -> list[str]:
    """The antiloop modules ``import module`` loads, in a fresh interpreter."""
    code = (
        "import json, sys\n"
        f"import {module}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('antiloop'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def _edges_in(loaded: list[str], edges: tuple[str, ...] = EDGES) -> list[str]:
    wanted = tuple(f"{PACKAGE}.{e}" for e in edges)
    return [m for m in loaded if m in wanted or m.startswith(tuple(w + "." for w in wanted))]


def test_the_core_is_its_folder() -> None:
    """The core's boundary is read from the tree: every room of ``antiloop.core`` is in it."""
    rooms = {m.rsplit(".", 1)[0] for m in CORE if m.count(".") == 3}
    assert rooms == {f"antiloop.core.{r}" for r in ("rules", "shell", "text", "extra")}
    assert {"antiloop.core.step", "antiloop.core.decide", "antiloop.core.verdict"} <= set(CORE)


def _in_core(module: str) -> bool:
    return module == "antiloop.core" or module.startswith("antiloop.core.")


def test_the_core_imports_nothing_outside_its_folder() -> None:
    """Every import of every module under ``antiloop/core/``, under ``TYPE_CHECKING`` too, names
    the standard library or ``antiloop.core``: the boundary is the folder. (A third-party
    accelerator is allowed only where its ``ImportError`` falls back to the standard library.)
    """
    known = modules()
    outside: dict[str, list[str]] = {}
    for module, path in known.items():
        if not _in_core(module):
            continue
        ours = [m for m in imports_of(module, path, known) if not _in_core(m)]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        optional = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.Try)
            and any(ast.unparse(h.type or ast.Name("")) == "ImportError" for h in node.handlers)
            for stmt in node.body
            for inner in ast.walk(stmt)
        }
        for node in _import_nodes(tree, typing=True):
            if id(node) in optional:
                continue
            if isinstance(node, ast.ImportFrom) and node.level:
                continue  # relative: resolved by imports_of above
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for name in filter(None, names):
                top = name.partition(".")[0]
                stdlib = top in sys.stdlib_module_names
                if not stdlib and not _in_core(name) and (top != PACKAGE or name not in known):
                    ours.append(name)
        if ours:
            outside[module] = sorted(set(ours))
    assert sum(map(_in_core, known)) > 30  # the folder itself was read
    assert outside == {}


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_no_edge(module: str) -> None:
    """A core module, imported alone, loads no store, approval, server, hook or embedder."""
    assert module in modules()
    assert _edges_in(_loaded_by(module)) == []


def test_the_core_imports_no_edge_anywhere() -> None:
    """Not even inside a function: no import the core runs names an edge module.

    (A type an edge defines may still be named under ``TYPE_CHECKING``: the cycle test above
    keeps those arrows one way.)
    """
    graph = import_graph(typing=False)
    reached = {m: sorted(_edges_in(sorted(graph[m]))) for m in CORE}
    assert {m: r for m, r in reached.items() if r} == {}


def test_the_guard_loads_no_approval_at_import() -> None:
    """The guard asks approvals only when it has some: importing it loads none of them."""
    loaded = _loaded_by("antiloop.guard")
    assert _edges_in(loaded, ("approval", "server", "integrations", "hooks", "embed")) == []


def _reached(graph: Mapping[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_approvals_never_reach_the_guard() -> None:
    """Not one approval module imports the guard, even for a type, even through another module:
    approvals return rulings, the guard applies them."""
    graph = import_graph()
    approval = [m for m in graph if m == "antiloop.approval" or m.startswith("antiloop.approval.")]
    assert len(approval) > 5
    reaching = {
        m for m in approval if {"antiloop.guard", "antiloop.async_guard"} & _reached(graph, m)
    }
    assert reaching == set()
