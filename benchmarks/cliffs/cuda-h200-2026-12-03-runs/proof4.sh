# The H200 after the session's last kernel change (matvec.c's runs along K, dab66df): every
# dtype's matrix-vector cells once (the grid record's part for them), the CUDA device-test folder
# whole, the conformance suite on cuda and on NVIDIA OpenCL, then polymm fuzz (eight processes
# side by side, seeds 20261270-77, 100,000 cases); everything packed into one archive under $OUT.
set -u
r=$OUT/r; mkdir -p $r
tag=2026-12-03-$(cat .device/tag.txt)
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv > $r/gpu.txt 2>&1
( time timeout 110 polymm bench --suite cliffs --backend cuda --budget 0.6 --cases grid-matvec,grid-fast-matvec,grid-tf32-matvec,grid-tf32x3-matvec,n4-2048 --json $r/cuda-h200-gridMV-$tag.json ) > $r/bench-mv.log 2>&1
( time timeout 280 python3 -m pytest -q -n 16 -p no:cacheprovider backends/polymm-cuda/tests ) > $r/cuda-h200-devtests-$tag.log 2>&1
( time CUPY_TF32=0 timeout 70 python3 -m pytest -q -x -n 8 -p no:cacheprovider --pyargs polymm.testing --polymm-backend=cuda ) > $r/cuda-h200-conformance-$tag.log 2>&1
( time POLYMM_OPENCL_DEVICE=NVIDIA timeout 80 python3 -m pytest -q -x -n 8 -p no:cacheprovider --pyargs polymm.testing --polymm-backend=opencl ) > $r/opencl-nvidia-h200-conformance-$tag.log 2>&1
for s in 0 1 2 3 4 5 6 7; do
  timeout 95 polymm fuzz --backend cuda --cases 12500 --seed 2026127$s --time-budget 78 --json > $r/cuda-h200-$tag-seed2026127$s.json 2> $r/fuzz-$s.log &
done
wait
cd $OUT && tar czf r.tgz r && rm -rf r
