#!/usr/bin/env bash
# Proof on the lent GPU machine: the conformance suite and the fuzzer on `cuda` and on `opencl`
# (NVIDIA OpenCL driver), in one call.
#
#   . .device/setup.sh && bash scripts/gpu_proof.sh OUT_DIR [FUZZ_CASES_PER_PROCESS] [PROCESSES] [SECONDS]
#
# The fuzzer runs PROCESSES processes per backend side by side (the host side of a fuzz case is
# Python; the GPU has room), process i with seed 20261124+i, FUZZ_CASES_PER_PROCESS cases each
# (defaults 12500 x 4 = 50,000 per backend), each stopping early after SECONDS (default: no limit;
# its summary line then says so and gives the cases it ran). Everything is written to OUT_DIR/proof/ and packed
# into OUT_DIR/proof.tar.gz (the device tool brings back a few files only).
set -uo pipefail
out="${1:?usage: gpu_proof.sh OUT_DIR [FUZZ_CASES_PER_PROCESS] [PROCESSES]}"
cases="${2:-12500}"
procs="${3:-4}"
budget=(${4:+--time-budget "$4"})
dir="$out/proof"
mkdir -p "$dir"
status=0
{
    date -u +%FT%TZ
    git log -1 --format='%H %s' 2>/dev/null || echo "(no git: tarball of a commit)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} > "$dir/machine.txt"
CUPY_TF32=0 python3 -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda \
    > "$dir/conformance-cuda.log" 2>&1 || status=1
POLYMM_OPENCL_DEVICE=NVIDIA python3 -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=opencl \
    > "$dir/conformance-opencl-nvidia.log" 2>&1 || status=1
tail -n 3 "$dir"/conformance-*.log
for backend in cuda opencl; do
    pids=()
    for i in $(seq 1 "$procs"); do
        seed=$((20261124 + i))
        POLYMM_OPENCL_DEVICE=NVIDIA polymm fuzz --backend "$backend" --cases "$cases" --seed "$seed" "${budget[@]}" --json \
            > "$dir/fuzz-$backend-seed$seed.json" 2> "$dir/fuzz-$backend-seed$seed.txt" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    grep -h "polymm fuzz:" "$dir"/fuzz-"$backend"-*.txt
done
date -u +%FT%TZ >> "$dir/machine.txt"
tar -czf "$out/proof.tar.gz" -C "$out" proof
exit $status
