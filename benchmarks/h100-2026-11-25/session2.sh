#!/usr/bin/env bash
# Session 2 of 2026-11-25 on the H100.  `session2.sh cliffs $OUT`: the whole cliff suite on a quiet
# machine (JSON, heatmap, log).  `session2.sh proof $OUT`: device tests, the conformance suite on
# cuda, then 8 x 12,500 fuzzed cases: four runs of complex128 with every eligible product realified
# (fuzz_realify.py), four of every dtype (the planner's new matvec / strip / outer choices).
# Results in $OUT/<mode>.tgz (the tool brings back few files).
mode="$1"; out="$2"; d="$out/$mode"; mkdir -p "$d"
commit=$(cat .device/commit.txt)
{ date -u +%FT%TZ; echo "$commit"; uptime; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > "$d/machine.txt"
if [ "$mode" = cliffs ]; then
    polymm bench --suite cliffs --backend cuda --json "$d/cuda-h100-$commit.json" --plot "$d/cuda-h100-$commit.png" > "$d/cliffs-cuda.log" 2>&1
    tail -30 "$d/cliffs-cuda.log"
else
    python -m pytest -q -n 8 backends/polymm-cuda/tests > "$d/device-tests.log" 2>&1; tail -3 "$d/device-tests.log"
    CUPY_TF32=0 python -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda > "$d/conformance-cuda.log" 2>&1; tail -1 "$d/conformance-cuda.log"
    pids=()
    for i in 1 2 3 4; do
        seed=$((20261700 + i))
        python .device/fuzz_realify.py fuzz --backend cuda --dtypes complex128 --cases 12500 --seed "$seed" --time-budget 150 --json > "$d/fuzz-c128-$seed.json" 2> "$d/fuzz-c128-$seed.txt" &
        pids+=($!)
        seed=$((20261710 + i))
        polymm fuzz --backend cuda --cases 12500 --seed "$seed" --time-budget 150 --json > "$d/fuzz-all-$seed.json" 2> "$d/fuzz-all-$seed.txt" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    grep -h "polymm fuzz:\|realified plans" "$d"/fuzz-*.txt
fi
{ date -u +%FT%TZ; uptime; } >> "$d/machine.txt"
tar -C "$out" -czf "$out/$mode.tgz" "$mode"
rm -rf "$d"
