"""pytest plugin (entry point ``pytest11``): runs the conformance suite per backend.

Tests that take the ``polymm_backend`` fixture are parametrized over the
backends chosen with ``--polymm-backend``, ``POLYMM_TEST_BACKEND`` or the ini
option ``polymm_backend`` (in that order; default: every available backend),
those that take ``polymm_inputs`` over the kinds of operands too ("numpy", and
"dask" with each backend's ``auto`` algorithm).

The plugin is installed into every pytest run of any project, so it does no
work (no backend is loaded) unless a collected test asks for ``polymm_backend``.
It never lets a run go green by mistake: a named backend that is unknown or
unavailable is a usage error; an "all available" run reports the backends it
left out and why; a run that collects the suite but can test no backend fails.
Backends may declare known failures (``conformance_xfail``); they are marked
``xfail(strict=True)`` with the backend's reason, so they show in the report and
turn into failures the day they pass.
"""

from __future__ import annotations

import fnmatch
import os

import pytest

_DEFAULT = "all"


def pytest_addoption(parser):
    parser.addoption(
        "--polymm-precision",
        default=None,
        help="run the conformance suite in this precision mode (default, tf32x3, tf32; or "
        "$POLYMM_TEST_PRECISION): every call without precision= computes in it, and results are "
        "checked against the error bound it documents",
    )
    parser.addoption(
        "--polymm-backend",
        default=None,
        help="polymm backend(s) to run the conformance suite against: a name, a comma list, or 'all' "
        "(every available backend; default, or $POLYMM_TEST_BACKEND, or the ini option polymm_backend)",
    )
    parser.addini(
        "polymm_backend", "polymm backend(s) the conformance suite runs against (as --polymm-backend)", default=None
    )


def pytest_configure(config):
    """A backend named for the run (option, environment or ini) is checked before collection: an
    unknown or unusable one stops the run with one line saying why (exit code 4, a usage error),
    not with a collection error per test module."""
    config.addinivalue_line("markers", "polymm_adapter: a conformance test of the backend's array adapter")
    if _requested(config) != _DEFAULT:
        _chosen(config)


def _requested(config) -> str:
    return (
        config.getoption("--polymm-backend")
        or os.environ.get("POLYMM_TEST_BACKEND")
        or config.getini("polymm_backend")
        or _DEFAULT
    )


def _chosen(config) -> list[str]:
    """The backends to test, computed once per session; records those an 'all' run leaves out."""
    cached = getattr(config, "_polymm_chosen", None)
    if cached is not None:
        return cached
    import polymm

    value = _requested(config)
    infos = {info.name: info for info in polymm.backends()}
    if value == "all":
        names = [name for name, info in infos.items() if info.available]
        config._polymm_left_out = {name: info.reason for name, info in infos.items() if not info.available}
    else:
        names = [v.strip() for v in value.split(",") if v.strip()]
        for name in names:
            if name not in infos:
                raise pytest.UsageError(f"--polymm-backend: unknown backend {name!r}; known: {', '.join(infos)}")
            if not infos[name].available:
                info = infos[name]
                source = (
                    info.entry_point and f" [entry point '{info.entry_point}' of {info.distribution} {info.version}]"
                )
                raise pytest.UsageError(
                    f"--polymm-backend: backend {name!r} is unavailable: {info.reason}{source or ''}"
                )
        config._polymm_left_out = {}
    if not names:
        reasons = "; ".join(f"{n}: {r}" for n, r in config._polymm_left_out.items()) or "none is installed"
        raise pytest.UsageError(
            "the polymm conformance suite was collected but no polymm backend can be tested "
            f"(every known backend is unavailable: {reasons}); name one with --polymm-backend"
        )
    config._polymm_chosen = names
    return names


@pytest.fixture(autouse=True)
def _polymm_checks(request):
    """The suite's tests watch the backend (:func:`polymm.testing.checks.watching`): results the
    core allocates are poisoned, and a ``matmul`` that returns a value or leaves ``out`` unwritten
    fails saying so. Only while such a test runs: it costs nothing elsewhere."""
    if "polymm_backend" not in request.fixturenames:
        yield
        return
    from polymm.testing.checks import watching

    with watching(request.getfixturevalue("polymm_backend")):
        yield


