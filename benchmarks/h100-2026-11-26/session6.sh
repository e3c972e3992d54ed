#!/usr/bin/env bash
# Session 6 of 2026-11-26 on the H100, one call: the broadcast-batch tests on both GPU backends
# (cuda; opencl on the NVIDIA driver), then the whole cliff suite on cuda after waiting (at most a
# minute) for a quiet host.  `session6.sh $OUT`; results in $OUT/session6.tgz.
out="$1"; d="$out/session6"; mkdir -p "$d"
commit=$(cat .device/commit.txt)
{ date -u +%FT%TZ; echo "$commit"; uptime; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > "$d/machine.txt"
POLYMM_OPENCL_DEVICE=NVIDIA python -m pytest -q -n 4 -rs tests/test_batches.py > "$d/test-batches.log" 2>&1
tail -3 "$d/test-batches.log"
for i in 1 2 3 4; do python .device/hostcheck.py && break; sleep 15; done
polymm bench --suite cliffs --backend cuda --json "$d/cuda-h100-$commit.json" --plot "$d/cuda-h100-$commit.png" > "$d/cliffs-cuda.log" 2>&1
tail -30 "$d/cliffs-cuda.log"
{ date -u +%FT%TZ; uptime; } >> "$d/machine.txt"
tar -C "$out" -czf "$out/session6.tgz" session6
rm -rf "$d"
