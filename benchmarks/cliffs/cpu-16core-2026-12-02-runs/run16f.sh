set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-02-$(cat .device/tag.txt)
uptime > $r/uptime.txt
( time timeout 60 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
sleep 30; uptime >> $r/uptime.txt
( time timeout 150 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-$tag.json --plot $r/cpu-16core-$tag.png ) > $r/bench.log 2>&1
uptime >> $r/uptime.txt
( time POLYMM_TUNING=$r/tuning-16core.json timeout 80 polymm tune --backend cpu ) > $r/cpu-16core-tune-$tag.log 2>&1
sleep 30; uptime >> $r/uptime.txt
( time POLYMM_TUNING=$r/tuning-16core.json timeout 150 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-tuned-$tag.json --plot $r/cpu-16core-tuned-$tag.png ) > $r/bench-tuned.log 2>&1
uptime >> $r/uptime.txt
( time timeout 150 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-again-$tag.json ) > $r/bench-again.log 2>&1
uptime >> $r/uptime.txt
cd $OUT && tar czf r.tgz r && rm -rf r
