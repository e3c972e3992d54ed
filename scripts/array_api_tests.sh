#!/usr/bin/env bash
# The array API's own tests (data-apis/array-api-tests) of matmul, tensordot, vecdot and the linalg
# extension's matmul / tensordot / vecdot (and their signatures), against polymm: the suite's
# namespace is polymm.testing.array_api_namespace (array-api-strict's, polymm's contractions in).
#
#   scripts/array_api_tests.sh                          # on each backend below, default examples
#   scripts/array_api_tests.sh --max-examples 2000      # more examples (pytest options pass through)
#   POLYMM_XP_BACKEND=opencl POLYMM_XP_BASE=numpy scripts/array_api_tests.sh
#   scripts/array_api_tests.sh --clone-only             # only fetch the suite (CI; tests/test_array_api_tests.py runs it)
#
# Needs hypothesis, ndindex and pytest-json-report (polymm's "test" extra has them). The suite is
# cloned at a pinned commit, with its array-api submodule, into $ARRAY_API_TESTS_DIR (default
# .array-api-tests). Backends: $POLYMM_XP_BACKEND (names, space-separated), default "cpu opencl"
# (opencl where it is available).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=${ARRAY_API_TESTS_DIR:-.array-api-tests}
rev=55fcc60179efa2680ddd6cd926ddf17b83530e2b  # data-apis/array-api-tests, 2026-11
if [ ! -d "$dir/array_api_tests" ]; then
    git clone -q https://github.com/data-apis/array-api-tests "$dir"
    git -C "$dir" checkout -q "$rev"
    git -C "$dir" submodule update --init -q
fi
if [ "${1:-}" = "--clone-only" ]; then
    exit 0
fi
backends=${POLYMM_XP_BACKEND:-$(python -c 'import polymm
print(" ".join(b.name for b in polymm.backends() if b.name in ("cpu", "opencl") and b.available))')}
export ARRAY_API_TESTS_MODULE=polymm.testing.array_api_namespace
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
status=0
for backend in $backends; do
    echo "== array-api-tests, polymm backend $backend, base ${POLYMM_XP_BASE:-array_api_strict}"
    (cd "$dir" && POLYMM_XP_BACKEND=$backend python -m pytest -q -p no:cacheprovider --disable-deadline \
        array_api_tests/test_linalg.py array_api_tests/test_signatures.py array_api_tests/test_has_names.py \
        -k "matmul or tensordot or vecdot" "$@") || status=1
done
exit $status
