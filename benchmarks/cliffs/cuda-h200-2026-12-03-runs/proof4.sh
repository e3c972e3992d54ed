# The H200 after the session's last kernel change (matvec.c's runs along K, dab66df): every
# dtype's matrix-vector cells once (the grid record's part for them), then proof2.sh (the CUDA
# device-test folder whole, the conformance suite on cuda and on NVIDIA OpenCL, polymm fuzz with
# seeds 20261270-77, 100,000 cases), everything packed into one archive under $OUT.
set -u
r=$OUT/r; mkdir -p $r
tag=2026-12-03-$(cat .device/tag.txt)
( time timeout 110 polymm bench --suite cliffs --backend cuda --budget 0.6 --cases grid-matvec,grid-fast-matvec,grid-tf32-matvec,grid-tf32x3-matvec,n4-2048 --json $r/cuda-h200-gridMV-$tag.json ) > $r/bench-mv.log 2>&1
SEED=2026127 TESTS_S=280 FUZZ_S=78 FUZZ_TIMEOUT=95 bash "$(dirname "$0")/proof2.sh"
