"""Plugins, registration and selection order: the registry's side of the contract."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import polymm
from polymm.testing.reference import assert_matches


def _run_python(code: str, *paths: str) -> subprocess.CompletedProcess:
    env_path = ":".join(paths)
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = env_path + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def _fake_distribution(root, name, entry_points: dict[str, str], modules: dict[str, str], group="polymm.backends"):
    """Install a distribution by hand: a dist-info with entry points, plus its modules."""
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}\n")
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source))


def test_broken_plugins_are_listed_unavailable_and_break_nothing(tmp_path):
    _fake_distribution(
        tmp_path,
        "broken_plugins",
        {
            "broken-import": "broken_on_import:Backend",
            "broken-init": "broken_on_init:Backend",
            "missing-attr": "broken_on_init:NoSuchName",
        },
        {
            "broken_on_import": "raise ImportError('libfoo.so: cannot open shared object file')\n",
            "broken_on_init": """
                import polymm
                class Backend(polymm.Backend):
                    def __init__(self):
                        raise RuntimeError("device 0 fell off the bus")
            """,
        },
    )
    code = textwrap.dedent("""
        import json, numpy as np, polymm
        infos = {i.name: i for i in polymm.backends()}
        a = np.arange(6.0).reshape(2, 3)
        result = polymm.matmul(a, a.T, backend="cpu")
        print(json.dumps({
            "infos": {n: [i.available, i.reason] for n, i in infos.items()},
            "ok": bool(np.allclose(result, a @ a.T)),
        }))
        try:
            polymm.matmul(a, a.T, backend="broken-init")
        except polymm.BackendUnavailable as exc:
            print("ERROR", exc)
    """)
    proc = _run_python(code, str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    first, error = proc.stdout.strip().splitlines()[-2:]
    report = json.loads(first)
    infos = report["infos"]
    assert infos["broken-import"][0] is False and "libfoo.so" in infos["broken-import"][1]
    assert infos["broken-init"][0] is False and "fell off the bus" in infos["broken-init"][1]
    assert infos["missing-attr"][0] is False and "NoSuchName" in infos["missing-attr"][1]
    assert infos["cpu"] == [True, None]
    assert report["ok"]
    assert "broken-init" in error and "fell off the bus" in error
    # the failure is traced to the plugin: its entry point and distribution, its own file, not the loaders
    assert "entry point 'broken-init = broken_on_init:Backend' of distribution broken_plugins 0.1" in error
    assert "broken_on_init.py:" in infos["broken-init"][1]
    for name in ("broken-import", "broken-init", "missing-attr"):
        assert "importlib" not in infos[name][1] and "polymm/registry.py" not in infos[name][1], infos[name][1]


def test_builtin_and_example_backends_come_from_entry_points():
    infos = {i.name: i for i in polymm.backends()}
    assert infos["cpu"].available, infos["cpu"].reason
    for name in ("cpu", "example"):
        assert infos[name].origin.startswith("entry point"), infos[name].origin


class _Recorder(polymm.Backend):
    """Computes with NumPy and remembers that it was asked: proves which backend was chosen."""

    algorithms = ("auto", "slow")
    calls: list = []

    def matmul(self, a, b, out, algorithm):
        self.calls.append(algorithm)
        np.matmul(a, b, out=out)


@pytest.fixture
def recorder():
    polymm.register_backend("recorder", _Recorder, replace=True)
    _Recorder.calls = []
    return _Recorder.calls


class _DuckTiny:
    """A device backend that does not subclass polymm.Backend (the core duck-types): the example
    ``tiny`` backend's methods, without the later optional ones (``lend_numpy``, ``lend_result``,
    ``lend_out``)."""

    array_library = "tiny"
    algorithms = ("auto",)

    def __init__(self):
        from polymm_example.tiny import TinyBackend

        self._inner = TinyBackend()

    def __getattr__(self, name):
        if name in ("lend_numpy", "lend_result", "lend_out"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_duck_typed_device_backend_without_the_optional_methods_computes_numpy_operands():
    pytest.importorskip("polymm_example.tiny")
    polymm.register_backend("ducktiny", _DuckTiny, replace=True)
    a, b = np.arange(12.0).reshape(3, 4), np.arange(8.0).reshape(4, 2)
    got = polymm.matmul(a, b, backend="ducktiny")
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, a @ b)


def test_register_backend_at_run_time(recorder):
    a = np.ones((3, 4), np.float32)
    assert_matches(polymm.matmul(a, a.T, backend="recorder", algorithm="slow"), a, a.T)
    assert recorder == ["slow"]
    assert "recorder" in {i.name for i in polymm.backends()}


def test_register_backend_refuses_silent_replacement(recorder):
    with pytest.raises(ValueError, match="already registered"):
        polymm.register_backend("recorder", _Recorder)
    with pytest.raises(ValueError, match="non-empty string"):
        polymm.register_backend("", _Recorder)


def test_selection_order(recorder, monkeypatch):
    a = np.ones((2, 2))
    monkeypatch.setenv("POLYMM_BACKEND", "recorder")
    polymm.matmul(a, a)  # environment
    assert len(recorder) == 1
    with polymm.use_backend("cpu"):  # scope beats environment
        polymm.matmul(a, a)
    assert len(recorder) == 1
    monkeypatch.delenv("POLYMM_BACKEND")
    with polymm.use_backend("cpu"):
        polymm.matmul(a, a, backend="recorder")  # argument beats scope
    assert len(recorder) == 2
    polymm.matmul(a, a)  # host arrays default to cpu
    assert len(recorder) == 2


def test_use_backend_is_thread_local(recorder):
    a = np.ones((2, 2))
    ready, done = threading.Event(), threading.Event()

    def other_thread():
        ready.wait()
        polymm.matmul(a, a)  # this thread never entered the scope: cpu
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with polymm.use_backend("recorder"):
        ready.set()
        done.wait(60)
        polymm.matmul(a, a)
    thread.join()
    assert len(recorder) == 1


def test_use_backend_is_task_local(recorder):
    a = np.ones((2, 2))

    async def scoped():
        with polymm.use_backend("recorder"):
            await asyncio.sleep(0.01)
            polymm.matmul(a, a)

    async def unscoped():
        await asyncio.sleep(0.005)
        polymm.matmul(a, a)

    async def main():
        await asyncio.gather(scoped(), unscoped())

    asyncio.run(main())
    assert len(recorder) == 1


def test_use_backend_rejects_unknown_names():
    with pytest.raises(ValueError, match="no-such.*cpu"):
        with polymm.use_backend("no-such"):
            pass


def test_unavailable_backend_is_a_clear_error():
    polymm.register_backend("gone", lambda: (_ for _ in ()).throw(polymm.BackendUnavailable("no driver")), replace=True)
    with pytest.raises(polymm.BackendUnavailable, match="'gone' is unavailable: no driver"):
        polymm.matmul(np.ones((2, 2)), np.ones((2, 2)), backend="gone")
    info = {i.name: i for i in polymm.backends()}["gone"]
    assert not info.available and info.reason == "no driver"


def test_device_arrays_are_not_silently_moved_to_a_host_backend():
    cl = pytest.importorskip("pyopencl")
    import pyopencl.array as cl_array

    try:
        context = cl.create_some_context(interactive=False)  # held: Intel's CPU runtime frees it otherwise
        queue = cl.CommandQueue(context)
    except cl.Error as exc:
        pytest.skip(f"no OpenCL device here: {exc}")
    x = cl_array.to_device(queue, np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="'cpu' computes on numpy arrays.*pyopencl"):
        polymm.matmul(x, x, backend="cpu")


def test_backends_declare_the_libraries_they_serve_and_a_priority():
    """A third-party backend's ``default_for`` numpy counts once the user opts in: then the
    available one of highest priority among them is the default; an unavailable one is passed over."""
    from polymm.registry import default_backend

    class Preferred(_Recorder):
        default_for = ("numpy",)
        priority = 10

    class Broken(_Recorder):
        default_for = ("numpy",)
        priority = 20

        def __init__(self):
            raise polymm.BackendUnavailable("no device")

    a = np.arange(1.0, 5.0).reshape(2, 2)
    try:
        polymm.register_backend("preferred", Preferred, replace=True)
        polymm.register_backend("broken-preferred", Broken, replace=True)
        Preferred.calls = []
        assert default_backend("numpy") == "cpu"  # declared, not opted in: nothing changes
        assert_matches(polymm.matmul(a, a), a, a)
        assert Preferred.calls == []
        polymm.set_default_backend("numpy", "preferred")
        assert default_backend("numpy") == "preferred"
        assert_matches(polymm.matmul(a, a), a, a)
        assert Preferred.calls == ["auto"]
        info = {i.name: i for i in polymm.backends()}["preferred"]
        assert (info.default_for, info.priority) == (("numpy",), 10)
        assert info.distribution is None and not info.first_party and "register_backend()" in info.origin
    finally:
        polymm.set_default_backend("numpy", None)
        polymm.register_backend("preferred", _Recorder, replace=True)
        polymm.register_backend("broken-preferred", _Recorder, replace=True)
    assert default_backend("numpy") == "cpu"


TAKEOVER = """
    import numpy as np
    import polymm

    class Takeover(polymm.Backend):
        default_for = ("numpy", "nolib")
        priority = 1000

        def matmul(self, a, b, out, algorithm):
            np.matmul(a, b, out=out)
            out += 1  # wrong on purpose: who computed shows
