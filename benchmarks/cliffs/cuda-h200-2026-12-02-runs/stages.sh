# regblock with two stages of local tiles on the H200: the tuner's candidates at 4096 (stored in a
# tuning file) and 2048, then the grid's float32 and complex64 cells without and with that file
set -u
r=$OUT/r; mkdir -p $r
tag=2026-12-02-$(cat .device/tag.txt)
cells='square-2048,square-4096,grid-square,grid-square-odd,grid-square-4mod8,grid-tall,grid-wide,grid-deep-k,grid-batch-*,grid-broadcast,grid-matvec,grid-vecmat,grid-outer,grid-view-*'
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv > $r/gpu.txt 2>&1
( time POLYMM_TUNING=$r/tuning-h200.json timeout 150 python -m polymm.tools.tune --backend cuda --size 4096 --dtype float32 ) > $r/tune-f32-4096-$tag.log 2>&1
( time timeout 90 python -m polymm.tools.tune --backend cuda --size 2048 --dtype float32 --dry-run ) > $r/tune-f32-2048-$tag.log 2>&1
( time timeout 120 polymm bench --suite cliffs --backend cuda --cases "$cells" --dtype float32,complex64 --json $r/cuda-h200-simt-$tag.json ) > $r/bench.log 2>&1
( time POLYMM_TUNING=$r/tuning-h200.json timeout 120 polymm bench --suite cliffs --backend cuda --cases "$cells" --dtype float32,complex64 --json $r/cuda-h200-simt-tuned-$tag.json ) > $r/bench-tuned.log 2>&1
( time timeout 40 bash benchmarks/cliffs/cpu-16core-2026-12-02-runs/percore.sh ) > $r/percore.log 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
