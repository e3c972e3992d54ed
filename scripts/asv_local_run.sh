#!/usr/bin/env bash
# Quick local look: run the asv suite in the current Python environment (the dev venv with
# polymm and its backends installed editable), record the results for the current commit
# under asv_bench/results/<machine>/, and print them.
#
#   scripts/asv_local_run.sh                       # everything this machine can run
#   scripts/asv_local_run.sh --quick --bench Square.time_matmul   # any `asv run` options
#   ASV_MACHINE=my-laptop scripts/asv_local_run.sh # machine name (default polymm-<n>core-<host>)
#   ASV_COMMIT=<sha> ...                           # record for this commit (default: HEAD)
#
# Then `python scripts/asv_publish_offline.py` and open asv_bench/html/index.html (or
# `asv preview`). Without --set-commit-hash (added here) asv would run but record nothing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python}"
machine="$(PYTHON="$python" "$root/scripts/asv_machine.sh" ${ASV_MACHINE:+"$ASV_MACHINE"})"
cd "$root/asv_bench"
exec "$python" -m asv run --config asv.existing.conf.json --machine "$machine" \
    --set-commit-hash "${ASV_COMMIT:-$(git -C "$root" rev-parse HEAD)}" --show-stderr "$@"
