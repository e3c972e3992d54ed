"""The array API's own tests of polymm's contractions (data-apis/array-api-tests: ``matmul``,
``tensordot``, ``vecdot`` and the ``linalg`` extension's three, their signatures and names) on
the cpu backend, through :mod:`polymm.testing.array_api_namespace`.

Runs where a checkout of that suite is at ``$ARRAY_API_TESTS_DIR`` (default ``.array-api-tests``;
``scripts/array_api_tests.sh --clone-only`` makes it) and its requirements are installed
(hypothesis, ndindex, pytest-json-report: the ``test`` extra); skipped, saying which is missing,
otherwise. About ten seconds. ``scripts/array_api_tests.sh`` runs the same on every backend."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUITE = pathlib.Path(os.environ.get("ARRAY_API_TESTS_DIR") or ROOT / ".array-api-tests")


def _missing() -> str | None:
    if not (SUITE / "array_api_tests" / "test_linalg.py").exists():
        return f"no array-api-tests checkout at {SUITE} (scripts/array_api_tests.sh --clone-only makes one)"
    if not (SUITE / "array-api" / "spec").exists():
        return f"{SUITE} lacks its array-api submodule (git -C {SUITE} submodule update --init)"
    for module in ("hypothesis", "ndindex", "pytest_jsonreport"):
        if importlib.util.find_spec(module) is None:
            return f"array-api-tests needs {module} (pip install hypothesis ndindex pytest-json-report)"
    return None


@pytest.mark.parametrize("base", ["array_api_strict", "numpy"])
def test_array_api_tests_of_the_contractions_pass(base):
    missing = _missing()
    if missing:
        pytest.skip(missing)
    env = dict(os.environ)
    env.update(
        ARRAY_API_TESTS_MODULE="polymm.testing.array_api_namespace",
        POLYMM_XP_BASE=base,
        POLYMM_XP_BACKEND="cpu",
        PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])]),
    )
    tests = [
        "array_api_tests/test_linalg.py",
        "array_api_tests/test_signatures.py",
        "array_api_tests/test_has_names.py",
    ]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--disable-deadline"]
    done = subprocess.run(
        [*command, *tests, "-k", "matmul or tensordot or vecdot"],
        cwd=SUITE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and "failed" not in tail, tail
