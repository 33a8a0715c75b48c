"""The house: no import circles in src/accord, no module over 400 lines, no function over 50 lines or
complexity 20 (measured as tests/shape.py says), and at most 3 ``type: ignore`` comments.

The imports are read from the source with `ast`, nothing is imported. An edge `a -> b` is an
import of `accord` module `b` by module `a`:

- at module level, and in the bodies of functions and methods alike (a function-local import
  is still a dependency; hiding a circle inside a function does not break it);
- except under `if TYPE_CHECKING:`, which never runs (annotations only);
- `from .pkg import name` counts as an import of `pkg.name` when that is a module, else of
  `pkg` (the package's `__init__`).

A package is its `__init__`: `from ..ledger import Ledger` is an edge to `accord.ledger`, whose
`__init__` has edges to the modules it re-exports. That importing `accord.x.y` first runs
`accord/__init__.py` is left out: the top re-exports everything, and Python runs it first.
"""

from __future__ import annotations

import ast
from pathlib import Path

from shape import complexity, over_bounds

SRC = Path(__file__).resolve().parent.parent / "src"
ROOT = SRC / "accord"
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: all but those under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _targets(name: str, path: Path, node: ast.Import | ast.ImportFrom) -> set[str]:
    is_package = path.name == "__init__.py"
    if isinstance(node, ast.Import):
        bases = [alias.name for alias in node.names]
        return {b for b in bases if b in MODULES}
    if node.level:
        package = name.split(".") if is_package else name.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *(node.module.split(".") if node.module else [])])
    else:
        base = node.module or ""
    found: set[str] = set()
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in MODULES:
            found.add(sub)
        elif base in MODULES:
            found.add(base)
    return found


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        out: set[str] = set()
        for node in _imports(tree):
            out |= _targets(name, path, node)
        out.discard(name)
        edges[name] = out
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
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

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def _describe(component: list[str], edges: dict[str, set[str]]) -> str:
    inside = set(component)
    lines = [f"{a} -> {b}" for a in component for b in sorted(edges[a] & inside)]
    return "circle of " + ", ".join(component) + ":\n  " + "\n  ".join(lines)


def test_the_graph_sees_the_imports() -> None:
    # The reader is not blind: known edges of each kind are in the graph.
    edges = graph()
    assert "accord._errors" in edges["accord._check"]  # from ._errors import ...
    assert "accord.run._calls" in edges["accord.run._loop"]  # from ._calls import ...
    assert "accord._check" in edges["accord.vote._vote"]  # from .. import _check
    assert "accord.observe._hooks" in edges["accord.run._watch"]  # from ..observe import _hooks
    assert "accord.ledger._postgres" in edges["accord.ledger._open"]  # inside open_store (lazy: psycopg)
    assert "accord" in edges["accord.serve._app"]  # from .. import BackendError: the package's __init__
    assert "accord._result" not in edges["accord._errors"]  # under TYPE_CHECKING only


def test_no_import_circles() -> None:
    edges = graph()
    found = circles(edges)
    assert not found, "\n".join(_describe(c, edges) for c in found)


def test_circles_are_found() -> None:
    # The finder itself: a circle drawn by hand is reported, a chain is not.
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_over_400_lines() -> None:
    sizes = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in MODULES.values()}
    over = [f"{p.relative_to(SRC)}: {n} lines" for p, n in sorted(sizes.items()) if n > MAX_LINES]
    assert not over, "modules over 400 lines:\n  " + "\n  ".join(over)


MAX_TYPE_IGNORES = 3


def test_no_function_over_50_lines_or_complexity_20() -> None:
    over = over_bounds(ROOT)
    assert not over, "functions over the bounds (tests/shape.py):\n  " + "\n  ".join(over)


def test_the_bounds_are_measured() -> None:
    # The measure itself: a long, branchy function drawn by hand is reported, a nested one apart.
    body = "\n".join(f"    if x == {i} or x == -{i}:\n        return {i}" for i in range(12))
    tree = ast.parse(f"def f(x):\n{body}\n    def inner(y):\n        return y if y else 0\n    return inner")
    outer, inner = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    assert complexity(outer) == 1 + 12 * 2 and complexity(inner) == 2


def test_type_ignores_are_few() -> None:
    found = [f"{p.relative_to(SRC)}:{i}" for p in MODULES.values()
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "type: ignore" in line]
    assert len(found) <= MAX_TYPE_IGNORES, f"{len(found)} type: ignore in src/accord (at most {MAX_TYPE_IGNORES}):\n  " + "\n  ".join(found)
