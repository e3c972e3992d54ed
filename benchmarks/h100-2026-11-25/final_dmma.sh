#!/usr/bin/env bash
# The rewritten float64 kernel (kernels/dmma.cu) on the H100: the float64 cliff cells first (on a quiet
# machine), then the device tests, the conformance suite on cuda and 8 x 12,500 fuzzed float64 /
# complex128 cases. Results in $1/f64.tgz.
out="$1"; d="$out/f64"; mkdir -p "$d"
{ date -u +%FT%TZ; cat .device/commit.txt; uptime; } > "$d/machine.txt"
polymm bench --suite cliffs --backend cuda --dtype float64 --json "$d/cuda-f64.json" --plot "$d/cuda-f64.png" > "$d/cliffs-f64.log" 2>&1
grep -E "float64|complex128" "$d/cliffs-f64.log" | tail -50
python -m pytest -q -n 8 backends/polymm-cuda/tests > "$d/device-tests.log" 2>&1; tail -2 "$d/device-tests.log"
CUPY_TF32=0 python -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda > "$d/conformance-cuda.log" 2>&1; tail -1 "$d/conformance-cuda.log"
pids=()
for i in $(seq 1 8); do
    seed=$((20261600 + i))
    polymm fuzz --backend cuda --dtypes float64,complex128 --cases 12500 --seed "$seed" --time-budget 120 --json > "$d/fuzz-f64-seed$seed.json" 2> "$d/fuzz-f64-seed$seed.txt" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
grep -h "polymm fuzz:" "$d"/fuzz-f64-*.txt
{ date -u +%FT%TZ; uptime; } >> "$d/machine.txt"
tar -C "$out" -czf "$out/f64.tgz" f64
rm -rf "$d"  # the tool brings back few files: one archive
