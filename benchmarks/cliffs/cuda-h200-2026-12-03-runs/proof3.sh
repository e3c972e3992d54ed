# The H200 after the last kernel change (adb90f4's 64-row wgmma tiles): the CUDA device-test
# folder whole (TF32 and byte planes included), the conformance suite on cuda and on NVIDIA
# OpenCL, then polymm fuzz (eight processes side by side, seeds 20261260-67, 100,000 cases);
# everything packed into one archive under $OUT.
set -u
r=$OUT/r; mkdir -p $r
tag=2026-12-03-$(cat .device/tag.txt)
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv > $r/gpu.txt 2>&1
( time timeout ${TESTS_S:-280} python3 -m pytest -q -n 16 -p no:cacheprovider backends/polymm-cuda/tests ) > $r/cuda-h200-devtests-$tag.log 2>&1
( time CUPY_TF32=0 timeout 70 python3 -m pytest -q -x -n 8 -p no:cacheprovider --pyargs polymm.testing --polymm-backend=cuda ) > $r/cuda-h200-conformance-$tag.log 2>&1
( time POLYMM_OPENCL_DEVICE=NVIDIA timeout 80 python3 -m pytest -q -x -n 8 -p no:cacheprovider --pyargs polymm.testing --polymm-backend=opencl ) > $r/opencl-nvidia-h200-conformance-$tag.log 2>&1
for s in 0 1 2 3 4 5 6 7; do
  timeout 100 polymm fuzz --backend cuda --cases 12500 --seed 2026126$s --time-budget 80 --json > $r/cuda-h200-$tag-seed2026126$s.json 2> $r/fuzz-$s.log &
done
wait
cd $OUT && tar czf r.tgz r && rm -rf r
