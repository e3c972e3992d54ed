# session 31 on the 16-core GPU host, fourth call: a new result's first touch alone (faults16.py:
# the third call's run, beside NumPy, ran polymm on one thread throughout), and the team beside
# NumPy's spinning threads (scripts/cpu_team_ab.py: counted, spinners shared or half, every thread)
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/faults16b.sh
set -u
d=benchmarks/cliffs/cpu-16core-2026-12-04-runs
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
uptime > $r/host.txt
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
( time timeout 150 python $d/faults16.py outer-k32,square-4096,square-2048,square-1024,broadcast-64x64x32 ) > $r/faults-alone.log 2>&1
( time timeout 120 python scripts/cpu_team_ab.py 1024x1024x1024:float32:6,256x256x256:float32:4,4096x32x4096:float32:6,2048x2048x2048:float64:8 ) > $r/team-ab.log 2>&1
uptime >> $r/host.txt
cd $OUT && tar czf r.tgz r && rm -rf r
