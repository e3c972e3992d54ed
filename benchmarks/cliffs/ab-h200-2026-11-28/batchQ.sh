#!/usr/bin/env bash
set -u
W=/tmp/work; mkdir -p $W
pack() { tar -czf $OUT/batchQ.tgz -C $W . 2>/dev/null; }
step() { local name=$1 limit=$2; shift 2; echo "== $name $(date -u +%H:%M:%S)" | tee -a $W/steps.log
  timeout $limit "$@" > $W/$name.log 2>&1; echo "rc=$? $(date -u +%H:%M:%S)" | tee -a $W/steps.log; pack; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv > $W/gpu.txt
export CUPY_TF32=0
step tf32 120 python .device/gpu/probeQ.py tf32
for S in 0 8 12 16 24; do step dmma-$S 45 python .device/gpu/probeQ.py dmma $S; done
step bf16 40 python .device/gpu/probeQ.py bf16
echo done >> $W/steps.log; pack
