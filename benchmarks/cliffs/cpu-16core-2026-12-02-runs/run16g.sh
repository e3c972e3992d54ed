set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-02-$(cat .device/tag.txt)
uptime > $r/uptime.txt
( time timeout 60 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
sleep 10; uptime >> $r/uptime.txt
( time timeout 60 python benchmarks/cliffs/cpu-16core-2026-12-02-runs/parts_ab.py ) > $r/cpu-16core-splitk-parts-$tag.log 2>&1
( time timeout 60 python benchmarks/cliffs/cpu-16core-2026-12-02-runs/parts_ab.py ) >> $r/cpu-16core-splitk-parts-$tag.log 2>&1
uptime >> $r/uptime.txt
cd $OUT && tar czf r.tgz r && rm -rf r
