"""The modules of polymm_cuda import one another one way only (no cycle, not even through an
import inside a function), so each can be read, and loaded, after the ones it names."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "polymm_cuda"


def _imports(path: Path) -> set[str]:
    """The sibling modules that ``path`` imports anywhere in its text."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
    return found


def test_no_import_cycle():
    graph = {path.stem: _imports(path) for path in PACKAGE.glob("*.py")}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done or module not in graph:
            return
        for name in sorted(graph[module]):
            visit(name, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())
