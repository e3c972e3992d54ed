"""No silent waits: a call that compiles says so once per dtype, and ``polymm.warmup`` /
``polymm warmup`` compile ahead of time with progress."""

import ast
import os
import subprocess
import sys

import numpy as np
import pytest

import polymm

FIRST_CALL = (
    "import logging, sys, numpy as np, polymm\n"
    "if sys.argv[1] == 'quiet': logging.getLogger('polymm').setLevel(logging.ERROR)\n"
    "for n in (2, 3, 2):\n"
    "    polymm.matmul(np.ones((n, n), np.int16), np.ones((n, n), np.int16))\n"
)


def _first_call(cache, mode="loud"):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_CALL, mode], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.splitlines()


def test_a_compiling_call_says_so_once_and_a_cached_one_says_nothing(tmp_path):
    lines = _first_call(tmp_path)
    assert len(lines) == 1, lines
    assert lines[0].startswith("polymm: compiling cpu kernels for int16 (first use; cached in " + str(tmp_path))
    assert "polymm warmup" in lines[0]
    assert _first_call(tmp_path) == []  # loaded from Numba's cache: nothing to wait for, nothing said


def test_the_notice_is_silenced_through_logging(tmp_path):
    assert _first_call(tmp_path, "quiet") == []


#: (B, M, N, K) whose "auto" paths between them run most kernel kinds (which one depends on the
#: machine's thresholds in the device database).
PATHS = [
    (1, 3, 3, 3),
    (1, 20, 20, 30),
    (200, 40, 40, 40),
    (1, 64, 64, 20000),
    (1, 4000, 1, 300),
    (1, 1, 4000, 300),
    (1, 2, 300, 20000),
    (1, 40, 70, 80),
    (60, 300, 300, 300),
    (1, 300, 300, 300),
    (1, 700, 700, 700),
    (1, 128, 128, 16384),
]


def test_cpu_warmup_compiles_every_kernel_the_auto_path_runs(monkeypatch):
    """After warmup, products of every path (tiny, small, narrow, split-K, batched, large) ask for
    no kernel that warmup did not make ready. The whole team is used whatever else runs on the
    machine (the good neighbour's count would otherwise make a loaded machine plan serial paths)."""
    from polymm_numba import neighbours

    monkeypatch.setattr(neighbours, "team_size", lambda limit, lock, **_: limit)
    backend = polymm.get_backend("cpu")
    dt = np.dtype("float64")
    warmed = list(backend.warmup(dt))
    assert len(warmed) == len(set(warmed)) and all((kind, dt) in backend._fns for kind in warmed)
    asked = set()
    kernel = backend._kernel
    monkeypatch.setattr(backend, "_kernel", lambda kind, dtype: asked.add(kind) or kernel(kind, dtype))
    rng = np.random.default_rng(0)
    for nb, m, n, k in PATHS:
        a, b = rng.standard_normal((nb, m, k)), rng.standard_normal((nb, k, n))
        out = np.empty((nb, m, n))
        backend.matmul(a, b, out, "auto")
        np.testing.assert_allclose(out, a @ b, rtol=1e-9, atol=1e-9)
    assert asked <= set(warmed), f"not warmed up: {asked - set(warmed)}"
    assert len(asked) >= 8, f"the shapes ran only {asked}"


def test_warmup_reports_progress_and_refuses_unknown_dtypes():
    lines = []
    spent = polymm.warmup("float64,int8", backend="example", progress=lines.append)  # no warmup of its own
    assert list(spent) == ["float64", "int8"] and all(s >= 0 for s in spent.values())
    assert lines[0].startswith("example float64: 4x4x4 ready (") and lines[-1].startswith("example int8: done in ")
    assert list(polymm.warmup(np.float32, backend="example")) == ["float32"]
    with pytest.raises(ValueError, match="no dtype float33; it computes bool, int8"):
        polymm.warmup(["float33"], backend="cpu")


