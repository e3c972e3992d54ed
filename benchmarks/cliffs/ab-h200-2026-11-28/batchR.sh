#!/usr/bin/env bash
# batch R: tf32 rows on 128-byte lines, complex128 deep slices, byte planes by shift -- A/B, then the proof.
set -u
W=/tmp/work; mkdir -p $W
pack() { tar -czf $OUT/batchR.tgz -C $W . 2>/dev/null; }
step() { local name=$1 limit=$2; shift 2; echo "== $name $(date -u +%H:%M:%S)" | tee -a $W/steps.log
  timeout $limit "$@" > $W/$name.log 2>&1; echo "rc=$? $(date -u +%H:%M:%S)" | tee -a $W/steps.log; pack; }
OLD=$PWD/.device/gpu/old
OLDPATH=$OLD:$OLD/backends/polymm-numba:$OLD/backends/polymm-opencl:$OLD/backends/polymm-cuda
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv > $W/gpu.txt; uptime >> $W/gpu.txt
export CUPY_TF32=0
step ab-new1 70 python .device/gpu/probeR.py new
step ab-old1 70 env PYTHONPATH=$OLDPATH:${PYTHONPATH:-} python .device/gpu/probeR.py old
step devtests 230 python -m pytest -q -n 16 -p no:cacheprovider backends/polymm-cuda/tests
step conf-cuda 50 python3 -m pytest -q -x -n 8 --pyargs polymm.testing --polymm-backend=cuda -p no:cacheprovider
echo "== fuzz $(date -u +%H:%M:%S)" >> $W/steps.log
for s in 0 1 2 3 4 5; do timeout 75 polymm fuzz --backend cuda --cases 12500 --seed 2026122$s --time-budget 60 --json > $W/fuzz-$s.json 2> $W/fuzz-$s.err & done
for s in 6 7; do POLYMM_CUDA_PLANES_MIN_WORK=0 POLYMM_PREFER=byte-planes timeout 75 polymm fuzz --backend cuda --cases 12500 --seed 2026122$s --dtypes int16,uint16,int32,uint32,int64,uint64 --time-budget 60 --json > $W/fuzz-$s.json 2> $W/fuzz-$s.err & done; wait
echo "fuzz done $(date -u +%H:%M:%S)" >> $W/steps.log; pack
echo done >> $W/steps.log; pack
