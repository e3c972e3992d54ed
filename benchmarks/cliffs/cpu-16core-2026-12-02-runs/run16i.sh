# session 26's first look at the 16-core GPU host: topology, scaling of the current code, the suite
set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-02-$(cat .device/tag.txt)
uptime > $r/uptime.txt
( lscpu; lscpu -e; grep . /sys/devices/system/cpu/cpu*/topology/thread_siblings_list; nproc; cat /proc/meminfo | head -3 ) > $r/topology.txt 2>&1
( time timeout 60 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
sleep 10; uptime >> $r/uptime.txt
( time timeout 240 python scripts/cpu_scaling.py --sizes 256,512,1024,2048,4096 --dtypes float32,float64 --budget 0.3 --most-seconds 0.6 --json $r/cpu-scaling-16core-$tag.json ) > $r/scaling.log 2>&1
uptime >> $r/uptime.txt
( time timeout 150 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-$tag.json --plot $r/cpu-16core-$tag.png ) > $r/bench.log 2>&1
uptime >> $r/uptime.txt
cd $OUT && tar czf r.tgz r && rm -rf r
