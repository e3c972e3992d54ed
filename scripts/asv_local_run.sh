#!/usr/bin/env bash
# Run the asv suite in the current Python environment (the dev venv with polymm and its backends
# installed editable), recorded for the current commit, and print the results.
#
#   scripts/asv_local_run.sh --quick                    # a slice of every benchmark: ~2 minutes
#   scripts/asv_local_run.sh --quick --bench "Square.time_matmul\('cpu'"   # any `asv run` options
#   scripts/asv_local_run.sh                            # full sampling: an hour and more on 2 cores
#   ASV_MACHINE=my-laptop scripts/asv_local_run.sh      # machine name (default polymm-<n>core-<host>)
#   ASV_COMMIT=<sha> ...                                # record for this commit (default: HEAD)
#
# * Results go to asv_bench/scratch/results/<machine>/ (git-ignored): a run changes no tracked
#   file. `python scripts/asv_keep.py <machine>` copies a run into the committed records.
# * --quick: asv's --quick (each time_* benchmark called once) plus POLYMM_ASV_QUICK=1 (each
#   track_* figure takes one timed call; host cliff cells above 512 are skipped), over the
#   parameter slice that asv_bench/quick.txt names unless --bench is given, recorded under the
#   machine name <machine>-quick so rough numbers never pass for measurements.
# * asv runs through scripts/asv_run.py: Ctrl-C, kill or a closed terminal stops the benchmark
#   processes too (asv starts each in a process group of its own).
# * Benchmarks run through one fork server (asv.existing.conf.json's launch_method: polymm is
#   imported once, not once per parameter combination); --launch-method spawn changes that.
# * The benchmark processes import polymm from PYTHONPATH when it is set (as ASV_PYTHONPATH:
#   asv drops PYTHONPATH), so a worktree's code is measured, not the venv's editable install.
#
# Then `python scripts/asv_publish_offline.py --serve` and open the address it prints.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python}"
# a relative PYTHON (.venv/bin/python) names a file from here; asv runs from asv_bench/
case "$python" in /*) ;; */*) python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")" ;; esac
quick=0
bench=0
for arg in "$@"; do
    case "$arg" in
        --quick|-q) quick=1 ;;
        --bench|--bench=*|-b) bench=1 ;;
    esac
done
# --quick without --bench: the slice of every benchmark that asv_bench/quick.txt names.
selection=()
if [ "$quick" = 1 ] && [ "$bench" = 0 ]; then
    while IFS= read -r regex; do
        case "$regex" in ''|'#'*) continue ;; esac
        selection+=(--bench "$regex")
    done < "$root/asv_bench/quick.txt"
fi
machine="$(PYTHON="$python" "$root/scripts/asv_machine.sh" ${ASV_MACHINE:+"$ASV_MACHINE"})"
if [ "$quick" = 1 ]; then
    machine="$(PYTHON="$python" "$root/scripts/asv_machine.sh" "$machine-quick")"
    export POLYMM_ASV_QUICK=1
else
    unset POLYMM_ASV_QUICK   # a full run's figures are sampled, whatever the shell had set
fi
if [ -n "${PYTHONPATH:-}" ] && [ -z "${ASV_PYTHONPATH:-}" ]; then
    export ASV_PYTHONPATH="$PYTHONPATH"
fi
commit="${ASV_COMMIT:-$(git -C "$root" rev-parse HEAD)}"
echo "asv_local_run: machine $machine, commit ${commit:0:8}; results in asv_bench/scratch/results/$machine/ (not tracked)"
cd "$root/asv_bench"
exec "$python" "$root/scripts/asv_run.py" run --config asv.existing.conf.json --machine "$machine" \
    --set-commit-hash "$commit" --show-stderr "${selection[@]}" "$@"
