"""What a parallel launch costs when the pool's threads have gone to sleep (passive waiting, as
polymm's OpenMP pool waits on many cores): an empty launch and a 256^3 float32 product, back to
back, after 2 ms of sleep, and right after a NumPy product, on 1 to 16 of Numba's threads."""

import statistics
import time

import numba
import numpy as np

import polymm
from polymm_numba import neighbours


@numba.njit(parallel=True, cache=False)
def empty(out):
    for i in numba.prange(out.shape[0]):
        out[i] += 1.0


def median_us(call, before=None, calls=200):
    samples = []
    for _ in range(calls):
        if before is not None:
            before()
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6, min(samples) * 1e6


rng = np.random.default_rng(0)
a = rng.standard_normal((256, 256)).astype(np.float32)
polymm.matmul(a, a)
print("passive pool:", neighbours.PASSIVE, "layer:", numba.threading_layer())
for t in [t for t in (1, 2, 4, 8, 16) if t <= numba.config.NUMBA_NUM_THREADS]:
    numba.set_num_threads(t)
    out = np.zeros(t)
    empty(out)
    polymm.matmul(a, a)
    rows = {
        "empty back to back": median_us(lambda: empty(out)),
        "empty after 2 ms sleep": median_us(lambda: empty(out), lambda: time.sleep(0.002)),
        "256^3 back to back": median_us(lambda: polymm.matmul(a, a)),
        "256^3 after 2 ms sleep": median_us(lambda: polymm.matmul(a, a), lambda: time.sleep(0.002)),
        "256^3 after NumPy's": median_us(lambda: polymm.matmul(a, a), lambda: a @ a),
    }
    for name, (med, best) in rows.items():
        print(f"t={t:2d} {name:24s} median {med:8.1f} us, best {best:8.1f} us")
