#!/usr/bin/env bash
# Session 3 of 2026-11-25 on the H100.  `session3.sh tf32 $OUT`: the wgmma and TF32 device tests,
# then the TF32 cells of the cliff suite (the register-fed kernel for an N-contiguous B).
# `session3.sh cliffs $OUT`: the whole cliff suite.  `session3.sh proof $OUT`: device tests, the
# conformance suite on cuda, fuzzing in "tf32" from the smallest products on and of every dtype.
# `session3.sh host $OUT`: after the host-path changes, the device tests, the conformance suite,
# two short fuzz runs and the host-time breakdown (probe22.py).  Results in $OUT/<mode>.tgz (the
# tool brings back few files).
mode="$1"; out="$2"; d="$out/$mode"; mkdir -p "$d"
commit=$(cat .device/commit.txt)
{ date -u +%FT%TZ; echo "$commit"; uptime; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > "$d/machine.txt"
if [ "$mode" = tf32 ]; then
    python -m pytest -q -n 8 backends/polymm-cuda/tests -k "tf32 or wgmma" > "$d/device-tf32.log" 2>&1; tail -15 "$d/device-tf32.log"
    sleep 20
    CUPY_TF32=0 polymm bench --suite cliffs --backend cuda --cases 'tf32*' --json "$d/tf32-$commit.json" > "$d/cliffs-tf32.log" 2>&1
    tail -14 "$d/cliffs-tf32.log"
elif [ "$mode" = host ]; then
    python -m pytest -q -n 8 backends/polymm-cuda/tests > "$d/device-tests.log" 2>&1; tail -3 "$d/device-tests.log"
    CUPY_TF32=0 python -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda > "$d/conformance-cuda.log" 2>&1; tail -1 "$d/conformance-cuda.log"
    for seed in 20261821 20261822; do
        polymm fuzz --backend cuda --cases 6000 --seed "$seed" --time-budget 90 --json > "$d/fuzz-all-$seed.json" 2> "$d/fuzz-all-$seed.txt" &
    done
    wait
    grep -h "polymm fuzz:" "$d"/fuzz-*.txt
    sleep 20
    python .device/probe22.py > "$d/probe22.log" 2>&1; grep -v Warn "$d/probe22.log"
elif [ "$mode" = cliffs ]; then
    sleep 30
    polymm bench --suite cliffs --backend cuda --json "$d/cuda-h100-$commit.json" --plot "$d/cuda-h100-$commit.png" > "$d/cliffs-cuda.log" 2>&1
    tail -30 "$d/cliffs-cuda.log"
else
    python -m pytest -q -n 8 backends/polymm-cuda/tests > "$d/device-tests.log" 2>&1; tail -3 "$d/device-tests.log"
    CUPY_TF32=0 python -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda > "$d/conformance-cuda.log" 2>&1; tail -1 "$d/conformance-cuda.log"
    pids=()
    for i in 1 2 3 4; do
        seed=$((20261800 + i))
        POLYMM_CUDA_TF32_MIN_WORK=0 polymm fuzz --backend cuda --dtypes float32 --precision tf32 --cases 12500 --seed "$seed" --time-budget 150 --json > "$d/fuzz-tf32-$seed.json" 2> "$d/fuzz-tf32-$seed.txt" &
        pids+=($!)
        seed=$((20261810 + i))
        polymm fuzz --backend cuda --cases 12500 --seed "$seed" --time-budget 150 --json > "$d/fuzz-all-$seed.json" 2> "$d/fuzz-all-$seed.txt" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    grep -h "polymm fuzz:" "$d"/fuzz-*.txt
fi
{ date -u +%FT%TZ; uptime; } >> "$d/machine.txt"
tar -C "$out" -czf "$out/$mode.tgz" "$mode"
rm -rf "$d"
