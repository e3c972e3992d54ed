# complex64 on the H200 with B read in place by the GPU tiles (realify.in_place) against B realified
# first, in one run, alternating: the device tests of complex64, then the grid's complex64 cells
# each way; then the 16-core host core by core, and 16 threads against 15
set -u
r=$OUT
tag=2026-12-02-$(cat .device/tag.txt)
cells='square-2048,square-4096,grid-square,grid-square-odd,grid-square-4mod8,grid-tall,grid-wide,grid-deep-k,grid-batch-*,grid-broadcast,grid-matvec,grid-vecmat,grid-outer,grid-view-*'
flip() { python3 scripts/database_set.py any realify in_place $([ $1 = on ] && echo true || echo false); }
( time timeout 50 python3 -m pytest -q -x -n 8 -p no:cacheprovider backends/polymm-cuda/tests/test_device.py -k "complex64" ) > $r/test-device-$tag.log 2>&1
for round in 1; do
  for mode in on off; do
    flip $mode
    ( time timeout 60 polymm bench --suite cliffs --backend cuda --cases "$cells" --dtype complex64 --json $r/cuda-h200-c64-inplace-$mode-$round-$tag.json ) > $r/bench-$mode-$round.log 2>&1
  done
done
flip on
export OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=16 NUMBA_NUM_THREADS=16
( time timeout 40 bash benchmarks/cliffs/cpu-16core-2026-12-02-runs/percore.sh ) > $r/cpu-16core-percore-$tag.log 2>&1
( time timeout 60 python3 benchmarks/cliffs/cpu-16core-2026-12-02-runs/fifteen.py ) > $r/cpu-16core-fifteen-$tag.log 2>&1
