"""``polymm.matmul`` from many threads and asyncio tasks at once: right answers, scopes kept apart.

The documented promise: ``matmul`` is safe to call concurrently on every backend, and
``use_backend`` scopes belong to the thread or task that opened them (contextvars).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import polymm
from polymm.registry import selected_backend
from polymm.testing.reference import assert_matches, random_array

HOST_BACKENDS = [b for b in ("cpu", "opencl") if any(i.name == b and i.available for i in polymm.backends())]

#: Shapes that take different paths (small, batched, matrix-vector, deep K, blocked), several dtypes.
PROBLEMS = [
    ((5, 7), (7, 3), "float32"),
    ((40, 8, 8), (40, 8, 8), "float64"),
    ((300, 200), (200,), "float32"),
    ((6, 3000), (3000, 5), "float64"),
    ((130, 70), (70, 90), "int32"),
    ((3, 33, 17), (17, 20), "complex64"),
]


def _inputs(seed):
    rng = np.random.default_rng(seed)
    s1, s2, dtype = PROBLEMS[seed % len(PROBLEMS)]
    return random_array(rng, s1, dtype), random_array(rng, s2, dtype)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_many_threads_get_right_answers(backend):
    def work(seed):
        x1, x2 = _inputs(seed)
        for _ in range(3):
            assert_matches(polymm.matmul(x1, x2, backend=backend), x1, x2)
        return seed

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sorted(pool.map(work, range(48))) == list(range(48))


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_scopes_stay_with_their_thread(backend):
    """A thread that opens ``use_backend`` changes nothing for the others, even mid-call."""
    barrier = threading.Barrier(2)
    seen = {}

    def scoped():
        with polymm.use_backend(backend):
            barrier.wait()
            x1, x2 = _inputs(1)
            assert_matches(polymm.matmul(x1, x2), x1, x2)
            seen["scoped"] = selected_backend(None, "numpy")
            barrier.wait()

    def plain():
        barrier.wait()
        seen["plain"] = selected_backend(None, "numpy")
        barrier.wait()

    threads = [threading.Thread(target=scoped), threading.Thread(target=plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert seen == {"scoped": backend, "plain": "cpu"}


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_asyncio_tasks_keep_their_own_scope(backend):
    async def task(name, seed):
        with polymm.use_backend(name):
            for _ in range(3):
                await asyncio.sleep(0)  # let the other tasks run inside this scope
                assert selected_backend(None, "numpy") == name
                x1, x2 = _inputs(seed)
                result = await asyncio.to_thread(polymm.matmul, x1, x2)  # the scope travels with the task
                assert_matches(result, x1, x2)
        return name

    async def main():
        names = [backend, "example", backend, "example", backend, "cpu"]
        return await asyncio.gather(*(task(n, i) for i, n in enumerate(names)))

    assert asyncio.run(main()) == [backend, "example", backend, "example", backend, "cpu"]
    assert selected_backend(None, "numpy") == "cpu"


def _spy(target_name, calls):
    """A backend that computes through ``target_name`` and records (itself, the task that called)."""
    target = polymm.get_backend(target_name)

    class Spy(polymm.Backend):
        algorithms = target.algorithms
        array_library = target.array_library

        def from_numpy(self, x):
            return target.from_numpy(x)

        def to_numpy(self, x):
            return target.to_numpy(x)

        def check_dtype(self, dtype, operand):
            target.check_dtype(dtype, operand)

        def matmul(self, a, b, out, algorithm):
            calls.append((self.name, _task.get()))
            target.matmul(a, b, out, algorithm)

    return Spy


_task = contextvars.ContextVar("task", default=None)


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_asyncio_tasks_compute_on_their_own_scope(backend):
    """Each task's calls, run in worker threads while other tasks hold other scopes, reach the
    backend its own ``use_backend`` chose, and no other."""
    calls = []
    polymm.register_backend(f"spy-{backend}", _spy(backend, calls), replace=True)
    polymm.register_backend("spy-cpu-other", _spy("cpu", calls), replace=True)

    async def task(name, seed):
        _task.set(name)
        with polymm.use_backend(name):
            for _ in range(3):
                await asyncio.sleep(0)
                x1, x2 = _inputs(seed * len(PROBLEMS))  # 2-D float32: one backend call a product
                assert_matches(await asyncio.to_thread(polymm.matmul, x1, x2), x1, x2)

    async def main():
        names = [f"spy-{backend}", "spy-cpu-other"] * 4
        await asyncio.gather(*(task(n, i) for i, n in enumerate(names)))

    asyncio.run(main())
    assert len(calls) == 24
    assert all(spy == caller for spy, caller in calls), [c for c in calls if c[0] != c[1]]
