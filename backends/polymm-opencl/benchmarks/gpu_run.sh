#!/usr/bin/env bash
# Everything the OpenCL backend needs checked on the lent GPU machine, in one call:
#   . .device/setup.sh && bash backends/polymm-opencl/benchmarks/gpu_run.sh [tests] [bench] [tune] [conformance]
# (TUNE= skips the tuning step of bench, so "auto" runs on the built-in table.)
# Results land in $OUT (device list, test log, benchmark JSON/log, conformance log, tuning file).
OUT=${OUT:-/tmp/polymm-opencl-out}; mkdir -p "$OUT"
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(tests bench conformance)
python3 -c "import polymm_opencl" 2>/dev/null || \
    python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . -e backends/polymm-opencl
export POLYMM_OPENCL_DEVICE=${POLYMM_OPENCL_DEVICE:-NVIDIA}
export POLYMM_TUNING=$OUT/tuning.json
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import polymm_opencl as p; print('\n'.join(p.list_devices()))"; } > "$OUT/devices.txt" 2>&1
cat "$OUT/devices.txt"
for stage in "${stages[@]}"; do
  case $stage in
    tests) timeout ${TESTS_S:-120} python3 -m pytest -q -n 8 -p no:cacheprovider backends/polymm-opencl/tests \
             -k "not cuda_sources" 2>&1 | tail -25 > "$OUT/tests.log"; tail -5 "$OUT/tests.log" ;;
    bench) timeout ${BENCH_S:-180} python3 backends/polymm-opencl/benchmarks/bench.py --sizes 2048 4096 --cupy \
             ${TUNE---tune} --algorithms auto tiled tiled-dynamic naive --repeats 15 --json "$OUT/bench_gpu.json" 2>&1 \
             | tee "$OUT/bench.log" ;;
    tune) timeout ${TUNE_S:-120} python3 -m polymm.tools.tune --backend opencl --size 4096 --repeats 10 --dry-run 2>&1 \
             | tee "$OUT/tune.log" ;;
    conformance) timeout ${CONF_S:-200} python3 -m pytest -q -p no:cacheprovider -n 8 --pyargs polymm.testing \
             --polymm-backend=opencl 2>&1 | tail -40 > "$OUT/conformance.log"; tail -5 "$OUT/conformance.log" ;;
  esac
done
