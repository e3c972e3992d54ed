# session 30 on the 16-core GPU host, third call: the AVX-512 blockings' kc (B's micro-panel of
# kc x nr elements: 64 KiB at kc 256, more than the 48 KiB L1d) against kc 128, on 16 threads and
# on one, in one process each (scripts/cpu_blockings.py: every candidate each round, random order)
#   . .device/setup.sh; bash benchmarks/cliffs/cpu-16core-2026-12-04-runs/blockings16.sh
set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 NUMBA_NUM_THREADS=16
uptime > $r/uptime.txt
( lscpu | head -30 ) > $r/topology.txt 2>&1
( time timeout 70 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
f32=6,64,126,2048,256:6,64,126,2048,128:6,64,252,2048,128
f64=6,32,96,2048,256:6,32,96,2048,128:6,32,192,2048,128
for t in 16 1; do
  for dt in float32 float64; do
    b=$f32; [ $dt = float64 ] && b=$f64
    sizes=1024,2048; [ $t = 1 ] && sizes=1024
    echo "== threads $t $dt" >> $r/blockings.log
    OPENBLAS_NUM_THREADS=$t timeout 100 python scripts/cpu_blockings.py --threads $t --dtype $dt --sizes $sizes --blockings $b --seconds 20 >> $r/blockings.log 2>&1
    uptime >> $r/uptime.txt
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
