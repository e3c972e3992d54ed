"""A corrupted Numba cache is detected and rebuilt: a correct answer and one warning, never a crash."""

from __future__ import annotations

import os
import subprocess
import sys

PRODUCT = """
import numpy as np, polymm
from polymm.testing import assert_matches, random_array
rng = np.random.default_rng(7)
x1, x2 = random_array(rng, (3, 3), "float64"), random_array(rng, (3, 3), "float64")
assert_matches(polymm.matmul(x1, x2, backend="cpu"), x1, x2)
print("ok")
"""


def _run(cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    return subprocess.run([sys.executable, "-c", PRODUCT], capture_output=True, text=True, env=env, timeout=600)


def test_a_corrupted_numba_cache_is_rebuilt(tmp_path):
    first = _run(tmp_path)
    assert first.returncode == 0 and first.stdout.strip() == "ok", first.stderr
    files = [p for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert files, "the kernel was not cached"
    for path in files:  # truncated and overwritten, as a full disk or a killed writer leaves them
        path.write_bytes(path.read_bytes()[:7] + b"\x00garbage")
    second = _run(tmp_path)
    assert second.returncode == 0 and second.stdout.strip() == "ok", second.stderr
    assert second.stderr.count("RuntimeWarning") == 1 and "rebuilt" in second.stderr, second.stderr
    third = _run(tmp_path)  # rebuilt for good: read from the cache again, silently
    assert third.returncode == 0 and "Warning" not in third.stderr, third.stderr
