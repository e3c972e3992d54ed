"""The OpenCL backend's own tests need a device that builds programs: where the backend is
unavailable (no driver, or a driver that builds nothing, such as PoCL 3.0 on a CPU its LLVM does
not know), each is skipped with the backend's reason, which ``polymm info`` prints too."""

from __future__ import annotations

import pytest


def _unavailable() -> str | None:
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return None  # the modules' importorskip says so
    import polymm

    for info in polymm.backends():
        if info.name == "opencl":
            return None if info.available else info.reason
    return "the opencl backend is not registered"


def pytest_collection_modifyitems(config, items):
    reason = _unavailable()
    if reason is None:
        return
    here = str(config.rootpath / "backends" / "polymm-opencl" / "tests")
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.skip(reason=f"opencl backend unavailable: {reason}"))
