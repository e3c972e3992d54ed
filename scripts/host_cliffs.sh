#!/usr/bin/env bash
# Record the cliff suite for the host backends (cpu, and opencl on PoCL) on this machine.
#
#   bash scripts/host_cliffs.sh LABEL [BACKENDS]      (BACKENDS default: "cpu opencl")
#
# Both libraries get the same threads (OpenBLAS and Numba at the machine's core count).
# Checks the load first and refuses to record on a busy machine (FORCE=1 records anyway and
# the JSON keeps the load it saw). Writes benchmarks/cliffs/<backend>-<host>-<date>-LABEL.{json,png}
# and regenerates the docs page.
set -euo pipefail
cd "$(dirname "$0")/.."
label="${1:?usage: host_cliffs.sh LABEL [BACKENDS]}"
backends="${2:-cpu opencl}"
cores=$(nproc)
export OMP_NUM_THREADS=$cores OPENBLAS_NUM_THREADS=$cores NUMBA_NUM_THREADS=$cores
host="${POLYMM_HOST_NAME:-${cores}core}"
day=$(date -u +%F)
for backend in $backends; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [ "${FORCE:-0}" != 1 ] && awk -v l="$load" -v c="$cores" 'BEGIN { exit !(l > 0.5 * c) }'; then
        echo "load average $load on $cores cores: not a quiet machine; wait, or FORCE=1" >&2
        exit 1
    fi
    name="benchmarks/cliffs/$backend-$host-$day-$label"
    polymm bench --suite cliffs --backend "$backend" --json "$name.json" --plot "$name.png"
done
python scripts/cliffs_page.py
