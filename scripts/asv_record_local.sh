#!/usr/bin/env bash
# Record the reduced-but-real parameter set for a small (2-core) host, in slices: asv saves
# results only when a run ends, so each slice is its own run (they accumulate for the same
# commit, in asv_bench/scratch/results/<machine>/). This is what recorded the "polymm-2core-ci"
# results shown in the docs' performance page. Recording is deliberate: with --keep it ends by
# copying the run into the committed records (scripts/asv_keep.py), for you to review and commit.
#
#   scripts/asv_record_local.sh [--keep]   (ASV_MACHINE=polymm-2core-ci, PYTHON=.venv/bin/python)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export ASV_MACHINE="${ASV_MACHINE:-polymm-2core-ci}"
# One commit for every slice, even if HEAD moves while this runs.
export ASV_COMMIT="${ASV_COMMIT:-$(git -C "$root" rev-parse HEAD)}"
slices=(
  "Square\.\w+\('cpu', '(naive|tiled|auto)', (64|256|512|1024|2048), 'float32'\)"
  "Reference\.\w+\('numpy', (256|1024|2048), 'float(32|64)'\)"
  "(Shapes|Batched)\.\w+\('cpu'"
  "CallOverhead\.\w+\('(cpu|opencl)'"
  "Square\.\w+\('opencl', '(naive|tiled|tiled-dynamic)', (64|256|512), 'float32'\)|Square\.\w+\('opencl', 'auto', (256|1024|2048), 'float32'\)"
  "(Shapes|Batched)\.\w+\('opencl', 'auto'"
  "Square\.\w+\('cpu', '(tiled|auto)', (256|1024|2048), 'float64'\)"
  "CliffCell\.track_ratio\('cpu'"
  "CliffCell\.track_ratio\('opencl', '[\w-]+ float32'\)"
)
for regex in "${slices[@]}"; do
    echo "== asv_record_local: $regex ($(date -u +%H:%M:%S))"
    "$root/scripts/asv_local_run.sh" --bench "$regex" || echo "(slice exit $?)"
done
if [ "${1:-}" = "--keep" ]; then
    "${PYTHON:-python}" "$root/scripts/asv_keep.py" "$ASV_MACHINE" --commit "$ASV_COMMIT"
fi
