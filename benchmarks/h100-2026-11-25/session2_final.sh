#!/usr/bin/env bash
# The planner-path tests (two failed at 090ff92: the test did not expect complex128 realified), the
# realified complex128 test, then the cliff suite after a quiet 45 s. Results in $OUT/final.tgz.
out="$1"; d="$out/final"; mkdir -p "$d"; commit=$(cat .device/commit.txt)
python -m pytest -q -n 8 backends/polymm-cuda/tests/test_device.py -k "every_planner_path or realified" > "$d/device-paths.log" 2>&1; tail -2 "$d/device-paths.log"
sleep 45
{ date -u +%FT%TZ; echo "$commit"; uptime; } > "$d/machine.txt"
polymm bench --suite cliffs --backend cuda --json "$d/cuda-h100-$commit.json" --plot "$d/cuda-h100-$commit.png" > "$d/cliffs-cuda.log" 2>&1
tail -4 "$d/cliffs-cuda.log"
{ date -u +%FT%TZ; uptime; } >> "$d/machine.txt"
tar -C "$out" -czf "$out/final.tgz" final; rm -rf "$d"
