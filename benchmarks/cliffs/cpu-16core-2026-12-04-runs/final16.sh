# session 31 on the 16-core GPU host, fifth call: the broadcast A/B (groups-ab.py), the team beside
# NumPy's spinners at 512^3 and 768^3 (cpu_team_ab.py), then the whole float32/float64 suite at the
# session's code (each interleaved call right after one of NumPy's: timing.alternating as fixed
# this session) with cpu-threads.share_spin_seconds and cpu-slabs.rows_first_k as in the database
# and off (1000 s; 0), back to back
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/final16.sh
set -u
d=benchmarks/cliffs/cpu-16core-2026-12-04-runs
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
cp polymm/kernels/devices.json /tmp/devices.json
uptime > $r/uptime.txt
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
timeout 60 python $d/groups-ab.py > $r/groups-ab.log 2>&1
( time timeout 60 python scripts/cpu_team_ab.py 512x512x512:float32:4,768x768x768:float32:4,1024x1024x1024:float64:5 ) > $r/team-ab.log 2>&1
for w in on off; do
  cp /tmp/devices.json polymm/kernels/devices.json
  if [ $w = off ]; then
    python scripts/database_set.py "host CPU" cpu-threads share_spin_seconds 1000
    python scripts/database_set.py "host CPU" cpu-slabs rows_first_k 0
  fi
  ( time timeout 140 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-share-$w-$tag.json ) > $r/bench-$w.log 2>&1
  uptime >> $r/uptime.txt
done
cp /tmp/devices.json polymm/kernels/devices.json
cd $OUT && tar czf r.tgz r && rm -rf r
