set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
lscpu > $r/lscpu.txt; uptime > $r/uptime.txt
tag=2026-12-02-0527841
( time timeout 60 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
uptime >> $r/uptime.txt
( time timeout 150 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-$tag.json --plot $r/cpu-16core-$tag.png ) > $r/bench.log 2>&1
uptime >> $r/uptime.txt
( time POLYMM_TUNING=$r/tuning-16core.json timeout 80 polymm tune --backend cpu ) > $r/cpu-16core-tune-$tag.log 2>&1
( time POLYMM_TUNING=$r/tuning-16core.json timeout 150 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-tuned-$tag.json --plot $r/cpu-16core-tuned-$tag.png ) > $r/bench-tuned.log 2>&1
uptime >> $r/uptime.txt
( time timeout 100 python scripts/cpu_blockings.py --threads 16 --dtype float32 --sizes 1536,2048,4096 --blockings 8,32,128,2048,256:6,64,126,2048,256:14,32,224,2048,256 --seconds 25 ) > $r/cpu-blockings-16core-$tag.log 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
