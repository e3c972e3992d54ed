# session 31 on the 16-core GPU host, first call: the kernel-bound cells of cpu-16core-2026-12-04-a0b135f
# (outer-k32, gemv-4096, the 256 class, the 1024 views, square-2048, the 64 x 64 broadcast) at 4 to
# 16 threads, polymm into out= and into a new result, NumPy alone (scripts/cpu_scaling.py --cases)
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/paths16.sh
set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
{ uptime; lscpu; cat /sys/kernel/mm/transparent_hugepage/enabled; uname -r; } > $r/host.txt 2>&1
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
( time timeout 400 python scripts/cpu_scaling.py --threads 4,8,12,16 --budget 0.4 --quiet-seconds 0.2 \
    --cases outer-k32,gemv-4096,gevm-4096,square-256,square-255,square-128,transposed-1024,fortran-1024,square-2048,broadcast-64x64x32 \
    --json $r/cpu-paths-16core-$tag.json ) > $r/paths.log 2>&1
uptime >> $r/host.txt
cd $OUT && tar czf r.tgz r && rm -rf r
