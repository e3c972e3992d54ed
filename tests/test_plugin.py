"""The pytest plugin: a conformance run can only go green when a backend was really tested.

Each case runs pytest in a subprocess (``pytester``) on a tiny project whose conftest
shapes what polymm reports: broken backends, a backend with declared expected failures.
"""

from __future__ import annotations

from polymm.backend import optional_dtypes

pytest_plugins = ["pytester"]

SUITE = "from polymm.testing.test_conformance import test_every_dtype, rng  # noqa: F401\n"

ONLY_BROKEN = """
import polymm
from polymm.registry import BackendInfo
polymm.backends = lambda: [BackendInfo("broken", False, "ImportError: libmine.so not found")]
"""

CPU_AND_BROKEN = """
import polymm
from polymm.registry import BackendInfo
_real = polymm.backends
polymm.backends = lambda: [i for i in _real() if i.name == "cpu"] + [
    BackendInfo("broken", False, "ImportError: libmine.so not found")]
"""

HALF_WRONG = """
import numpy as np
import polymm

class HalfWrong(polymm.Backend):
    algorithms = ("auto",)
    conformance_xfail = {XFAIL}

    def matmul(self, a, b, out, algorithm):
        np.matmul(a, b, out=out, dtype=np.float32 if out.dtype == np.float16 else None)
        if out.dtype == np.float16:
            out[...] += 1  # the known bug

polymm.register_backend("halfwrong", HalfWrong, replace=True)
"""


def _output(result) -> str:
    return "\n".join(result.outlines + result.errlines)


def _run(pytester, conftest, *args):
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0", *args)


def test_a_run_that_can_test_no_backend_fails_and_says_why(pytester):
    result = _run(pytester, ONLY_BROKEN)
    assert result.ret != 0
    assert "no polymm backend can be tested" in _output(result)
    assert "broken: ImportError: libmine.so not found" in _output(result)


def test_naming_an_unavailable_backend_fails_with_its_reason(pytester):
    result = _run(pytester, ONLY_BROKEN, "--polymm-backend=broken")
    assert result.ret != 0
    assert "backend 'broken' is unavailable: ImportError: libmine.so not found" in _output(result)


def test_an_all_backends_run_reports_what_it_left_out(pytester):
    result = _run(pytester, CPU_AND_BROKEN, "-k", "float32 or complex64")
    result.assert_outcomes(passed=6)  # cpu: three algorithms, two dtypes
    result.stdout.fnmatch_lines(
        [
            "*polymm conformance suite: testing backend(s) cpu*",
            "*left out (unavailable): ImportError: libmine.so not found*",
            "*polymm backends not tested*",
            "broken: unavailable: ImportError*",
        ]
    )


def test_the_ini_option_names_the_backend(pytester):
    pytester.makeini("[pytest]\npolymm_backend = broken\n")
    result = _run(pytester, ONLY_BROKEN)
    assert result.ret != 0
    assert "backend 'broken' is unavailable" in _output(result)


def test_declared_failures_are_strict_visible_xfails(pytester):
    result = _run(
        pytester,
        HALF_WRONG.replace("{XFAIL}", '{"test_every_dtype*float16*": "rounds float16 wrong"}'),
        "--polymm-backend=halfwrong",
        "-rx",
    )
    # the optional dtypes (bfloat16 with ml_dtypes) the test backend does not offer: refused, skipped
    result.assert_outcomes(passed=13, xfailed=1, skipped=len(optional_dtypes()))
    result.stdout.fnmatch_lines(["*XFAIL*float16*declared by backend 'halfwrong': rounds float16 wrong*"])


def test_a_declared_failure_that_passes_fails_the_run(pytester):
    result = _run(
        pytester,
        HALF_WRONG.replace("{XFAIL}", '{"test_every_dtype*int8*": "stale declaration"}'),
        "--polymm-backend=halfwrong",
    )
    # float16 really wrong; int8 passes: strict XPASS (optional dtypes it does not offer: skipped)
    result.assert_outcomes(passed=11, failed=3, skipped=len(optional_dtypes()))


def test_unrelated_pytest_runs_load_no_backend(pytester):
    pytester.makeconftest("")
    pytester.makepyfile(
        test_other="""
import sys

def test_nothing_loaded():
    assert not any(m.startswith(("polymm_numba", "polymm_opencl", "pyopencl", "numba")) for m in sys.modules)
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0")
    result.assert_outcomes(passed=1)
