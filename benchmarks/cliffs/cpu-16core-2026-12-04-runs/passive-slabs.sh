# session 30 on the 16-core GPU host, fifth call: the whole float32/float64 suite with
# cpu-slabs.passive_work_per_thread as in the database (the slab grid for products with A's
# rows contiguous up to it per thread, on the passive pool) and off (0)
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/passive-slabs.sh
set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
cp polymm/kernels/devices.json /tmp/devices.json
uptime > $r/uptime.txt
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
for w in on off; do
  cp /tmp/devices.json polymm/kernels/devices.json
  [ $w = off ] && python scripts/database_set.py "host CPU" cpu-slabs passive_work_per_thread 0
  ( time timeout 130 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-passive-slabs-$w-$tag.json ) > $r/bench-$w.log 2>&1
  uptime >> $r/uptime.txt
done
cp /tmp/devices.json polymm/kernels/devices.json
cd $OUT && tar czf r.tgz r && rm -rf r