"""

WHO_COMPUTES = """
import json, sys, warnings, numpy as np, polymm
from polymm.registry import default_backend, defaults_in_use
from polymm.tools import cli
a = np.ones((2, 2))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = float(polymm.matmul(a, a)[0, 0])
    nolib = default_backend("nolib"), default_backend("nolib")
print(json.dumps({"first": first, "nolib": nolib, "used": defaults_in_use(),
                  "warnings": [str(w.message) for w in caught]}))
cli.main(["info"])
"""


@pytest.mark.parametrize("opt_in", [None, "numpy=takeover,nolib=takeover"])
def test_installing_a_plugin_that_declares_default_for_numpy_takes_nothing_over(tmp_path, opt_in):
    """A plugin installed through its entry point, declaring itself default for NumPy with a high
    priority, computes no NumPy product unless the user opts in (POLYMM_DEFAULT_BACKENDS); a
    library no trusted backend serves goes to it with one warning saying how to confirm or undo.
    ``polymm info`` says who serves each array library."""
    import os

    _fake_distribution(tmp_path, "takeover_plugin", {"takeover": "takeover:Takeover"}, {"takeover": TAKEOVER})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    env.pop("POLYMM_BACKEND", None)
    env.pop("POLYMM_DEFAULT_BACKENDS", None)
    if opt_in:
        env["POLYMM_DEFAULT_BACKENDS"] = opt_in
    proc = subprocess.run([sys.executable, "-c", WHO_COMPUTES], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first, info = proc.stdout.split("\n", 1)
    report = json.loads(first)
    assert report["nolib"] == ["takeover", "takeover"]
    if opt_in is None:
        assert report["first"] == 2.0  # cpu computed it, not the plugin (which gives 3)
        assert report["used"]["numpy"] == ["cpu", "first-party default"]
        assert "declares default for numpy: not used, 'cpu' computes them" in info
        assert "opt in: POLYMM_DEFAULT_BACKENDS=numpy=takeover" in info
        (warning,) = report["warnings"]  # once, though asked twice
        assert "nolib arrays are computed by polymm backend 'takeover'" in warning
        assert "POLYMM_DEFAULT_BACKENDS=nolib=takeover" in warning and "uninstall takeover_plugin" in warning
    else:
        assert report["first"] == 3.0
        assert report["used"]["numpy"][0] == "takeover" and "opted in" in report["used"]["numpy"][1]
        assert report["warnings"] == []
    assert "takeover_plugin 0.1, takeover = takeover:Takeover, third-party" in info
    assert "priority   1000" in info


def test_listing_makes_no_backend():
    """``polymm.backends()`` reads listings only; availability is probed on first access, once."""
    code = """
