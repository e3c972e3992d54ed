"""A ``polymm`` folder or ``polymm.py`` in the working directory shadows the package under ``python -m``:
the ``polymm`` command and the pytest plugin (both entered through :mod:`polymm_entry`) name it in one
line instead of failing with an ``AttributeError`` from inside the shadow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import polymm_entry

REPO = Path(polymm_entry.__file__).resolve().parent

SHADOWS = {
    "folder": ("polymm/__init__.py", "a folder named polymm in {cwd} (the working directory, first on sys.path)"),
    "module": ("polymm.py", "a module named polymm.py in {cwd} (the working directory, first on sys.path)"),
}


def _run(cwd: Path, *args, site: Path | None = None):
    """``python *args`` in ``cwd``, which comes first on ``sys.path``; the repository (and ``site``) after it."""
    path = [str(p) for p in (site, REPO) if p] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(params=sorted(SHADOWS))
def shadow(request, tmp_path):
    """A working directory with a shadowing ``polymm``, and the line that must name it."""
    name, said = SHADOWS[request.param]
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_text("matmul = None  # someone's own polymm\n")
    return tmp_path, said.format(cwd=tmp_path.resolve()) + f" shadows the installed polymm package ({REPO / 'polymm'})"


def test_the_command_names_the_shadow(shadow):
    cwd, said = shadow
    proc = _run(cwd, "-c", "import sys, polymm_entry; sys.exit(polymm_entry.main(['info']))")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"polymm: {said}: Python imports it instead. Rename or move it, or run from another directory"
    ]


def test_pytest_names_the_shadow_in_one_line(shadow):
    """pytest loads the plugin through a ``pytest11`` entry point naming ``polymm_entry:pytest_plugin``, as
    polymm's own metadata does (a distribution made here, so the test needs no reinstall)."""
    cwd, said = shadow
    site = cwd.parent / f"{cwd.name}-site"
    info = site / "guarded-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: guarded\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[pytest11]\npolymm_guarded = polymm_entry:pytest_plugin\n")
    proc = _run(cwd, "-m", "pytest", "-p", "no:polymm", "-p", "no:cacheprovider", "--co", "-q", site=site)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert f"ERROR: polymm's pytest plugin: {said}" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_without_a_shadow_the_entry_points_give_polymm(tmp_path):
    proc = _run(tmp_path, "-c", "import polymm_entry as e; print(e.shadowed(), e.pytest_plugin.__name__)")
    assert proc.stdout.split() == ["None", "polymm.testing.plugin"], proc.stderr
    assert polymm_entry.shadowed() is None  # this very run
