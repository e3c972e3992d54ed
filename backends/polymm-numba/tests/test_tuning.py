"""``polymm tune --backend cpu``: what it records in the tuning file is what the next process uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from polymm_numba import params, tuning

_SHOW = (
    "import json, numpy as np; from polymm_numba import params; "
    "blk = params.AUTO_BLOCKING[np.dtype('float32')]; s = params.blocking_setting('float32'); "
    "print(json.dumps({'mr': blk.mr, 'nr': blk.nr, 'mc': blk.mc, 'kc': blk.kc, 'device': s.device}))"
)


def _next_process(tuning_file):
    """The float32 blocking a fresh process reads with ``tuning_file`` as its tuning file."""
    env = dict(os.environ, POLYMM_TUNING=str(tuning_file))
    done = subprocess.run([sys.executable, "-c", _SHOW], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def _entry(**value):
    return {params.TUNING_KEY: {"cpu-blocking float32": {"value": value, "why": "test", "evidence": {}}}}


def test_a_recorded_tuning_is_read_by_the_next_process(tmp_path):
    blk = params.AUTO_BLOCKING[np.dtype("float32")]
    mc = 3 * blk.mr  # a blocking the database does not hold
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(_entry(mr=blk.mr, nr=blk.nr, mc=mc, nc=blk.nc, kc=72)))
    seen, _ = _next_process(path)
    assert (seen["mr"], seen["nr"], seen["mc"], seen["kc"]) == (blk.mr, blk.nr, mc, 72)
    assert seen["device"] == f"tuning file {path}"


def test_a_blocking_that_cannot_run_here_is_ignored_with_a_warning(tmp_path):
    blk = params.AUTO_BLOCKING[np.dtype("float32")]
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(_entry(mr=blk.mr, nr=blk.nr + 1, mc=blk.mc, nc=blk.nc, kc=blk.kc)))
    seen, err = _next_process(path)
    assert (seen["nr"], seen["device"]) == (blk.nr, params.blocking_setting("float32").device)
    assert "ignoring the float32 blocking" in err and "polymm tune --backend cpu" in err


def test_the_tuner_records_a_blocking_the_next_process_uses(tmp_path, monkeypatch):
    path = tmp_path / "tuning.json"
    monkeypatch.setenv("POLYMM_TUNING", str(path))
    from polymm.kernels import params as kernel_params

    kernel_params._tuned.cache_clear()
    lines = []
    found = tuning.tune(dtypes=("float32",), n=96, seconds=0.05, max_tiles=1, log=lines.append)
    kernel_params._tuned.cache_clear()
    chosen, evidence = found["float32"]
    assert "GFLOP/s" in evidence["result"] and any("written to" in line for line in lines)
    seen, _ = _next_process(path)
    assert (seen["mr"], seen["nr"], seen["mc"], seen["kc"]) == (chosen.mr, chosen.nr, chosen.mc, chosen.kc)


def test_candidates_fit_the_vector_registers():
    for name in ("float32", "float64"):
        lanes = params.VECTOR_BYTES // np.dtype(name).itemsize
        tiles = tuning.tile_candidates(name)
        blk = params.AUTO_BLOCKING[np.dtype(name)]
        assert tiles[0] == (blk.mr, blk.nr)
        for mr, nr in tiles[1:]:
            assert nr % lanes == 0 and mr * (nr // lanes) + nr // lanes + 1 <= params.SMALL_REGS
        for mc, kc in tuning.block_candidates(name, *tiles[-1]):
            assert mc % tiles[-1][0] == 0 and kc >= 64


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sysfs")
def test_caches_are_read():
    assert tuning.caches().get("L1", 0) >= 16 * 1024
