#!/usr/bin/env bash
# The tensor-core kernels on the lent GPU machine: proof (device tests, the conformance suite on
# `cuda` as "auto" plans it and with every tensor-core family preferred wherever it offers a
# candidate (POLYMM_PREFER: small products too), 100,000 fuzzed cases of the tensor-core dtypes
# and 100,000 of float64 on the FP64 tensor cores, both preferred so) and the tensor-core
# cells of the cliff suite (CUDA events around each whole call, interleaved with cupy.matmul, or
# torch.matmul for bfloat16); and the same for float32 in the "tf32" and "tf32x3" precision
# modes (precision-proof: device tests, the conformance suite in each mode; precision-fuzz:
# up to 100,000 cases of float32 and complex64 per mode, both with POLYMM_CUDA_TF32_MIN_WORK=0 and
# POLYMM_PREFER=tf32 so that small products take the tensor-core paths too; precision-bench: the "tf32*" cells).
#
#   . .device/setup.sh && bash scripts/gpu_tensorcore.sh OUT_DIR LABEL [proof|bench|all|precision-proof|precision-fuzz|precision-bench]
#
# Everything goes to OUT_DIR/tc-LABEL/, packed into OUT_DIR/tc-LABEL.tar.gz (the device tool
# brings back a few files only).
set -uo pipefail
out="${1:?usage: gpu_tensorcore.sh OUT_DIR LABEL [proof|bench|all]}"
label="${2:?usage: gpu_tensorcore.sh OUT_DIR LABEL [proof|bench|all]}"
what="${3:-all}"
dir="$out/tc-$label"
mkdir -p "$dir"
unset CUPY_TF32
status=0
tensor_cores=wgmma,mma-sync,relayout,dmma,tf32,byte-planes  # POLYMM_PREFER: these families win wherever they offer
{
    date -u +%FT%TZ
    git log -1 --format='%H %s' 2>/dev/null || echo "(no git: tarball of a commit)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} >> "$dir/machine.txt"

fuzz() {  # fuzz TAG DTYPES [env... | fuzz options...]: 8 processes x 12,500 cases
    local tag="$1" dtypes="$2" pids=() envs=() opts=()
    shift 2
    for x in "$@"; do if [[ "$x" == *=* && "$x" != -* ]]; then envs+=("$x"); else opts+=("$x"); fi; done
    for i in $(seq 1 8); do
        seed=$((20261200 + i))
        env "${envs[@]}" polymm fuzz --backend cuda --dtypes "$dtypes" --cases 12500 --seed "$seed" --time-budget "${FUZZ_BUDGET:-200}" \
            "${opts[@]}" --json \
            > "$dir/fuzz-$tag-seed$seed.json" 2> "$dir/fuzz-$tag-seed$seed.txt" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    grep -h "polymm fuzz:" "$dir"/fuzz-"$tag"-*.txt
}

if [[ "$what" == proof || "$what" == all ]]; then
    python3 -m pytest -q -n 8 backends/polymm-cuda/tests/test_device.py > "$dir/device-tests.log" 2>&1 || status=1
    python3 -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda > "$dir/conformance-cuda.log" 2>&1 || status=1
    POLYMM_CUDA_DMMA=1 POLYMM_CUDA_PLANES_MIN_WORK=0 POLYMM_PREFER="$tensor_cores" python3 -m pytest -q -n 8 --pyargs polymm.testing \
        --polymm-backend=cuda > "$dir/conformance-cuda-tensor-cores.log" 2>&1 || status=1
    tail -n 1 "$dir"/device-tests.log "$dir"/conformance-*.log
    fuzz tensorcore float16,bfloat16,int8,uint8 POLYMM_PREFER="$tensor_cores"
    fuzz planes int16,uint16,int32,uint32,int64,uint64 POLYMM_CUDA_PLANES_MIN_WORK=0 POLYMM_PREFER=byte-planes
    fuzz dmma float64 POLYMM_CUDA_DMMA=1 POLYMM_PREFER=dmma
fi
if [[ "$what" == precision-proof ]]; then
    python3 -m pytest -q -n 8 backends/polymm-cuda/tests/test_device.py -k "tf32 or wgmma" \
        > "$dir/device-tests-precision.log" 2>&1 || status=1
    for mode in tf32 tf32x3; do  # every product the tensor cores can take, however small
        POLYMM_CUDA_TF32_MIN_WORK=0 POLYMM_PREFER=tf32 python3 -m pytest -q -n 8 --pyargs polymm.testing --polymm-backend=cuda \
            --polymm-precision=$mode \
            > "$dir/conformance-cuda-$mode.log" 2>&1 || status=1
    done
    tail -n 1 "$dir"/device-tests-precision.log "$dir"/conformance-cuda-tf32*.log
fi
if [[ "$what" == precision-fuzz ]]; then
    fuzz tf32 float32,complex64 --precision tf32 POLYMM_CUDA_TF32_MIN_WORK=0 POLYMM_PREFER=tf32
    fuzz tf32x3 float32,complex64 --precision tf32x3 POLYMM_CUDA_TF32_MIN_WORK=0 POLYMM_PREFER=tf32
fi
if [[ "$what" == precision-bench ]]; then
    polymm bench --suite cliffs --backend cuda --cases 'tf32*' \
        --json "$dir/cuda-precision-$label.json" --plot "$dir/cuda-precision-$label.png" \
        > "$dir/cuda-precision-$label.log" 2>&1 || status=1
    tail -n 25 "$dir/cuda-precision-$label.log"
fi
if [[ "$what" == bench || "$what" == all ]]; then
    polymm bench --suite cliffs --backend cuda --cases 'tc-*' --dtype float16,bfloat16,int8 \
        --json "$dir/cuda-tc-$label.json" --plot "$dir/cuda-tc-$label.png" > "$dir/cuda-tc-$label.log" 2>&1 || status=1
    POLYMM_CUDA_DMMA=1 polymm bench --suite cliffs --backend cuda --cases 'tc-*' --dtype float64 \
        --json "$dir/cuda-dmma-$label.json" > "$dir/cuda-dmma-$label.log" 2>&1 || status=1
    tail -n 25 "$dir/cuda-tc-$label.log" "$dir/cuda-dmma-$label.log"
fi
tar -czf "$out/tc-$label.tar.gz" -C "$out" "tc-$label"
exit $status
