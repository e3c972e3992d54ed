# session 31 on the 16-core GPU host, sixth call: the team beside NumPy's spinners with them idled
# for our launch (cpu_team_ab.py), then the whole float32/float64 suite at the session's last code
# with cpu-threads.yield_spinners as in the database (on) and off, back to back
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/yield16.sh
set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
cp polymm/kernels/devices.json /tmp/devices.json
{ uptime; id -u; ulimit -e; } > $r/uptime.txt 2>&1
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
( time timeout 60 python scripts/cpu_team_ab.py 256x256x256:float32:3,512x512x512:float32:3,1024x1024x1024:float32:4,4096x32x4096:float32:4 ) > $r/team-ab.log 2>&1
for w in on off; do
  cp /tmp/devices.json polymm/kernels/devices.json
  [ $w = off ] && python scripts/database_set.py "host CPU" cpu-threads yield_spinners false
  ( time timeout 140 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-yield-$w-$tag.json --plot $r/cpu-16core-yield-$w-$tag.png ) > $r/bench-$w.log 2>&1
  uptime >> $r/uptime.txt
done
cp /tmp/devices.json polymm/kernels/devices.json
cd $OUT && tar czf r.tgz r && rm -rf r