def test_warmup_command_prints_a_line_per_kernel_when_piped():
    proc = subprocess.run(
        [sys.executable, "-m", "polymm.tools.cli", "warmup", "--backend", "example", "--dtypes", "float32"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(" ready ")[0] for line in lines[:4]] == [
        "example float32: 4x4x4",
        "example float32: 1x300x300",
        "example float32: 300x300x1",
        "example float32: 256x256x256",
    ]
    assert lines[-1].startswith("polymm warmup: float32 ready in ")


#: After ``polymm warmup --jobs 2``, the products of every path in a new process: DEBUG records of
#: each compile (``polymm.compilation.compiled``) counted, none expected.
AFTER_WARMUP = (
    "import logging, numpy as np, polymm\n"
    "from polymm_numba import neighbours\n"
    "neighbours.team_size = lambda limit, lock, **_: limit\n"
    "compiled = []\n"
    "class Count(logging.Handler):\n"
    "    def emit(self, record):\n"
    "        getattr(record, 'polymm_compile', None) and compiled.append(record.polymm_compile['kernel'])\n"
    "log = logging.getLogger('polymm'); log.addHandler(Count()); log.setLevel(logging.DEBUG)\n"
    "rng = np.random.default_rng(0)\n"
    "for nb, m, n, k in %r:\n"
    "    a, b = rng.standard_normal((nb, m, k)), rng.standard_normal((nb, k, n))\n"
    "    np.testing.assert_allclose(polymm.matmul(a, b), a @ b, rtol=1e-9, atol=1e-9)\n"
    "print('compiled:', ','.join(compiled))\n"
)


def test_warmup_in_worker_processes_leaves_every_kernel_in_the_cache(tmp_path):
    """``polymm warmup --jobs 2`` compiles the CPU backend's groups in two worker processes into
    Numba's cache; a later process then runs every path of :data:`PATHS` without compiling."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "POLYMM_TUNING": str(tmp_path / "none.json")}
    cmd = [sys.executable, "-m", "polymm.tools.cli", "warmup", "--backend", "cpu", "--dtypes", "float64", "--jobs", "2"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    in_workers = {line.split(": ")[1].split()[0] for line in lines if ", in worker " in line}
    backend = polymm.get_backend("cpu")
    assert in_workers == {k for group in backend.warmup_groups(np.dtype("float64")) for k in group}, proc.stdout
    assert lines[-1].startswith("polymm warmup: float64 ready in ")
    after = subprocess.run(
        [sys.executable, "-c", AFTER_WARMUP % (PATHS,)], env=env, capture_output=True, text=True, timeout=600
    )
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "compiled:", after.stdout


class _Grouped(polymm.Backend):
    """A backend known to this process only, with warmup groups: its worker processes cannot find it."""

    made: list = []

    def matmul(self, a, b, out, algorithm):
        np.matmul(a, b, out=out)

    def warmup(self, dtype, kinds=None):
        for kind in kinds or ("one", "two"):
            self.made.append(kind)
            yield kind

    def warmup_groups(self, dtype):
        return [("one",), ("two",)]


def test_groups_a_worker_could_not_compile_are_compiled_in_this_process(monkeypatch):
    polymm.register_backend("grouped", _Grouped, replace=True)
    _Grouped.made = []
    lines = []
    spent = polymm.warmup("float32", backend="grouped", progress=lines.append, jobs=2)
    failed = [line for line in lines if "failed (" in line]
    assert len(failed) == 2 and all("unknown polymm backend 'grouped'" in line for line in failed), lines
    assert all(line.endswith("what it did not compile is compiled here") for line in failed)
    assert _Grouped.made == ["one", "two"] and list(spent) == ["float32"]
    with pytest.raises(TypeError, match="jobs must be a positive int"):
        polymm.warmup("float32", backend="grouped", jobs=0)
    monkeypatch.setattr(_Grouped, "warmup_groups", lambda self, dtype: [])  # nothing to hand out: no worker started
    _Grouped.made = []
    assert list(polymm.warmup("float32", backend="grouped", jobs=2)) == ["float32"] and _Grouped.made == ["one", "two"]


#: The README's first products ("## Using it"), each followed by the kernels it compiled, as the
#: DEBUG records of ``polymm.compilation.compiled`` name them.
README_CALLS = (
    "import logging, numpy as np, polymm\n"
    "kernels = []\n"
    "class Compiles(logging.Handler):\n"
    "    def emit(self, record):\n"
    "        facts = getattr(record, 'polymm_compile', None)\n"
    "        if facts: kernels.append(facts['backend'] + ':' + facts['kernel'])\n"
    "log = logging.getLogger('polymm')\n"
    "log.addHandler(Compiles())\n"
    "log.setLevel(logging.DEBUG)\n"
    "a = np.ones((64, 3, 100, 50), np.float32)\n"
    "b = np.ones((50, 70), np.float32)\n"
    "for label, call in (('auto', lambda: polymm.matmul(a, b)), ('tiled', lambda: polymm.matmul(a, b, algorithm='tiled')),\n"
    "                    ('out', lambda: polymm.matmul(a, b, out=np.empty((64, 3, 100, 70), np.float32)))):\n"
    "    call()\n"
    "    print(label, *kernels)\n"
    "    kernels.clear()\n"
)


def _readme_calls(cache) -> dict[str, list[str]]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    env.pop("POLYMM_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", README_CALLS], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()}


def test_the_readme_calls_compile_only_the_kernel_each_runs(tmp_path):
    """A cold start compiles one kernel per call, the one it runs: the packed kernel's body and
    its driver (serial, or the shared parallel driver ``tasks_parallel``, as the good neighbour
    plans it), then the tiled one's tile (and the shared driver, if the first call did not), and
    for ``out=`` at most the other packed driver (where the machine's load changed the plan: a
    fraction of a second); each compile is logged once (the records
    ``scripts/cold_start.py`` times), and a second process loads the bodies from the cache. (The
    good neighbour's own probe of the thread pool, ``pool_thread_ids``, compiles only where the
    pool's new threads do not tell it apart: see ``polymm_numba.neighbours._learn_pool``.)"""
    probe = "cpu:pool_thread_ids"
    drivers = {"cpu:auto_serial", "cpu:tasks_parallel"}  # auto_batch runs on the shared tasks_parallel
    first = {label: [k for k in kernels if k != probe] for label, kernels in _readme_calls(tmp_path).items()}
    assert first["auto"][0] == "cpu:columns_packed" and len(first["auto"]) == 2, first
    assert set(first["auto"][1:]) <= drivers, first
    # the tiles run on the shared parallel driver: compiled here only if the first call was serial
    assert first["tiled"] in (["cpu:tile"], ["cpu:tile", "cpu:tasks_parallel"]), first
    assert ("cpu:tasks_parallel" in first["tiled"]) == ("cpu:tasks_parallel" not in first["auto"]), first
    assert set(first["out"]) <= drivers - set(first["auto"]), first
    second = {label: [k for k in kernels if k != probe] for label, kernels in _readme_calls(tmp_path).items()}
    assert second["tiled"] == [] and all(set(kernels) <= drivers for kernels in second.values()), second


LINKED = (
    "import sys, numpy as np, polymm\n"
    "from numba.core import event\n"
    "linked = {}\n"
    "class Linked(event.Listener):\n"
    "    def on_start(self, ev):\n"
    "        pass\n"
    "    def on_end(self, ev):\n"
    "        d = ev.data['dispatcher']\n"
    "        name = d.py_func.__qualname__.split('_mr')[0]\n"
    "        if name in ('_columns_packed', sys.argv[2]):\n"
    "            ir = ''.join(c.library.get_llvm_str() for c in d.overloads.values()).splitlines()\n"
    "            defined = [line for line in ir if line.startswith('define')]\n"
    "            linked[name] = sorted(k for k in ('_block_regs', '_pack_a', '_pack_b') if any(k in line for line in defined))\n"
    "event.register('numba:compile', Linked())\n"
    "polymm.get_backend('cpu')._kernel(sys.argv[1], np.dtype('float64'))\n"
    "print(repr(linked))\n"
)


@pytest.mark.parametrize("kind, driver", [("auto_serial", "auto_serial"), ("auto_batch", "tasks_parallel")])
def test_the_packed_kernel_is_compiled_once_and_called_by_address(tmp_path, kind, driver):
    """Numba links every jitted callee into each caller's module and optimises and emits it there
    again, so the packed kernel's body (packing, register tiles) is compiled on its own, once, and
    the drivers call it by address (``polymm_numba.native_call``): a driver's code holds none of it.
    The packing loops are inlined into the body (Numba's IR), so no function of theirs is linked."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", LINKED, kind, driver], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    linked = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert linked == {"_columns_packed": ["_block_regs"], driver: []}, linked
