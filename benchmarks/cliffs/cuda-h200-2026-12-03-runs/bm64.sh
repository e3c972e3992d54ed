# The wgmma kernel's 64-row tiles (WG_BM 64: each consumer warp group its own tiles and ring) on
# the H200: the tensor-core device tests, the cells of the tensor-core dtypes with 64-row
# products and controls, with the 64-row tiles (new) and without (old: polymm_cuda.wgmma's
# SHORT_BM set to 0, every product on 128-row tiles as before), twice each way, alternating; then
# polymm fuzz on those dtypes, half of it with wgmma preferred wherever it offers.
set -u
r=$OUT/r; mkdir -p $r
tag=2026-12-03-$(cat .device/tag.txt)
cells='grid-fast-batch-small,grid-fast-batch-tiny,grid-fast-batch-mid,tc-square-2048,grid-batch-small'
host=backends/polymm-cuda/polymm_cuda/wgmma.py
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv > $r/gpu.txt 2>&1
( time timeout 200 python3 -m pytest -q -n 16 -p no:cacheprovider backends/polymm-cuda/tests/test_device.py -k "wgmma or (test_matmul and (float16 or bfloat16 or int8 or uint8)) or (every_planner_path and (float16 or bfloat16 or int8))" ) > $r/cuda-h200-devtests-$tag.log 2>&1
cp $host /tmp/wgmma.py
for round in 1 2; do
  for mode in new old; do
    cp /tmp/wgmma.py $host
    [ $mode = old ] && sed -i 's/^SHORT_BM = 64$/SHORT_BM = 0/' $host
    ( time timeout 60 polymm bench --suite cliffs --backend cuda --budget 0.6 --cases "$cells" --dtype float16,bfloat16,int8,uint8 --json $r/cuda-h200-bm64-$mode$round-$tag.json ) > $r/bench-$mode$round.log 2>&1
  done
done
cp /tmp/wgmma.py $host
for s in 0 1 2 3; do
  prefer=""; [ $s -ge 2 ] && prefer=wgmma
  env ${prefer:+POLYMM_PREFER=$prefer} timeout 75 polymm fuzz --backend cuda --cases 10000 --seed 2026126$s --dtypes float16,bfloat16,int8,uint8 --time-budget 55 --json > $r/cuda-h200-$tag-seed2026126$s.json 2> $r/fuzz-$s.log &
done
wait
cd $OUT && tar czf r.tgz r && rm -rf r
