#!/usr/bin/env bash
# batch S3: the byte planes' split rewritten -- A/B old / mid / new, then the byte-plane and complex128 tests, wide-int fuzz.
set -u
W=/tmp/work; mkdir -p $W
pack() { tar -czf $OUT/batchS3.tgz -C $W . 2>/dev/null; }
step() { local name=$1 limit=$2; shift 2; echo "== $name $(date -u +%H:%M:%S)" | tee -a $W/steps.log
  timeout $limit "$@" > $W/$name.log 2>&1; echo "rc=$? $(date -u +%H:%M:%S)" | tee -a $W/steps.log; pack; }
path_of() { echo $PWD/.device/gpu/$1:$PWD/.device/gpu/$1/backends/polymm-numba:$PWD/.device/gpu/$1/backends/polymm-opencl:$PWD/.device/gpu/$1/backends/polymm-cuda; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv > $W/gpu.txt; uptime >> $W/gpu.txt
export CUPY_TF32=0
step ab-new1 45 python .device/gpu/probeS.py new
step ab-mid1 45 env PYTHONPATH=$(path_of mid):${PYTHONPATH:-} python .device/gpu/probeS.py mid
step ab-old1 45 env PYTHONPATH=$(path_of old):${PYTHONPATH:-} python .device/gpu/probeS.py old
step ab-new2 45 python .device/gpu/probeS.py new
step tests 150 python -m pytest -q -n 16 -p no:cacheprovider backends/polymm-cuda/tests/test_device.py -k "byte_planes or (test_matmul and int) or (every_planner_path and int) or complex128 or dmma or tf32"
echo "== fuzz $(date -u +%H:%M:%S)" >> $W/steps.log
for s in 0 1 2 3 4 5 6 7; do POLYMM_CUDA_PLANES_MIN_WORK=0 POLYMM_PREFER=byte-planes timeout 75 polymm fuzz --backend cuda --cases 12500 --seed 2026123$s --dtypes int16,uint16,int32,uint32,int64,uint64 --time-budget 60 --json > $W/fuzz-$s.json 2> $W/fuzz-$s.err & done; wait
echo "fuzz done $(date -u +%H:%M:%S)" >> $W/steps.log; pack
echo done >> $W/steps.log; pack
