"""polymm.matmul benchmarks: square sizes, awkward shapes, batches, and call overhead.

``time_*`` are what asv compares across commits (lower is better, so
``asv continuous`` can gate on them); ``track_*`` are figures for the dashboard:
GFLOP/s, and the speed ratio to the reference library measured in the same
process (NumPy/OpenBLAS on a host device, ``cupy.matmul``/cuBLAS on a GPU).
"""

from __future__ import annotations

import numpy as np

import polymm

from .common import ALGORITHMS, BACKENDS, QUICK, Target, gflops, measure, random_array


class _Product:
    """One ``(batch, m, k) @ (batch, k, n)`` problem on one backend and algorithm.

    Subclasses set ``params`` and implement ``problem(*params)`` returning
    ``(backend, algorithm, m, n, k, batch, dtype)``.
    """

    # Results stay comparable while this version is unchanged: bump it when an edit changes
    # what is measured (asv would otherwise hash the source and drop history on any edit).
    version = "1"
    # asv sampling: big products take long, so a handful of single-call samples suffices.
    rounds = 1
    repeat = (1, 7, 8.0)
    sample_time = 0.02
    warmup_time = 0.05
    timeout = 300

    def setup(self, *params):
        backend, algorithm, m, n, k, batch, dtype = self.problem(*params)
        self.target = target = Target(backend, algorithm)
        target.check_size(algorithm, m, n, k, batch)
        shape_a = (batch, m, k) if batch > 1 else (m, k)
        shape_b = (batch, k, n) if batch > 1 else (k, n)
        self.a_host = random_array(shape_a, dtype, seed=1)
        self.b_host = random_array(shape_b, dtype, seed=2)
        self.a, self.b = target.put(self.a_host), target.put(self.b_host)
        self.algorithm = algorithm
        self.dims = (m, n, k, batch)
        target.check_dtype(dtype, self.a)
        self.call()  # compiles/loads the kernels outside the timing

    def call(self):
        result = polymm.matmul(self.a, self.b, backend=self.target.name, algorithm=self.algorithm)
        self.target.sync(result)
        return result

    def time_matmul(self, *params):
        self.call()

    def track_gflops(self, *params):
        return gflops(*self.dims, measure(self.call, warm=False))

    track_gflops.unit = "GFLOP/s"

    def track_ratio_to_reference(self, *params):
        ref, _ = self.target.reference(self.a_host, self.b_host)
        # Ours, the reference, ours, the reference: drift (clocks, other load) hits both alike.
        # (setup already ran ours once; the reference gets its own warm-up call.)
        ours, theirs = [], []
        for i in range(1 if QUICK else 2):
            ours.append(measure(self.call, budget=0.75, warm=False))
            theirs.append(measure(ref, budget=0.75, warm=i == 0))
        return min(theirs) / min(ours)

    track_ratio_to_reference.unit = "x reference"


class Square(_Product):
    """n x n @ n x n for every backend, algorithm, size and dtype (host devices skip the slow big ones)."""

    params = [BACKENDS, ALGORITHMS, [64, 256, 512, 1024, 2048, 4096], ["float32", "float64"]]
    param_names = ["backend", "algorithm", "n", "dtype"]

    def problem(self, backend, algorithm, n, dtype):
        return backend, algorithm, n, n, n, 1, dtype


#: (label, M, N, K): a tall-skinny product (long A, narrow B and C) and sizes that are
#: multiples of no tile -- the guards and edge tiles are what is measured there.
SHAPES = {
    "tall-skinny 16384x64x256": (16384, 64, 256),
    "odd 1023x1025x1027": (1023, 1025, 1027),
    "odd 4095x4097x4099": (4095, 4097, 4099),
}


class Shapes(_Product):
    """Non-square float32 problems: ``M x N x K`` names the result's M x N and the contraction K."""

    params = [BACKENDS, ALGORITHMS, list(SHAPES)]
    param_names = ["backend", "algorithm", "shape"]

    def problem(self, backend, algorithm, shape):
        m, n, k = SHAPES[shape]
        return backend, algorithm, m, n, k, 1, "float32"


#: (label, batch, n): many small products in one call, where launch overhead and
#: occupancy matter more than the inner loop.
BATCHES = {"4096 x 64x64": (4096, 64), "256 x 16x16": (256, 16)}


class Batched(_Product):
    """A stack of small float32 square products in one call (batch dimension of the array API)."""

    params = [BACKENDS, ALGORITHMS, list(BATCHES)]
    param_names = ["backend", "algorithm", "batch"]

    def problem(self, backend, algorithm, batch):
        count, n = BATCHES[batch]
        return backend, algorithm, n, n, n, count, "float32"


class CallOverhead:
    """polymm.matmul on tiny float32 arrays, where the dispatch cost is the whole cost.

    ``time_reference`` is the same product by the reference library, so the two graphs
    side by side show the overhead polymm adds per call.
    """

    params = [BACKENDS, [4, 64]]
    param_names = ["backend", "n"]
    version = "1"
    rounds = 1
    repeat = (3, 10, 4.0)

    def setup(self, backend, n):
        self.target = Target(backend)
        self.a_host = random_array((n, n), "float32", seed=1)
        self.b_host = random_array((n, n), "float32", seed=2)
        self.a, self.b = self.target.put(self.a_host), self.target.put(self.b_host)
        self.ref, self.ref_name = self.target.reference(self.a_host, self.b_host)
        self.time_matmul(backend, n)

    def time_matmul(self, backend, n):
        self.target.sync(polymm.matmul(self.a, self.b, backend=backend))

    def time_reference(self, backend, n):
        self.ref()


class Reference:
    """The reference libraries alone (NumPy/OpenBLAS, CuPy/cuBLAS), square float32 and float64.

    Their lines in the dashboard show whether a change over time is ours or the machine's.
    """

    params = [["numpy", "cupy"], [256, 1024, 2048, 4096], ["float32", "float64"]]
    param_names = ["library", "n", "dtype"]
    version = "1"
    rounds = 1
    repeat = (1, 7, 8.0)
    sample_time = 0.02

    def setup(self, library, n, dtype):
        a = random_array((n, n), dtype, seed=1)
        b = random_array((n, n), dtype, seed=2)
        if library == "numpy":
            self.run = lambda: np.matmul(a, b)
        else:
            try:
                import cupy

                cupy.cuda.runtime.getDeviceCount()
            except Exception as exc:
                raise NotImplementedError(f"CuPy unavailable: {exc}") from None
            da, db = cupy.asarray(a), cupy.asarray(b)

            def run():
                cupy.matmul(da, db)
                cupy.cuda.get_current_stream().synchronize()

            self.run = run
        self.dims = (n, n, n, 1)
        self.run()

    def time_matmul(self, library, n, dtype):
        self.run()

    def track_gflops(self, library, n, dtype):
        return gflops(*self.dims, measure(self.run))

    track_gflops.unit = "GFLOP/s"
