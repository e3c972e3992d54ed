# session 30 on the 16-core GPU host, second call: the whole float32/float64 suite with the passive
# pool sleeping at once (0) and spinning 10 us first (1e-05), alternating, twice each
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/spin2.sh
set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
cp polymm/kernels/devices.json /tmp/devices.json
spin() { cp /tmp/devices.json polymm/kernels/devices.json; python scripts/database_set.py "host CPU" cpu-threads pool_spin_seconds "$1"; }
uptime > $r/uptime.txt
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
for run in 1 2; do
  for s in 0 1e-05; do
    spin $s
    ( time timeout 120 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-spin$s-$run-$tag.json ) > $r/bench-spin$s-$run.log 2>&1
    uptime >> $r/uptime.txt
  done
done
cp /tmp/devices.json polymm/kernels/devices.json
cd $OUT && tar czf r.tgz r && rm -rf r