@pytest.fixture(autouse=True)
def _polymm_precision(request):
    """The suite's tests inside ``use_precision(--polymm-precision)`` when one is asked for."""
    mode = request.config.getoption("--polymm-precision") or os.environ.get("POLYMM_TEST_PRECISION")
    if not mode or "polymm_backend" not in request.fixturenames:
        yield
        return
    import polymm

    try:
        scope = polymm.use_precision(mode)
    except ValueError as exc:
        raise pytest.UsageError(f"--polymm-precision: {exc}") from None
    with scope:
        yield


def pytest_generate_tests(metafunc):
    if "polymm_backend" not in metafunc.fixturenames:
        return
    import polymm

    names = _chosen(metafunc.config)
    if "polymm_algorithm" in metafunc.fixturenames:
        pairs = [(n, a) for n in names for a in polymm.get_backend(n).algorithms]
    else:
        pairs = [(n,) for n in names]
    if "polymm_inputs" in metafunc.fixturenames:
        # Dask inputs test the Dask layer (graph, 1-D rules, broadcasting, promotion, errors), which is the
        # same for every kernel: with each backend's "auto" only, so they cost little.
        cases = [("numpy", *p) for p in pairs] + [("dask", *p) for p in pairs if p[1:] in ((), ("auto",))]
    else:
        cases = pairs
    argnames = [
        name for name in ("polymm_inputs", "polymm_backend", "polymm_algorithm") if name in metafunc.fixturenames
    ]
    metafunc.parametrize(argnames, cases, ids=["-".join(case) for case in cases])


def pytest_collection_modifyitems(config, items):
    """Mark the failures each backend declares it expects (``conformance_xfail``) as strict xfails."""
    if getattr(config, "_polymm_chosen", None) is None:
        return
    import polymm

    declared = {
        name: dict(getattr(polymm.get_backend(name), "conformance_xfail", None) or {}) for name in config._polymm_chosen
    }
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("polymm_backend") if callspec else None
        for pattern, reason in declared.get(backend, {}).items():
            if declared_match(pattern, item.name) or declared_match(pattern, item.nodeid):
                item.add_marker(pytest.mark.xfail(reason=f"declared by backend {backend!r}: {reason}", strict=True))


#: ``[`` and ``]`` as one-character classes: literal in a shell-style pattern (one pass, no rewrite of a rewrite)
_LITERAL_BRACKETS = str.maketrans({"[": "[[]", "]": "[]]"})


def declared_match(pattern: str, test_id: str) -> bool:
    """Does a ``conformance_xfail`` pattern match a test's name or node id?  ``*`` and ``?`` as in
    the shell; everything else literal, brackets included, so an id is written as pytest prints
    it: ``test_every_dtype[*-float16]`` is float16 alone (``[cpu-auto-float16]``), not bfloat16."""
    return fnmatch.fnmatchcase(test_id, pattern.translate(_LITERAL_BRACKETS))


def pytest_report_collectionfinish(config, start_path, items):
    """What the suite tests, and what an 'all' run left out with the reasons (only when the suite ran)."""
    if getattr(config, "_polymm_chosen", None) is None:
        return []
    lines = [f"polymm conformance suite: testing backend(s) {', '.join(config._polymm_chosen)}"]
    mode = config.getoption("--polymm-precision") or os.environ.get("POLYMM_TEST_PRECISION")
    if mode:
        lines.append(f"polymm conformance suite: in precision {mode!r}")
    for name, reason in config._polymm_left_out.items():
        lines.append(f"polymm backend {name} left out (unavailable): {reason}")
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    left_out = getattr(config, "_polymm_left_out", None)
    if left_out:
        terminalreporter.section("polymm backends not tested")
        for name, reason in left_out.items():
            terminalreporter.line(f"{name}: unavailable: {reason}")


def pytest_sessionfinish(session, exitstatus):
    """Under pytest-xdist, hand what a worker tested and left out to the controller's summary."""
    config = session.config
    if hasattr(config, "workeroutput") and getattr(config, "_polymm_chosen", None) is not None:
        config.workeroutput["polymm_left_out"] = config._polymm_left_out


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    left_out = getattr(node, "workeroutput", {}).get("polymm_left_out")
    if left_out is not None:
        node.config._polymm_left_out = left_out
