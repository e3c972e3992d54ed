"""The import graph is the architecture: the runtime (dispatch, registry, arrays, precision,
kernels, dask) never imports a backend or a tool, the tools reach backends through the registry
only, and no two modules import each other, directly or around a longer circle.

Every ``import`` statement counts, at module level or inside a function: a lazy import is an
arrow all the same.  Read from the source (nothing imported), so it runs anywhere.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Each top-level package and the folder that holds it.
PACKAGES = {
    "polymm": ROOT / "polymm",
    "polymm_numba": ROOT / "backends" / "polymm-numba" / "polymm_numba",
    "polymm_opencl": ROOT / "backends" / "polymm-opencl" / "polymm_opencl",
    "polymm_cuda": ROOT / "backends" / "polymm-cuda" / "polymm_cuda",
}
BACKENDS = tuple(name for name in PACKAGES if name != "polymm")

#: Layers above the runtime: the tools and the conformance suite.
ON_TOP = ("polymm.tools", "polymm.testing")


def _modules() -> dict[str, Path]:
    """Every module of the packages, by dotted name."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _imports(module: str, path: Path) -> set[str]:
    """The modules ``module`` imports (only the packages' own, and any ``polymm_*`` top level)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from package import module` imports the module; `from module import name` the module
            targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
    return {t for t in targets if t.split(".")[0] in PACKAGES or t.startswith("polymm_")}


GRAPH = {module: _imports(module, path) - {module} for module, path in MODULES.items()}


def _runtime(module: str) -> bool:
    return _within(module, "polymm") and not any(_within(module, top) for top in ON_TOP)


def test_the_runtime_imports_no_backend_and_no_tool():
    wrong = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _runtime(module)
        for target in sorted(targets)
        if (target.split(".")[0] != "polymm" or any(_within(target, top) for top in ON_TOP))
    ]
    assert not wrong, "the runtime reaches up:\n" + "\n".join(wrong)


def test_tools_reach_backends_through_the_registry_only():
    wrong = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if any(_within(module, top) for top in ON_TOP)
        for target in sorted(targets)
        if target.split(".")[0] != "polymm"
    ]
    assert not wrong, "a tool imports a backend's internals:\n" + "\n".join(wrong)


def _cycle() -> list[str] | None:
    """One circle of imports, if there is any (a depth-first search over :data:`GRAPH`)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module):
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH.get(module, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target in GRAPH and state.get(target) is None:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(GRAPH):
        if state.get(module) is None:
            found = visit(module)
            if found:
                return found
    return None


def test_no_module_imports_itself_around_a_circle():
    circle = _cycle()
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_the_checks_see_what_they_look_for(monkeypatch):
    """The graph holds the arrows it should: a lazy import inside a function, a relative import,
    and an invented circle and upward arrow are found."""
    assert "polymm.backend" in GRAPH["polymm.kernels"]  # inside a function
    assert "polymm.dispatch" in GRAPH["polymm.dask"]  # `from . import dispatch`
    monkeypatch.setitem(GRAPH, "polymm.dispatch", GRAPH["polymm.dispatch"] | {"polymm.dask"})
    assert _cycle() is not None
    monkeypatch.setitem(GRAPH, "polymm.registry", GRAPH["polymm.registry"] | {"polymm_numba"})
    with pytest.raises(AssertionError, match="polymm.registry imports polymm_numba"):
        test_the_runtime_imports_no_backend_and_no_tool()


def test_importing_and_using_polymm_loads_no_tool():
    """What runs, not only what is written: a product on the CPU default loads no module of the
    tools or the suite (the registry loads the backend it needs, through its entry point)."""
    code = (
        "import sys, numpy as np, polymm\n"
        "polymm.matmul(np.ones((3, 4)), np.ones((4, 2)))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('polymm.tools', 'polymm.testing'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
