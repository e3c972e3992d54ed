# session 30 on the 16-core GPU host: the passive pool spinning cpu-threads.pool_spin_seconds
# after each launch, against sleeping at once (0), in the launch cost, the scaling and the suite
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/spin.sh
set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
cp polymm/kernels/devices.json /tmp/devices.json
spin() { cp /tmp/devices.json polymm/kernels/devices.json; python scripts/database_set.py "host CPU" cpu-threads pool_spin_seconds "$1"; }
uptime > $r/uptime.txt
( lscpu | head -20; nproc ) > $r/topology.txt 2>&1
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
for s in 0 2e-05 5e-05 0.0002; do
  spin $s
  echo "== pool_spin_seconds $s" >> $r/scaling.log
  polymm info 2>&1 | grep -i "threads" >> $r/scaling.log
  timeout 60 python scripts/cpu_scaling.py --sizes 256,512,1024 --dtypes float32 --threads 16 --budget 0.3 --most-seconds 0.2 --json $r/cpu-scaling-16core-spin$s-$tag.json >> $r/scaling.log 2>&1
done
uptime >> $r/uptime.txt
for s in 5e-05 0; do
  spin $s
  ( time timeout 170 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-spin$s-$tag.json ) > $r/bench-spin$s.log 2>&1
  uptime >> $r/uptime.txt
done
cp /tmp/devices.json polymm/kernels/devices.json
cd $OUT && tar czf r.tgz r && rm -rf r