import sys, polymm
infos = {i.name: i for i in polymm.backends()}
assert infos["cpu"].algorithms == ("naive", "tiled", "auto") and infos["cpu"].default_for == ("numpy",)
assert infos["opencl"].array_library == "pyopencl"
assert not any(m.startswith(("numba", "pyopencl", "cupy")) for m in sys.modules), sorted(sys.modules)
assert infos["cpu"].available and "numba" in sys.modules
print("ok")
"""
    proc = _run_python(code)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_a_library_no_backend_serves_is_a_clear_error():
    from polymm.registry import default_backend

    with pytest.raises(TypeError, match="no installed backend computes on nosuchlib arrays"):
        default_backend("nosuchlib")


class NoAuto(_Recorder):
    algorithms = ("slow",)


def test_a_backend_without_auto_is_unavailable_with_the_reason():
    polymm.register_backend("no-auto", NoAuto, replace=True)
    info = {i.name: i for i in polymm.backends()}["no-auto"]
    assert not info.available and "lack 'auto'" in info.reason
    # traced to the plugin's class and to where it was registered, not to the registry
    assert f"class NoAuto at {__file__}:" in info.reason and "polymm/registry.py" not in info.reason
    with pytest.raises(
        polymm.BackendUnavailable, match=r"'no-auto' is unavailable.*lack 'auto'.*\[registered .*test_reg"
    ):
        polymm.matmul(np.ones((2, 2)), np.ones((2, 2)), backend="no-auto")


class _Raising(polymm.Backend):
    def matmul(self, a, b, out, algorithm):
        out[...] = a @ b[:, :1, :2]  # a bug of its own: a broadcast error


@pytest.mark.parametrize("shapes", [((3, 3), (3, 3)), ((2, 3, 3), (3, 3)), ((4, 1, 3, 3), (1, 2, 3, 3))])
def test_a_backends_own_exception_is_labelled_with_the_backend(shapes):
    """A backend's own error reaches the user with a note naming the backend and the product it was
    computing (it must not read as the caller's mistake); the exception itself is unchanged."""
    polymm.register_backend("raising", _Raising, replace=True)
    with pytest.raises(ValueError, match="mismatch") as info:
        polymm.matmul(np.ones(shapes[0]), np.ones(shapes[1]), backend="raising")
    (note,) = info.value.__notes__
    assert note.startswith("raised inside polymm backend 'raising' (registered at run time by register_backend()")
    assert "with algorithm 'auto'" in note


def test_one_backend_call_per_output_slice(recorder):
    """``(4, 1, 8, 8) @ (1, 5, 8, 8)``: 4 calls of 5 products each, each writing its own slice of
    the result, none repeated (there were 5, the last computing slice 0 again)."""
    seen = []

    class Counting(_Recorder):
        def matmul(self, a, b, out, algorithm):
            seen.append((out.__array_interface__["data"][0], out.shape))
            super().matmul(a, b, out, algorithm)

    polymm.register_backend("counting", Counting, replace=True)
    rng = np.random.default_rng(3)
    for s1, s2, calls in [
        ((4, 1, 8, 8), (1, 5, 8, 8), 4),
        ((1, 5, 8, 8), (4, 1, 8, 8), 4),
        ((2, 3, 1, 8, 8), (1, 1, 5, 8, 8), 6),
        ((3, 8, 8), (8, 8), 1),
        ((4, 5, 8, 8), (4, 5, 8, 8), 1),
    ]:
        seen.clear()
        x1, x2 = rng.standard_normal(s1), rng.standard_normal(s2)
        assert_matches(polymm.matmul(x1, x2, backend="counting"), x1, x2)
        assert len(seen) == calls, (s1, s2, seen)
        assert len(set(seen)) == calls  # distinct output slices


def test_an_array_type_the_core_does_not_know_is_served_by_its_plugin():
    """examples/polymm-example-backend brings TinyArray, its adapter (group polymm.arrays) and
    the backend ``tiny`` (default_for its library): chosen by the inputs' type alone."""
    tiny = pytest.importorskip("polymm_example.tiny")
    from polymm.arrays import kind_of

    rng = np.random.default_rng(5)
    x1 = rng.standard_normal((3, 5, 7)).astype(np.float32)
    x2 = rng.standard_normal((7, 4)).astype(np.float32)
    t1, t2 = tiny.TinyArray.from_numpy(x1), tiny.TinyArray.from_numpy(x2)
    assert kind_of(t1).name == "tiny"
    result = polymm.matmul(t1, t2)
    assert isinstance(result, tiny.TinyArray)
    assert_matches(result.to_numpy(), x1, x2)
    with pytest.raises(TypeError, match="different array libraries"):
        polymm.matmul(t1, x2)


def test_register_backend_forgets_the_launches_the_short_path_replays():
    """A backend registered under a name (``replace=True``) plans its own products: the launches
    the short path kept (``dispatch._REPLAYS``, made by the backend instances then registered) go."""
    from polymm import dispatch

    dispatch._REPLAYS[("a product seen before",)] = ((2, 2), lambda *addresses: None)
    polymm.register_backend("recorder", _Recorder, replace=True)
    assert not dispatch._REPLAYS


def test_an_opencl_device_that_builds_nothing_is_not_offered(monkeypatch):
    """A driver can list a device that builds no program (PoCL 3.0 on a CPU its LLVM 14 does not
    know): such a device is passed over, and with none left the backend is unavailable, naming
    each device and its compiler's error, also where ``POLYMM_OPENCL_DEVICE`` asks for it."""
    pytest.importorskip("pyopencl")
    import polymm_opencl
    from polymm.backend import BackendUnavailable
    from polymm_opencl import devices

    found = devices._all_devices()
    if not found:
        pytest.skip("no OpenCL device is listed here")
    monkeypatch.setattr(devices, "_build_failure", lambda device: "error: unknown target CPU 'generic'")
    monkeypatch.delenv("POLYMM_OPENCL_DEVICE", raising=False)
    first = found[0][3].name.strip()
    with pytest.raises(
        BackendUnavailable, match=f"no OpenCL device builds programs: {re.escape(first)} .*unknown target CPU"
    ):
        polymm_opencl.OpenCLBackend()
    monkeypatch.setenv("POLYMM_OPENCL_DEVICE", "0:0")
    with pytest.raises(BackendUnavailable, match="POLYMM_OPENCL_DEVICE='0:0': .* cannot build OpenCL programs"):
        polymm_opencl.OpenCLBackend()
    # a device that builds is chosen over one that does not
    monkeypatch.delenv("POLYMM_OPENCL_DEVICE")
    last = found[-1][3]
    monkeypatch.setattr(devices, "_build_failure", lambda device: None if device == last else "no")
    assert devices._pick_device() == last


def test_pocl_compiling_without_avx512_plans_32_byte_vectors(monkeypatch):
    """PoCL 3.0 reports 16-float vectors on an AMD Zen 4 but compiles for "znver3" (no AVX-512),
    and LLVM 14 then aborts the process on the regblock kernel's 16-wide vectors: where the
    probe's build log says the compiler has no 512-bit vectors, the planner gets 32 bytes; a
    device whose compiler has them, or that is not PoCL, keeps what it reports."""
    from types import SimpleNamespace

    pytest.importorskip("pyopencl")
    from polymm_opencl import devices

    def device(platform, width, log):
        dev = SimpleNamespace(
            int_ptr=object(), native_vector_width_float=width, platform=SimpleNamespace(name=platform)
        )
        monkeypatch.setitem(devices._probes, dev.int_ptr, (None, log))
        return dev

    no512 = "warning: /tmp/probe.cl:2:2: polymm: no 512-bit vectors\n1 warning generated.\n"
    assert devices._vector_bytes(device("Portable Computing Language", 16, no512)) == 32
    assert devices._vector_bytes(device("Portable Computing Language", 16, "")) == 64
    assert devices._vector_bytes(device("Intel(R) OpenCL", 16, no512)) == 64
    assert devices._vector_bytes(device("Portable Computing Language", 8, no512)) == 32
