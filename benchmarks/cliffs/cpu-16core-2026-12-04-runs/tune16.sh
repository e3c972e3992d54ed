# session 31 on the 16-core GPU host, second call: the broadcast A/B (groups-ab.py), then the whole
# float32/float64 suite untuned (as every earlier 16-core record), polymm tune --backend cpu (timed),
# and the suite again with the tuning in place (its teams and blockings read by the next process)
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/tune16.sh
set -u
d=benchmarks/cliffs/cpu-16core-2026-12-04-runs
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
uptime > $r/uptime.txt
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
timeout 60 python $d/groups-ab.py > $r/groups-ab.log 2>&1
( time timeout 140 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-untuned-$tag.json ) > $r/bench-untuned.log 2>&1
uptime >> $r/uptime.txt
( time timeout 90 polymm tune --backend cpu ) > $r/tune.log 2>&1
( time timeout 140 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-tuned-$tag.json ) > $r/bench-tuned.log 2>&1
uptime >> $r/uptime.txt
cd $OUT && tar czf r.tgz r && rm -rf r
