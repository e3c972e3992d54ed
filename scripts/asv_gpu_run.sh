#!/usr/bin/env bash
# Run the asv suite on the lent GPU machine (no network, no Git history) and pack the results.
#
#   . .device/setup.sh && POLYMM_COMMIT=<sha> POLYMM_COMMIT_DATE=<unix seconds> \
#       bash scripts/asv_gpu_run.sh [OUT_DIR]
#
# .device/setup.sh (from ../shared/gpu) installs asv and PyOpenCL from wheels and the project
# editable. The benchmarks run in that Python (asv.existing.conf.json) in prioritised slices,
# each time-boxed, because asv saves results only when a run ends: a slice cut short loses
# only itself. Results are recorded for POLYMM_COMMIT (the commit the working tree was sent
# from) under asv_bench/scratch/results/$ASV_MACHINE/ and packed (with benchmarks.json) into
# OUT_DIR/asv-results-<machine>.tgz with a log. At home, unpack it in asv_bench/scratch/ and keep
# it as a record: python scripts/asv_keep.py <machine>.
#
# Environment: ASV_MACHINE (default polymm-h100), ASV_GPU_BUDGET seconds for all slices
# (default 400), ASV_GPU_SLICES to run only the named slices (e.g. "cuda_time reference").
# A cliff slice holds a dozen or so cells: each is a process (CuPy start-up) timed for 0.8 s; an
# 8192 square of float64 takes about 20 s with its check (H200), so those have a slice of their own.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-${OUT:-$root/asv_bench}}"
machine="${ASV_MACHINE:-polymm-h100}"
budget="${ASV_GPU_BUDGET:-400}"
warm="${ASV_GPU_WARM:-150}"
commit="${POLYMM_COMMIT:?set POLYMM_COMMIT to the commit the tree was sent from}"
commit_date="${POLYMM_COMMIT_DATE:?set POLYMM_COMMIT_DATE (git log -1 --format=%at)}"
python="${PYTHON:-python3}"
mkdir -p "$out"
log="$out/asv-gpu-$machine.log"
exec > >(tee -a "$log") 2>&1
start=$(date +%s)
echo "asv_gpu_run: $(date -u) machine=$machine commit=$commit budget=${budget}s"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null

# asv discards PYTHONPATH in benchmark processes unless it is given as ASV_PYTHONPATH; the
# wheels installed by setup.sh (asv_runner, pyopencl) live on PYTHONPATH.
export ASV_PYTHONPATH="${PYTHONPATH:-}"
# A host device with 16 cores may take the big sizes too.
export POLYMM_ASV_HOST_MAX_N="${POLYMM_ASV_HOST_MAX_N:-4096}"

# asv needs the commit's date and name from Git. The tree sent here has no history, so a
# stand-in answers exactly the queries asv makes for an existing-environment run.
if ! git -C "$root" rev-parse --verify -q "$commit^{commit}" >/dev/null 2>&1; then
    shim="$(mktemp -d)"
    cat > "$shim/git" <<EOF
#!/bin/sh
case "\$1" in
  rev-parse) echo $commit ;;
  name-rev) echo main ;;
  rev-list) echo "commit $commit"; echo $commit_date ;;
  config) exit 1 ;;
  *) echo "asv_gpu_run git stand-in: unsupported: git \$*" >&2; exit 1 ;;
esac
EOF
    chmod +x "$shim/git"
    export PATH="$shim:$PATH"
    mkdir -p "$root/.git"   # asv recognises a local repository by this folder
    echo "asv_gpu_run: no Git history here; using a stand-in for commit $commit"
fi

pack() {
    [ -d "$root/asv_bench/scratch/results/$machine" ] || return 0
    tar czf "$out/.asv-results.tmp" -C "$root/asv_bench/scratch" "results/$machine" results/benchmarks.json \
        && mv "$out/.asv-results.tmp" "$out/asv-results-$machine.tgz"
}

PYTHON="$python" "$root/scripts/asv_machine.sh" "$machine" >/dev/null || exit 2
cd "$root/asv_bench"

