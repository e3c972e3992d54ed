# The first H100 lent since 2026-11-28: complex64's device tests, the grid's complex64 cells with B
# read in place by the GPU tiles (realify.in_place on) and realified first (off), alternating, then
# the first half of the whole grid (squares, tall, wide, deep K, batches) as the database stands
set -u
r=$OUT
tag=2026-12-02-$(cat .device/tag.txt)
cells='square-2048,square-4096,grid-square,grid-square-odd,grid-square-4mod8,grid-tall,grid-wide,grid-deep-k,grid-batch-*,grid-broadcast,grid-matvec,grid-vecmat,grid-outer,grid-view-*'
flip() { python3 scripts/database_set.py any realify in_place $([ $1 = on ] && echo true || echo false); }
cp polymm/kernels/devices.json /tmp/devices.json
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv > $r/gpu.txt 2>&1
( time timeout 60 python3 -m pytest -q -x -n 8 -p no:cacheprovider backends/polymm-cuda/tests/test_device.py -k "complex64" ) > $r/test-device-c64-$tag.log 2>&1
for mode in on off; do
  flip $mode
  ( time timeout 70 polymm bench --suite cliffs --backend cuda --cases "$cells" --dtype complex64 --json $r/cuda-h100-c64-inplace-$mode-$tag.json ) > $r/bench-c64-$mode.log 2>&1
done
cp /tmp/devices.json polymm/kernels/devices.json
( time timeout ${GRID_S:-330} polymm bench --suite cliffs --backend cuda --budget 0.5 --cases '*square*,*tall,*wide,*deep-k,*batch-*' --json $r/cuda-h100-gridA-$tag.json --plot $r/cuda-h100-gridA-$tag.png ) > $r/bench-gridA.log 2>&1
