# The whole cliff suite on the lent GPU (every dtype x every class, issue 30) at the session's code,
# under the program ratio (ce6fa4a), in two halves of its cases (one call each: a call may run 10
# minutes), the JSON rewritten after every cell; merge them at home with scripts/cliffs_merge.py.
#   . .device/setup.sh; bash benchmarks/cliffs/cuda-h200-2026-12-04-runs/grid.sh 1   (then 2)
# FROM=<case> BUDGET=<s> ... grid.sh rest: every case from that one on (a half cut by its limit).
set -u
half=${1:?half 1, 2 or rest}
r=$OUT/r; mkdir -p $r
tag=2026-12-04-$(cat .device/tag.txt)
unset CUPY_TF32
{ uptime; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $r/machine-$half.txt 2>&1
cases=$(python3 - "$half" <<'PY'
import sys
from polymm.tools import cliffs
pairs = cliffs.select()
names = list(dict.fromkeys(c.name for c, _ in pairs))
count = {n: sum(1 for c, _ in pairs if c.name == n) for n in names}
total, run, cut = sum(count.values()), 0, len(names)
for i, n in enumerate(names):
    run += count[n]
    if run >= total / 2:
        cut = i + 1
        break
if sys.argv[1] == "rest":
    import os
    print(",".join(names[names.index(os.environ["FROM"]):]))
else:
    print(",".join(names[:cut] if sys.argv[1] == "1" else names[cut:]))
PY
)
( time timeout 540 polymm bench --suite cliffs --backend cuda --budget ${BUDGET:-0.6} --cases "$cases" \
    --json $r/cuda-h200-grid$half-$tag.json --plot $r/cuda-h200-grid$half-$tag.png ) > $r/bench-$half.log 2>&1
tail -5 $r/bench-$half.log
