#!/usr/bin/env bash
# The cliff suite on the lent GPU machine: the cuda backend against cupy.matmul (cuBLAS, TF32
# off, CUDA events around each whole call) and the opencl backend on the NVIDIA OpenCL driver
# against cupy.matmul on the same GPU (wall clock, queue finished after each call).
#
#   . .device/setup.sh && bash scripts/gpu_cliffs.sh OUT_DIR LABEL [CASES]
#
# Writes OUT_DIR/{cuda,opencl-nvidia}-LABEL.{json,png,log}; copy the JSON and PNG to
# benchmarks/cliffs/ at home and run scripts/cliffs_page.py.
set -uo pipefail
out="${1:?usage: gpu_cliffs.sh OUT_DIR LABEL [CASES]}"
label="${2:?usage: gpu_cliffs.sh OUT_DIR LABEL [CASES]}"
cases=(${3:+--cases "$3"})
mkdir -p "$out"
unset CUPY_TF32
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
status=0
polymm bench --suite cliffs --backend cuda "${cases[@]}" --json "$out/cuda-$label.json" \
    --plot "$out/cuda-$label.png" 2>&1 | tee "$out/cuda-$label.log" || status=1
POLYMM_OPENCL_DEVICE=NVIDIA polymm bench --suite cliffs --backend opencl "${cases[@]}" \
    --json "$out/opencl-nvidia-$label.json" --plot "$out/opencl-nvidia-$label.png" 2>&1 \
    | tee "$out/opencl-nvidia-$label.log" || status=1
exit $status
