"""What the ``polymm`` command and polymm's pytest plugin load first: a check that ``import polymm``
finds the installed package.

Both entry points import ``polymm`` by name, so a ``polymm`` folder (with an ``__init__.py``) or a
``polymm.py`` in the working directory -- first on ``sys.path`` under ``python -m`` -- would be
imported instead and fail with a baffling ``AttributeError`` or ``ModuleNotFoundError``. This module
lives beside the package, imports nothing of it before :func:`check` has passed, and names the
shadow instead. A plain ``import polymm`` in a program cannot be guarded (the shadow is what runs):
call :func:`check` first where that can happen.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["ShadowedError", "check", "main", "shadowed"]

#: Where the installed package lies: beside this module (site-packages, or the source tree).
INSTALLED = Path(__file__).resolve().parent / "polymm"


class ShadowedError(ImportError):
    """``import polymm`` finds something other than the installed package."""


def _origin(spec) -> Path | None:
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("namespace", "built-in"):
        return Path(spec.origin).resolve()
    return None  # a namespace package: never found before a regular one, so it shadows nothing


def shadowed() -> str | None:
    """Why ``import polymm`` does not (or did not) give the installed package, or None. Reads the
    import system's answer without running the module found."""
    loaded = sys.modules.get("polymm")
    found = _origin(getattr(loaded, "__spec__", None)) if loaded is not None else None
    if loaded is None:
        found = _origin(importlib.util.find_spec("polymm"))
    if found is None or found.parent == INSTALLED:
        return None
    is_folder = found.name == "__init__.py"
    where = found.parent.parent if is_folder else found.parent
    here = " (the working directory, first on sys.path)" if where == Path(os.getcwd()).resolve() else ""
    what = f"a {'folder named polymm' if is_folder else 'module named polymm.py'} in {where}{here}"
    return (
        f"{what} shadows the installed polymm package ({INSTALLED}): Python imports it instead. Rename or "
        "move it, or run from another directory"
    )


def check() -> None:
    """Raise :class:`ShadowedError`, naming the shadow, when ``import polymm`` would not give the installed package."""
    why = shadowed()
    if why:
        raise ShadowedError(f"polymm: {why}")


def main(argv=None) -> int:
    """The ``polymm`` command: the check, then :func:`polymm.tools.cli.main`."""
    try:
        check()
    except ShadowedError as exc:
        print(exc, file=sys.stderr)
        return 2
    from polymm.tools.cli import main as cli_main

    return cli_main(argv)


def __getattr__(name):
    """``pytest_plugin`` (the ``pytest11`` entry point's target): :mod:`polymm.testing.plugin`, once
    :func:`check` has passed; a shadow stops pytest with one line naming it."""
    if name != "pytest_plugin":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    why = shadowed()
    if why:
        import pytest

        raise pytest.UsageError(f"polymm's pytest plugin: {why}")
    import polymm.testing.plugin

    return polymm.testing.plugin
