"""What holds the float32 SIMT kernel and the complex128 tensor-core kernel below cuBLAS: the
products for Nsight Compute (``ncu``) and, in mode ``power``, the SM clock and board power while
each runs back to back for about three seconds (``nvidia-smi`` sampling every 50 ms).

    . .device/setup.sh && ncu ... python .device/probe38.py f32|z
    . .device/setup.sh && python .device/probe38.py power OUT.csv
"""

import subprocess
import sys
import time

import cupy as cp

import polymm


def operands(what):
    if what == "f32":
        n = 4096
        a = cp.random.standard_normal((n, n), dtype=cp.float32)
        b = cp.random.standard_normal((n, n), dtype=cp.float32)
    else:
        n = 1024
        a = cp.random.standard_normal((n, n)) + 1j * cp.random.standard_normal((n, n))
        b = cp.random.standard_normal((n, n)) + 1j * cp.random.standard_normal((n, n))
    return a, b


def run(what, reps=2):
    a, b = operands(what)
    cp.matmul(a, b)
    polymm.matmul(a, b)
    cp.cuda.Device().synchronize()
    for _ in range(reps):
        polymm.matmul(a, b)
        cp.matmul(a, b)
    cp.cuda.Device().synchronize()


def power(path):
    smi = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active",
         "--format=csv,noheader", "-lms", "50"],
        stdout=open(path, "w"),
    )  # fmt: skip
    marks = []
    try:
        for what in ("f32", "z"):
            a, b = operands(what)
            for name, f in (("polymm", lambda: polymm.matmul(a, b)), ("cublas", lambda: cp.matmul(a, b))) * 2:
                f()
                cp.cuda.Device().synchronize()
                t0 = time.time()
                count = 0
                while time.time() - t0 < 3.0:
                    for _ in range(10):
                        f()
                    cp.cuda.Device().synchronize()
                    count += 10
                t1 = time.time()
                marks.append((what, name, t0, t1, (t1 - t0) / count * 1e6))
                time.sleep(0.5)
    finally:
        smi.terminate()
    for m in marks:
        print("%s %s %.3f %.3f %.1f us/call" % m)


if __name__ == "__main__":
    if sys.argv[1] == "power":
        power(sys.argv[2])
    else:
        run(sys.argv[1])
