#!/usr/bin/env bash
# CPU regression check: build the base commit and HEAD into fresh virtualenvs (core + every
# backend + the example plugin, see asv_bench/asv.conf.json), run the CPU benchmarks on both,
# and fail if any time_* benchmark got slower by more than the factor.
#
#   scripts/asv_regression_check.sh                 # main vs HEAD, factor 1.2
#   scripts/asv_regression_check.sh BASE [HEAD]     # any two commits / branches
#   FACTOR=1.1 BENCH="Square" scripts/asv_regression_check.sh
#
# Exit status 0: no regression; 1: asv found one (the table shows which); 2: usage/setup.
# `asv continuous` runs both commits interleaved on this machine, so the comparison is fair
# even on a noisy laptop; increase FACTOR there. Needs network on first use (pip installs
# numba etc. into asv_bench/env/). Results go to asv_bench/scratch/results/ (not tracked).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python}"
base="${1:-main}"
head="${2:-HEAD}"
factor="${FACTOR:-1.2}"
# CPU work only: the numba backend, all algorithms, and the NumPy reference line.
bench="${BENCH:-}"
machine="$(PYTHON="$python" "$root/scripts/asv_machine.sh" ${ASV_MACHINE:+"$ASV_MACHINE"})"
if [ "$(git -C "$root" rev-parse "$base")" = "$(git -C "$root" rev-parse "$head")" ]; then
    echo "asv_regression_check: $base and $head are the same commit; nothing to compare" >&2
    exit 2
fi
cd "$root/asv_bench"
args=(continuous --config asv.conf.json --machine "$machine" --factor "$factor" --show-stderr
      --split --only-changed -a repeat=5 -a rounds=2)
# Parameterised benchmarks are selected by "name(params)": the cpu backend's time_* ones
# (and NumPy's reference line, to tell our regressions from the machine's). BENCH replaces it.
if [ -n "$bench" ]; then
    args+=(--bench "$bench")
else
    args+=(--bench "time_matmul\\('cpu'" --bench "time_matmul\\('numpy'")
fi
set +e
"$python" "$root/scripts/asv_run.py" "${args[@]}" "$base" "$head"   # asv, leaving no process behind
status=$?
set -e
[ $status -eq 0 ] && echo "asv_regression_check: no CPU regression beyond x$factor ($base -> $head)"
exit $status
