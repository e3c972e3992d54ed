# The H200 at the database that reads complex64's B in place on every NVIDIA GPU: the CUDA
# device-test folder whole, the conformance suite on cuda and on NVIDIA OpenCL, then polymm fuzz
# (eight processes side by side, new seeds: SEED, a prefix of seven digits); everything packed into
# one archive under $OUT. Later proofs ran it with SEED, TESTS_S, FUZZ_S and FUZZ_TIMEOUT set.
set -u
r=$OUT/r; mkdir -p $r
tag=2026-12-03-$(cat .device/tag.txt)
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv > $r/gpu.txt 2>&1
( time timeout ${TESTS_S:-260} python3 -m pytest -q -n 16 -p no:cacheprovider backends/polymm-cuda/tests ) > $r/cuda-h200-devtests-$tag.log 2>&1
( time CUPY_TF32=0 timeout 70 python3 -m pytest -q -x -n 8 -p no:cacheprovider --pyargs polymm.testing --polymm-backend=cuda ) > $r/cuda-h200-conformance-$tag.log 2>&1
( time POLYMM_OPENCL_DEVICE=NVIDIA timeout 80 python3 -m pytest -q -x -n 8 -p no:cacheprovider --pyargs polymm.testing --polymm-backend=opencl ) > $r/opencl-nvidia-h200-conformance-$tag.log 2>&1
seed=${SEED:-2026125}  # eight seeds: this prefix and a digit
for s in 0 1 2 3 4 5 6 7; do
  timeout ${FUZZ_TIMEOUT:-90} polymm fuzz --backend cuda --cases 12500 --seed $seed$s --time-budget ${FUZZ_S:-70} --json > $r/cuda-h200-$tag-seed$seed$s.json 2> $r/fuzz-$s.log &
done
wait
cd $OUT && tar czf r.tgz r && rm -rf r
