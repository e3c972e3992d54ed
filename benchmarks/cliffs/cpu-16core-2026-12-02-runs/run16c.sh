set -u
r=$OUT/r; mkdir -p $r
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
tag=2026-12-02-beeba36
uptime > $r/uptime.txt
( time timeout 60 polymm warmup --dtypes float32,float64 --jobs 16 ) > $r/warmup.log 2>&1
( time timeout 100 python scripts/cpu_team_ab.py 256x256x256:float32:4,256x256x256:float64:4,512x512x512:float32:4,1024x1024x1024:float32:5,1000x1000x1000:float64:5,4096x4096x1:float32:4,1x4096x4096:float32:4,2048x2048x4:float32:3 ) > $r/cpu-16core-team-ab-$tag.log 2>&1
uptime >> $r/uptime.txt
( time timeout 150 polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json $r/cpu-16core-$tag.json --plot $r/cpu-16core-$tag.png ) > $r/bench.log 2>&1
uptime >> $r/uptime.txt
( time timeout 150 python - $r/cpu-16core-every-thread-$tag.json <<'PY'
import sys
from polymm_numba import neighbours
neighbours.team_size = lambda limit, lock, outlasts_spin=False: max(1, limit)  # every thread, spinners or not
from polymm.tools.cli import main
sys.exit(main(["bench", "--suite", "cliffs", "--backend", "cpu", "--dtype", "float32,float64", "--json", sys.argv[1]]))
PY
) > $r/bench-every.log 2>&1
uptime >> $r/uptime.txt
cd $OUT && tar czf r.tgz r && rm -rf r
