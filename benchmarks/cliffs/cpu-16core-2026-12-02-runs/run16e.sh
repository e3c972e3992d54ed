set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-02-$(cat .device/tag.txt)
uptime > $r/uptime.txt
( time timeout 60 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
sleep 15; uptime >> $r/uptime.txt
( time POLYMM_TUNING=$r/tuning-16core.json timeout 80 polymm tune --backend cpu ) > $r/cpu-16core-tune-$tag.log 2>&1
uptime >> $r/uptime.txt
( time timeout 150 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-$tag.json --plot $r/cpu-16core-$tag.png ) > $r/bench.log 2>&1
uptime >> $r/uptime.txt
( time POLYMM_TUNING=$r/tuning-16core.json timeout 150 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-tuned-$tag.json --plot $r/cpu-16core-tuned-$tag.png ) > $r/bench-tuned.log 2>&1
uptime >> $r/uptime.txt
# the matrix-vector cells on 1 to 16 threads, each side alone (after OpenBLAS's spin has ended)
( time timeout 40 python - <<'PY'
import time, numpy as np, numba, polymm
from threadpoolctl import threadpool_limits
rng = np.random.default_rng(0)
for dt in ("float32", "float64"):
    a = rng.standard_normal((4096, 4096)).astype(dt); x = rng.standard_normal(4096).astype(dt)
    for t in (1, 2, 4, 8, 16):
        numba.set_num_threads(t)
        with threadpool_limits(t):
            best = {}
            for name, f in (("polymm", lambda: polymm.matmul(a, x)), ("numpy", lambda: a @ x), ("polymm gevm", lambda: polymm.matmul(x, a)), ("numpy gevm", lambda: x @ a)):
                f(); time.sleep(0.3); ts = []
                end = time.perf_counter() + 0.4
                while time.perf_counter() < end:
                    s = time.perf_counter(); f(); ts.append(time.perf_counter() - s)
                best[name] = min(ts) * 1e3
        print(dt, f"{t:2d} threads", "  ".join(f"{k} {v:.3f} ms" for k, v in best.items()), flush=True)
PY
) > $r/cpu-16core-gemv-threads-$tag.log 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
