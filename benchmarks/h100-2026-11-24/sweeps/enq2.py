import time
import numpy as np
import cupy as cp
import polymm

be = polymm.get_backend("cuda")


def per(f, n=2000):
    for _ in range(50):
        f()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    t = (time.perf_counter() - t0) / n * 1e6
    cp.cuda.Device().synchronize()
    return t


print("cp.empty 8MB", per(lambda: cp.empty(8 << 20, dtype=np.uint8)))
print("cp.empty 64KB", per(lambda: cp.empty(64 << 10, dtype=np.uint8)))
for name, s1, s2 in (
    ("deepk128", (128, 65536), (65536, 128)),
    ("gevm", (4096,), (4096, 4096)),
    ("sq128", (128, 128), (128, 128)),
    ("sq1024", (1024, 1024), (1024, 1024)),
):
    a = cp.random.standard_normal(s1, dtype=cp.float32)
    b = cp.random.standard_normal(s2, dtype=cp.float32)
    c = polymm.matmul(a, b, backend="cuda")
    print(name, "plan", be.last_plan.reason, "splits", be.last_plan.splits)
    print(
        f"  whole call enqueue {per(lambda: polymm.matmul(a, b, backend='cuda'), 300):.1f} us; cupy {per(lambda: cp.matmul(a, b), 300):.1f} us"
    )
    key = next(k for k in be._plans if k[3] == ((1,) + tuple(s1) if len(s1) == 2 else (1, 1, s1[0])))
    steps, scratch, a_off, b_off, made = be._plans[key]
    print("  scratch", scratch, "steps", len(steps), [type(s.prepared).__name__ for s in steps])
    bufs = [np.uint64(a.data.ptr), np.uint64(b.data.ptr), np.uint64(c.data.ptr)] + [
        np.uint64(cp.empty(n, np.uint8).data.ptr) for n in scratch
    ]
    stream = cp.cuda.get_current_stream().ptr
    for i, s in enumerate(steps):
        print(f"  step {i} launch only {per(lambda: s.prepared(bufs, stream, ()), 300):.1f} us")
