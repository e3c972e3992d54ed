"""The CPU backend's team sizing with and without the machine's other processes counted, A/B in one process.

    python scripts/cpu_neighbours_ab.py 200:float64:4,512:float32:6,2048:float64:20   # N:dtype:seconds

Each round calls both variants once, in a random order (polymm.matmul, whole calls, wall clock);
"process only" monkeypatches the count of other processes' running threads to zero (the sizing
before 2026-11-27). Prints best and median per variant; run it while other work loads the machine.
"""
import sys, time, random, statistics, numpy as np, numba, polymm
from polymm_numba import neighbours
orig = neighbours._running_elsewhere
rng = np.random.default_rng(0)
sizes = [(int(s.split(':')[0]), s.split(':')[1], float(s.split(':')[2])) for s in sys.argv[1].split(',')]
for n, dt, sec in sizes:
    a=rng.standard_normal((n,n)).astype(dt); b=rng.standard_normal((n,n)).astype(dt)
    def new(): neighbours._running_elsewhere = orig; polymm.matmul(a,b)
    def old(): neighbours._running_elsewhere = lambda own, machine=None: 0; polymm.matmul(a,b)
    calls={'machine-aware': new, 'process only': old}
    for f in calls.values(): f()
    t={k:[] for k in calls}; keys=list(calls); end=time.perf_counter()+sec
    while time.perf_counter()<end:
        random.shuffle(keys)
        for k in keys:
            s=time.perf_counter(); calls[k](); t[k].append(time.perf_counter()-s)
    print(f"{n} {dt} ({len(t['process only'])} rounds) load {open('/proc/loadavg').read().split()[0]}: " + '  '.join(f"{k}: best {min(v)*1e3:.3f} med {statistics.median(v)*1e3:.3f}" for k,v in t.items()), flush=True)
