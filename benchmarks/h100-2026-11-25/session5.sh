#!/usr/bin/env bash
# Session 5 of 2026-11-25 on the H100.  `session5.sh proof $OUT`: the device tests, the conformance
# suite on cuda, fuzzing (every dtype; complex128 on polymm_dmmaz from the smallest products on) and
# probe25's complex128 timings.  `session5.sh cliffs $OUT`: the whole cliff suite, after waiting
# (at most two minutes) for a quiet host.  Results in $OUT/<mode>.tgz.
mode="$1"; out="$2"; d="$out/$mode"; mkdir -p "$d"
commit=$(cat .device/commit.txt)
{ date -u +%FT%TZ; echo "$commit"; uptime; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > "$d/machine.txt"
if [ "$mode" = proof ]; then
    python -m pytest -q -n 8 backends/polymm-cuda/tests > "$d/device-tests.log" 2>&1; tail -3 "$d/device-tests.log"
    CUPY_TF32=0 python -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda > "$d/conformance-cuda.log" 2>&1; tail -1 "$d/conformance-cuda.log"
    pids=()
    for i in 1 2 3; do
        seed=$((20261930 + i))
        polymm fuzz --backend cuda --cases 10000 --seed "$seed" --time-budget 120 --json > "$d/fuzz-all-$seed.json" 2> "$d/fuzz-all-$seed.txt" &
        pids+=($!)
    done
    for i in 1 2; do
        seed=$((20261940 + i))
        python .device/fuzz_dmmaz.py --backend cuda --dtypes complex128 --cases 12500 --seed "$seed" --time-budget 120 --json > "$d/fuzz-dmmaz-$seed.json" 2> "$d/fuzz-dmmaz-$seed.txt" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    grep -h "polymm fuzz:\|polymm_dmmaz plans" "$d"/fuzz-*.txt
    python .device/probe25.py > "$d/probe25.log" 2>&1; grep -v Warn "$d/probe25.log" | head -40
elif [ "$mode" = cliffs ]; then
    for i in 1 2 3 4 5 6 7 8; do python .device/hostcheck.py && break; sleep 15; done
    polymm bench --suite cliffs --backend cuda --json "$d/cuda-h100-$commit.json" --plot "$d/cuda-h100-$commit.png" > "$d/cliffs-cuda.log" 2>&1
    tail -30 "$d/cliffs-cuda.log"
fi
{ date -u +%FT%TZ; uptime; } >> "$d/machine.txt"
tar -C "$out" -czf "$out/$mode.tgz" "$mode"
rm -rf "$d"
