#!/usr/bin/env bash
# The 2-core Ice Lake Xeon (model 106, 1.25 MiB L2 per core): the CPU suite's float32 and float64
# cells with this machine's tuning (polymm tune --backend cpu, stored in tuning-icelake.json)
# and without it (the database), tuned first, then untuned, then tuned again.
set -eu
cd "$(dirname "$0")/../../.."
here=benchmarks/cliffs/cpu-2core-avx512-2026-12-03-runs
sha=$(git rev-parse --short HEAD)
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 NUMBA_NUM_THREADS=2 POLYMM_HOST_NAME=2core-avx512
for run in tuned1 untuned tuned2; do
    uptime
    if [ "${run#tuned}" != "$run" ]; then export POLYMM_TUNING=$here/tuning-icelake.json; else unset POLYMM_TUNING; fi
    polymm bench --suite cliffs --backend cpu --dtype float32,float64 --json "$here/cpu-2core-avx512-$run-2026-12-03-$sha.json"
done
