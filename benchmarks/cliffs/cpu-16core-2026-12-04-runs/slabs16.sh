# session 30 on the 16-core GPU host, fourth call: the 1024-class cells (kernel-limited at 16
# threads) on auto_parallel (two launches per K block, shared panels of B) against auto_slabs
# (one launch, each task its own panels): cpu-slabs.work_per_thread 16384000 against 134217728,
# alternating, twice each
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/slabs16.sh
set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
cp polymm/kernels/devices.json /tmp/devices.json
slabs() { cp /tmp/devices.json polymm/kernels/devices.json; python scripts/database_set.py "host CPU" cpu-slabs work_per_thread "$1"; }
cases='square-1000,square-1024,transposed-1024,fortran-1024,negative-1024,step-1024,square-2048,square-512'
uptime > $r/uptime.txt
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
for run in 1 2; do
  for w in 16384000 134217728; do
    slabs $w
    echo "== work_per_thread $w run $run" >> $r/explain.log
    polymm explain 1024x1024 1024x1024 --dtype float32 --backend cpu 2>&1 | head -3 >> $r/explain.log
    ( time timeout 100 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --cases "$cases" --json $r/cpu-16core-slabs$w-$run-$tag.json ) > $r/bench-slabs$w-$run.log 2>&1
    uptime >> $r/uptime.txt
  done
done
cp /tmp/devices.json polymm/kernels/devices.json
cd $OUT && tar czf r.tgz r && rm -rf r
