"""How long and how branched each function of src/accord is, read with `ast` (nothing imported).

- Lines: from ``def`` to the function's last line, docstring included, decorators not.
- Complexity: 1, plus one for each ``if``/``elif``, conditional expression, ``for``/``async for``,
  ``while``, ``except`` handler, ``assert``, comprehension clause, ``case``, and each extra operand
  of ``and``/``or``. A nested function, lambda or class is measured on its own and adds nothing
  to the function it sits in (radon's cyclomatic complexity, with boolean operands counted).

``python tests/shape.py`` lists the functions over the bounds (tests/test_imports.py holds them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "accord"
MAX_FUNCTION_LINES = 50
MAX_COMPLEXITY = 20
_BRANCHES = (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.Assert, ast.comprehension, ast.match_case)
_OWN_SCOPE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    count = 1
    pending: list[ast.AST] = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, _OWN_SCOPE):
            continue
        if isinstance(node, _BRANCHES):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        pending.extend(ast.iter_child_nodes(node))
    return count


def functions(root: Path = ROOT) -> Iterator[tuple[str, int, int]]:
    """``(path:line name, lines, complexity)`` for every function and method under ``root``."""
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                yield f"{path.relative_to(root.parent)}:{node.lineno} {node.name}", lines, complexity(node)


def over_bounds(root: Path = ROOT) -> list[str]:
    return [
        f"{where}: {lines} lines, complexity {branches}"
        for where, lines, branches in functions(root)
        if lines > MAX_FUNCTION_LINES or branches > MAX_COMPLEXITY
    ]


if __name__ == "__main__":
    found = over_bounds()
    print("\n".join(found) or "every function within bounds")
    print(f"{len(found)} over {MAX_FUNCTION_LINES} lines or complexity {MAX_COMPLEXITY}")
