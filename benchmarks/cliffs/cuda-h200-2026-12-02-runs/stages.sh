# The H200 after regblock's two stages and the in-place real B: complex64 device tests, the tuner's
# candidates at 4096 (stored in a tuning file), then the grid's float32 and complex64 cells
# without and with that file; then the 16-core host's cost of waking its CPU pool
set -u
r=$OUT/r; mkdir -p $r
tag=2026-12-02-$(cat .device/tag.txt)
cells='square-2048,square-4096,grid-square,grid-square-odd,grid-square-4mod8,grid-tall,grid-wide,grid-deep-k,grid-batch-*,grid-broadcast,grid-matvec,grid-vecmat,grid-outer,grid-view-*'
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv > $r/gpu.txt 2>&1
( time timeout 100 python3 -m pytest -q -x -n 8 -p no:cacheprovider backends/polymm-cuda/tests/test_device.py -k "complex64 or float32" ) > $r/test-device-$tag.log 2>&1
( time POLYMM_TUNING=$r/tuning-h200.json timeout 100 python3 -m polymm.tools.tune --backend cuda --size 4096 --dtype float32 ) > $r/tune-f32-4096-$tag.log 2>&1
( time timeout 110 polymm bench --suite cliffs --backend cuda --cases "$cells" --dtype float32,complex64 --json $r/cuda-h200-simt-$tag.json ) > $r/bench.log 2>&1
( time POLYMM_TUNING=$r/tuning-h200.json timeout 110 polymm bench --suite cliffs --backend cuda --cases "$cells" --dtype float32,complex64 --json $r/cuda-h200-simt-tuned-$tag.json ) > $r/bench-tuned.log 2>&1
( time OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16 timeout 60 python3 benchmarks/cliffs/cpu-16core-2026-12-02-runs/wake.py ) > $r/cpu-16core-wake-$tag.log 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
