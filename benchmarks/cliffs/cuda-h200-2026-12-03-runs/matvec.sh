# The work-group matvec reading A's rows in 16-byte runs (matvec.run_bytes = 16, matvec.c's
# PM_MV_ROWS) against element by element (run_bytes = 0, as before) on the H200: every dtype's
# matrix-vector cells, on, off, on, off; then the matvec device tests (the new run test, every
# planner path), with the database as committed.
set -u
r=$OUT/r; mkdir -p $r
tag=2026-12-03-$(cat .device/tag.txt)
cells='grid-matvec,grid-fast-matvec,grid-tf32-matvec,grid-tf32x3-matvec,n4-2048'
flip() { python3 scripts/database_set.py any matvec run_bytes $1; }
cp polymm/kernels/devices.json /tmp/devices.json
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv > $r/gpu.txt 2>&1
for round in 1 2; do
  for mode in on off; do
    flip $([ $mode = on ] && echo 16 || echo 0)
    ( time timeout 75 polymm bench --suite cliffs --backend cuda --budget 0.6 --cases "$cells" --json $r/cuda-h200-matvec-runs-$mode$round-$tag.json ) > $r/bench-$mode$round.log 2>&1
  done
done
cp /tmp/devices.json polymm/kernels/devices.json
( time timeout 150 python3 -m pytest -q -n 16 -p no:cacheprovider backends/polymm-cuda/tests/test_device.py -k "matvec_runs or every_planner_path or (test_matmul and auto)" ) > $r/cuda-h200-devtests-matvec-$tag.log 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
