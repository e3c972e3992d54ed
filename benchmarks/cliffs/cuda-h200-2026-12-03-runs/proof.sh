# The H200 with complex64's B read in place as reals on the shared tiles (realify.in_place, its
# store-time form: measured on the H100 on 2026-12-02, never on the H200) against B realified
# first, on the grid's complex64 cells, twice each way, alternating; the faster way is kept for
# the device tests that follow (the whole CUDA device-test folder).
set -u
r=$OUT
tag=2026-12-03-$(cat .device/tag.txt)
cells='square-2048,square-4096,grid-square,grid-square-odd,grid-square-4mod8,grid-tall,grid-wide,grid-deep-k,grid-batch-*,grid-broadcast,grid-matvec,grid-vecmat,grid-outer,grid-view-*'
flip() { python3 scripts/database_set.py 'NVIDIA GPU' realify in_place $([ $1 = on ] && echo true || echo false); }
cp polymm/kernels/devices.json /tmp/devices.json
nvidia-smi --query-gpu=name,clocks.max.sm,temperature.gpu --format=csv > $r/gpu.txt 2>&1
for round in 1 2; do
  for mode in on off; do
    flip $mode
    ( time timeout 65 polymm bench --suite cliffs --backend cuda --budget 0.6 --cases "$cells" --dtype complex64 --json $r/cuda-h200-c64-inplace-$mode$round-$tag.json ) > $r/bench-c64-$mode$round.log 2>&1
  done
done
python3 - $r $tag > $r/decision.txt <<'PY'
import json, math, sys
r, tag = sys.argv[1:]
def cells(mode):
    out = {}
    for k in (1, 2):
        try:
            for c in json.load(open(f"{r}/cuda-h200-c64-inplace-{mode}{k}-{tag}.json"))["cells"]:
                out.setdefault(c["case"], []).append(c["ratio"])
        except (OSError, ValueError, KeyError):
            pass
    return {k: max(v) for k, v in out.items()}
on, off = cells("on"), cells("off")
both = sorted(set(on) & set(off))
g = lambda d: math.exp(sum(math.log(d[k]) for k in both) / max(len(both), 1))
for k in both:
    print(f"{k:24s} on {on[k]:.3f} off {off[k]:.3f}")
print(f"cells {len(both)} geomean on {g(on):.3f} off {g(off):.3f} worst on {min(on[k] for k in both):.3f} off {min(off[k] for k in both):.3f}")
print("keep", "on" if both and g(on) > g(off) else "off")
PY
flip $(tail -1 $r/decision.txt | cut -d' ' -f2)
cp polymm/kernels/devices.json $r/devices-kept.json
( time timeout ${TESTS_S:-270} python3 -m pytest -q -n 16 -p no:cacheprovider backends/polymm-cuda/tests ) > $r/cuda-h200-devtests-$tag.log 2>&1
