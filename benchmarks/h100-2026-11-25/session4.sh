#!/usr/bin/env bash
# Session 4 of 2026-11-25 on the H100.  `session4.sh proof $OUT`: the device tests, the conformance
# suite on cuda, fuzzing (every dtype; float32 in "tf32" from the smallest products on) and
# probe23's host-time breakdown.  `session4.sh cliffs $OUT`: the whole cliff suite, after waiting
# (at most two minutes) for a quiet host.  Results in $OUT/<mode>.tgz.
mode="$1"; out="$2"; d="$out/$mode"; mkdir -p "$d"
commit=$(cat .device/commit.txt)
{ date -u +%FT%TZ; echo "$commit"; uptime; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > "$d/machine.txt"
if [ "$mode" = proof ]; then
    python -m pytest -q -n 8 backends/polymm-cuda/tests > "$d/device-tests.log" 2>&1; tail -3 "$d/device-tests.log"
    CUPY_TF32=0 python -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda > "$d/conformance-cuda.log" 2>&1; tail -1 "$d/conformance-cuda.log"
    pids=()
    for i in 1 2 3; do
        seed=$((20261830 + i))
        polymm fuzz --backend cuda --cases 10000 --seed "$seed" --time-budget 120 --json > "$d/fuzz-all-$seed.json" 2> "$d/fuzz-all-$seed.txt" &
        pids+=($!)
    done
    seed=20261840
    POLYMM_CUDA_TF32_MIN_WORK=0 polymm fuzz --backend cuda --dtypes float32 --precision tf32 --cases 10000 --seed "$seed" --time-budget 120 --json > "$d/fuzz-tf32-$seed.json" 2> "$d/fuzz-tf32-$seed.txt" &
    pids+=($!)
    for p in "${pids[@]}"; do wait "$p"; done
    grep -h "polymm fuzz:" "$d"/fuzz-*.txt
    python .device/probe23.py host > "$d/probe23-host.log" 2>&1; grep -v Warn "$d/probe23-host.log" | head -20
elif [ "$mode" = cliffs ]; then
    for i in 1 2 3 4 5 6 7 8; do python .device/hostcheck.py && break; sleep 15; done
    polymm bench --suite cliffs --backend cuda --json "$d/cuda-h100-$commit.json" --plot "$d/cuda-h100-$commit.png" > "$d/cliffs-cuda.log" 2>&1
    tail -30 "$d/cliffs-cuda.log"
fi
{ date -u +%FT%TZ; uptime; } >> "$d/machine.txt"
tar -C "$out" -czf "$out/$mode.tgz" "$mode"
rm -rf "$d"