# name|seconds|regex...   (parameter combinations are matched as "name(params)"), most
# wanted first. Every selected combination is its own process (CuPy/OpenCL start-up each
# time), so slices are small: one cut short by its time box loses only itself.
f32="'float32'"
slices=(
  "cuda_time|70|Square\.time_matmul\('cuda', '(naive|tiled|auto)', (256|1024|2048|4096), $f32\)"
  "cuda_gflops|75|Square\.track_gflops\('cuda', '(naive|tiled|auto)', (256|1024|2048|4096), $f32\)"
  "reference|45|Reference\.(time_matmul|track_gflops)\('cupy', (1024|2048|4096), $f32\)"
  "cuda_ratio|45|Square\.track_ratio_to_reference\('cuda', '(tiled|auto)', (1024|2048|4096), $f32\)"
  "opencl_time|50|Square\.time_matmul\('opencl', '(naive|tiled|auto)', (1024|4096), $f32\)|Square\.time_matmul\('opencl', 'tiled-dynamic', 4096"
  "opencl_gflops|50|Square\.track_gflops\('opencl', '(naive|tiled|auto)', (1024|4096), $f32\)|Square\.track_gflops\('opencl', 'tiled-dynamic', 4096"
  "shapes_cuda|60|(Shapes|Batched)\.\w+\('cuda', 'auto'"
  "cuda_f64|40|Square\.(time_matmul|track_gflops)\('cuda', '(tiled|auto)', (1024|4096), 'float64'\)"
  "cpu|50|Square\.(time_matmul|track_gflops)\('cpu', 'auto', (1024|4096), $f32\)|Reference\.(time_matmul|track_gflops)\('numpy', (1024|4096), $f32"
  "opencl_ratio|40|Square\.track_ratio_to_reference\('opencl', 'auto', (1024|4096), $f32\)|(Shapes|Batched)\.track_gflops\('opencl', 'auto'"
  "overhead|30|CallOverhead\.\w+\('cuda'"
  "cliffs_cuda_sq|60|CliffCell\.track_ratio\('cuda', '(square|batch|broadcast)-[\w-]+ float32'\)"
  "cliffs_cuda_mv|60|CliffCell\.track_ratio\('cuda', '(gemv|gevm|n4|m4|deep-k|outer|transposed|fortran|negative|step)-[\w-]+ float32'\)"
  "cliffs_cuda_tc|75|CliffCell\.track_ratio\('cuda', '(tc-square-(4096|8192) (float16|int8)|tf32(x3)?-square-(4096|8192) float32)'\)"
  "cliffs_cuda_tc2|75|CliffCell\.track_ratio\('cuda', '(tc-square-(2048|4096)|tc-skinny|tc-batched) (bfloat16|float64|complex128)'\)"
  "cliffs_cuda_tc3|75|CliffCell\.track_ratio\('cuda', 'tc-square-8192 (bfloat16|float64|complex128)'\)"
  "cliffs_cuda_f64|60|CliffCell\.track_ratio\('cuda', '(square-\d+|batch-[\w-]+|gemv-4096) float64'\)"
  "cliffs_opencl|75|CliffCell\.track_ratio\('opencl', '(square|batch|gemv|n4|transposed)-[\w-]+ float32'\)"
)
# Compile every kernel the slices will use once, up front: CuPy and PyOpenCL cache the
# binaries on disk, so each benchmark process then only loads them (inside its own slice a
# compile would eat the time box).
if [ "$warm" -gt 0 ]; then
    echo "asv_gpu_run: warming kernel caches (at most ${warm}s)"
    timeout "$warm" "$python" - <<'PY'
import time
import numpy as np
import polymm

t0 = time.time()
avail = {i.name: i for i in polymm.backends() if i.available}
print("available:", {n: i.devices for n, i in avail.items()})
rng = np.random.default_rng(0)
jobs = [(b, a, n, d) for b in ("cuda", "opencl") if b in avail for a in avail[b].algorithms
        for n in (256, 1024, 2048, 4096) for d in ("float32", "float64")
        if not (d == "float64" and n in (256, 2048))]
jobs += [(b, "auto", s, "float32") for b in ("cuda", "opencl") if b in avail
         for s in ((16384, 64, 256), (1023, 1025, 1027), (4095, 4097, 4099), (4096, 64, 64, 64), (256, 16, 16, 16))]
for b, a, n, d in jobs:
    shape = (n, n, n) if isinstance(n, int) else n
    if len(shape) == 3:
        m, nn, k = shape
        x, y = rng.standard_normal((m, k)).astype(d), rng.standard_normal((k, nn)).astype(d)
    else:
        bb, m, nn, k = shape
        x, y = rng.standard_normal((bb, m, k)).astype(d), rng.standard_normal((bb, k, nn)).astype(d)
    try:
        polymm.matmul(x, y, backend=b, algorithm=a)
    except Exception as exc:
        print("warm", b, a, shape, d, "->", type(exc).__name__, str(exc)[:120])
print(f"warmed {len(jobs)} kernels in {time.time() - t0:.1f}s", flush=True)
# The cliff slices' cells, each measured once without timing: the tensor-core dtypes and the
# NVIDIA OpenCL cells compile kernels of their own, which would otherwise eat their slices.
from polymm.tools import cliffs
for b, cases, dtypes in (
    ("cuda", "tc-*,tf32-square-*,tf32x3-square-*", None),
    ("opencl", "square-*,batch-*,gemv-*,n4-*,transposed-*", ["float32"]),
):
    if b in avail:
        t1 = time.time()
        try:
            cells = cliffs.run([b], cases=cases, dtypes=dtypes, budget=0.0)
            print(f"warmed {len(cells)} {b} cliff cells in {time.time() - t1:.1f}s", flush=True)
        except Exception as exc:
            print("warm cliffs", b, "->", type(exc).__name__, str(exc)[:120])
PY
fi

for entry in "${slices[@]}"; do
    IFS='|' read -r name seconds regex <<<"$entry"
    regex="${entry#*|*|}"
    if [ -n "${ASV_GPU_SLICES:-}" ] && [[ " $ASV_GPU_SLICES " != *" $name "* ]]; then
        continue
    fi
    left=$(( budget - ($(date +%s) - start) ))
    if [ "$left" -lt 20 ]; then
        echo "asv_gpu_run: budget spent, skipping slice $name"
        continue
    fi
    [ "$seconds" -gt "$left" ] && seconds=$left
    echo "asv_gpu_run: slice $name (${seconds}s): $regex"
    # asv_run.py: a slice cut short by its time box leaves no benchmark process behind; spawn: a
    # fresh interpreter per combination, as recorded so far (CUDA does not survive a fork)
    timeout --kill-after=10 "$seconds" "$python" "$root/scripts/asv_run.py" run --config asv.existing.conf.json \
        --machine "$machine" --set-commit-hash "$commit" --show-stderr --launch-method spawn --bench "$regex"
    echo "asv_gpu_run: slice $name exit $? after $(( $(date +%s) - start ))s"
    pack   # after every slice: if the whole command is cut short, what is done still comes back
done
pack
echo "asv_gpu_run: packed $(tar tzf "$out/asv-results-$machine.tgz" | wc -l) entries into $out/asv-results-$machine.tgz"
