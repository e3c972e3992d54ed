"""pytest plugin (entry point ``pytest11``): runs the conformance suite per backend.

Tests that take the ``polymm_backend`` fixture are parametrized over the
backends chosen with ``--polymm-backend`` or ``POLYMM_TEST_BACKEND``.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--polymm-backend",
        default=os.environ.get("POLYMM_TEST_BACKEND", "all"),
        help="polymm backend(s) to run the conformance suite against: a name, a comma list, or 'all' "
        "(every available backend; default, or $POLYMM_TEST_BACKEND)",
    )


def _chosen(config) -> list[str]:
    import polymm

    value = config.getoption("--polymm-backend")
    infos = {info.name: info for info in polymm.backends()}
    if value == "all":
        return [name for name, info in infos.items() if info.available]
    names = [v.strip() for v in value.split(",") if v.strip()]
    for name in names:
        if name not in infos:
            raise pytest.UsageError(f"--polymm-backend: unknown backend {name!r}; known: {', '.join(infos)}")
        if not infos[name].available:
            raise pytest.UsageError(f"--polymm-backend: backend {name!r} is unavailable: {infos[name].reason}")
    return names


def pytest_report_header(config):
    import polymm

    lines = []
    for info in polymm.backends():
        state = "available" if info.available else f"unavailable ({info.reason})"
        lines.append(f"polymm backend {info.name}: {state}")
    return lines


def pytest_generate_tests(metafunc):
    if "polymm_backend" not in metafunc.fixturenames:
        return
    import polymm

    names = _chosen(metafunc.config)
    if "polymm_algorithm" in metafunc.fixturenames:
        pairs = [(n, a) for n in names for a in polymm.get_backend(n).algorithms]
        metafunc.parametrize(("polymm_backend", "polymm_algorithm"), pairs, ids=[f"{n}-{a}" for n, a in pairs])
    else:
        metafunc.parametrize("polymm_backend", names)
