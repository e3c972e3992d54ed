#!/usr/bin/env bash
# Session 7 of 2026-11-26 on the H100, after 8-bit products with B along N went to the swapped
# wgmma kernel and float64 to 64 x 128 tiles where they fill their waves.  `session7.sh proof
# $OUT`: the device tests, the conformance suite on cuda, fuzzing (every dtype; int8 and uint8
# alone).  `session7.sh cliffs $OUT`: the whole cliff suite after waiting (at most a minute) for
# a quiet host.  Results in $OUT/<mode>.tgz.  FUZZ_SEEDS / FUZZ_SEEDS_8BIT: the fuzzers' first
# seeds less one (20262110 / 20262120, this session's, when unset).
mode="$1"; out="$2"; d="$out/$mode"; mkdir -p "$d"
commit=$(cat .device/commit.txt)
{ date -u +%FT%TZ; echo "$commit"; uptime; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > "$d/machine.txt"
if [ "$mode" = proof ]; then
    python -m pytest -q -n 8 backends/polymm-cuda/tests tests/test_batches.py > "$d/device-tests.log" 2>&1; tail -1 "$d/device-tests.log"
    CUPY_TF32=0 python -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda > "$d/conformance-cuda.log" 2>&1; tail -1 "$d/conformance-cuda.log"
    pids=()
    for i in 1 2; do
        seed=$((${FUZZ_SEEDS:-20262110} + i))
        polymm fuzz --backend cuda --cases 10000 --seed "$seed" --time-budget 100 --json > "$d/fuzz-all-$seed.json" 2> "$d/fuzz-all-$seed.txt" &
        pids+=($!)
        seed=$((${FUZZ_SEEDS_8BIT:-20262120} + i))
        polymm fuzz --backend cuda --dtypes int8,uint8 --cases 12500 --seed "$seed" --time-budget 100 --json > "$d/fuzz-8bit-$seed.json" 2> "$d/fuzz-8bit-$seed.txt" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    grep -h "polymm fuzz:" "$d"/fuzz-*.txt
elif [ "$mode" = cliffs ]; then
    for i in 1 2 3 4; do python .device/hostcheck.py && break; sleep 15; done
    polymm bench --suite cliffs --backend cuda --json "$d/cuda-h100-$commit.json" --plot "$d/cuda-h100-$commit.png" > "$d/cliffs-cuda.log" 2>&1
    tail -3 "$d/cliffs-cuda.log"
fi
{ date -u +%FT%TZ; uptime; } >> "$d/machine.txt"
tar -C "$out" -czf "$out/$mode.tgz" "$mode"
rm -rf "$d"
