# session 33 on the 16-core GPU host: the whole float32/float64 CPU suite at the session's code
# under the program ratio (ce6fa4a: what our calls add to NumPy's next one is charged to us), the
# database as committed (the pool passive, spinners idled for long launches where the process may)
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/program16.sh
set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-04-$(cat .device/tag.txt)
{ uptime; id -u; ulimit -e; lscpu | grep -E "Model name|^Model:|^CPU\(s\)"; } > $r/uptime-cpu.txt 2>&1
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
( time timeout 170 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-$tag.json --plot $r/cpu-16core-$tag.png ) > $r/bench-cpu.log 2>&1
uptime >> $r/uptime-cpu.txt
tail -3 $r/bench-cpu.log
