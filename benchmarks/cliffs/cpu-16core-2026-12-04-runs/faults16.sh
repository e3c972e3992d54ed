# session 31 on the 16-core GPU host, third call: a new result's first touch (faults16.py), and
# the kernel-bound cells at 4-16 threads on the pool as polymm starts it (cpu_scaling.py --cases;
# the first call's probe, paths16.sh, had started a spinning pool before polymm could)
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/faults16.sh
set -u
d=benchmarks/cliffs/cpu-16core-2026-12-04-runs
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
{ uptime; cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; } > $r/host.txt 2>&1
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
( time timeout 200 python $d/faults16.py ) > $r/faults.log 2>&1
( time timeout 200 python scripts/cpu_scaling.py --threads 4,8,12,16 --budget 0.3 --quiet-seconds 0.2 \
    --cases outer-k32,square-256,square-128,transposed-1024,fortran-1024,gemv-4096 \
    --json $r/cpu-paths-16core-passive-$tag.json ) > $r/paths.log 2>&1
uptime >> $r/host.txt
cd $OUT && tar czf r.tgz r && rm -rf r
