"""``polymm tune --backend cpu``: what it records in the tuning file is what the next process uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

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
    found = tuning.tune(dtypes=("float32",), n=96, large=128, seconds=0.05, max_tiles=1, log=lines.append, teams=(64,))
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


_SHOW_TEAMS = (
    "import json, numpy as np, numba, polymm; from polymm_numba import params; "
    "a = np.ones((1, 256, 256), np.float32); b = np.ones((1, 256, 256), np.float32); out = np.empty_like(a); "
    "plan = polymm.get_backend('cpu').explain(a, b, out, 'auto'); "
    "v = np.ones((1, 4096, 1), np.float32); gemv = polymm.get_backend('cpu').explain("
    "np.ones((1, 4096, 4096), np.float32), v, np.empty_like(v), 'auto'); "
    "print(json.dumps({'cap': params.team_cap(256**3, np.dtype('float32')), 'threads': plan['threads'], "
    "'path': plan['path'], 'cites': [s.cite for s in plan['settings']], 'numba': numba.get_num_threads(), "
    "'gemv': [gemv['path'], gemv['threads']]}))"
)


def test_recorded_team_sizes_are_read_and_planned_for_by_the_next_process(tmp_path):
    path = tmp_path / "tuning.json"
    entry = {"value": [[256**3, 1], [1024**3, 2]], "why": "test", "evidence": {}}
    path.write_text(json.dumps({params.TUNING_KEY: {"cpu-teams float32": entry}}))
    env = dict(os.environ, POLYMM_TUNING=str(path), NUMBA_NUM_THREADS="2")
    done = subprocess.run([sys.executable, "-c", _SHOW_TEAMS], env=env, capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["numba"] == 2 and seen["cap"] == 1
    # planned for one thread: the serial packed kernel, and explain cites the tuning file's entry
    assert seen["threads"] == 1 and seen["path"] == "auto_serial"
    assert f"tuning file {path} / cpu-teams.float32" in seen["cites"]
    # a matrix-vector product of as much work streams memory on every thread: not capped
    assert not seen["gemv"][0].startswith("auto_") and seen["gemv"][1] == 2


def test_team_cap_takes_the_nearest_class_by_ratio(monkeypatch):
    f32 = np.dtype("float32")
    monkeypatch.setitem(params.TEAMS, f32, ((256**3, 4), (512**3, 8), (2048**3, 16)))
    assert params.team_cap(64**3, f32) == 4  # below the smallest class: its team
    assert params.team_cap(256**3, f32) == 4
    assert params.team_cap(300**3, f32) == 4 and params.team_cap(400**3, f32) == 8  # sqrt(256*512)^3 between
    assert params.team_cap(1000**3, f32) == 8 and params.team_cap(1100**3, f32) == 16
    assert params.team_cap(2048**3, f32) == 16 and params.team_cap(3 * 2048**3, f32) == 0  # beyond: no cap
    assert params.team_cap(256**3, np.dtype("float64")) == 0  # untuned dtype


def test_a_malformed_team_entry_is_ignored_with_a_warning(tmp_path):
    path = tmp_path / "tuning.json"
    entry = {"value": [[256**3, 0]], "why": "test", "evidence": {}}
    path.write_text(json.dumps({params.TUNING_KEY: {"cpu-teams float32": entry}}))
    env = dict(os.environ, POLYMM_TUNING=str(path))
    show = "from polymm_numba import params; import numpy as np; print(params.team_cap(256**3, np.dtype('float32')))"
    done = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split()[-1] == "0"
    assert "ignoring the float32 team sizes" in done.stderr


def test_the_tuner_records_team_sizes(tmp_path, monkeypatch):
    path = tmp_path / "tuning.json"
    monkeypatch.setenv("POLYMM_TUNING", str(path))
    from polymm.kernels import params as kernel_params

    kernel_params._tuned.cache_clear()
    lines = []
    classes, evidence = tuning.tune_teams("float64", sizes=(48, 96), seconds=0.01, log=lines.append)
    kernel_params._tuned.cache_clear()
    assert [work for work, _ in classes] == [48**3, 96**3]
    assert all(team in tuning.team_candidates(__import__("numba").get_num_threads()) for _, team in classes)
    recorded = json.loads(path.read_text())[params.TUNING_KEY]["cpu-teams float64"]
    assert recorded["value"] == classes and "us per team size" in evidence["result"]
    assert any("written to" in line for line in lines)


def test_a_block_of_calls_leaves_its_first_call_untimed():
    # the first call of each block pays for the change from the call before (another team size)
    calls = []

    def first_of_block_slow():
        calls.append(None)
        time.sleep(0.02 if len(calls) % 3 == 1 else 0.0)

    best = tuning._time_round_robin({"x": first_of_block_slow}, 0.0, clock=time.perf_counter, block=3)
    assert len(calls) == 9  # three rounds of a block of three
    assert best["x"] < 0.01
    every = tuning._time_round_robin({"x": lambda: time.sleep(0.002)}, 0.0, clock=time.perf_counter)
    assert every["x"] >= 0.002


def test_candidates_are_timed_on_every_thread(monkeypatch):
    # a tile that wins on one thread can share out badly (the 16-core host's float64 14 x 16)
    import numba
    import polymm

    backend = polymm.get_backend("cpu")
    packed, asked = backend._packed, []

    def spy(kind, dtype, mr, nr):
        kernel = packed(kind, dtype, mr, nr)

        def call(a, b, out, mc, nc, kc, nth):
            asked.append((kind, a.shape[1], nth))
            return kernel(a, b, out, mc, nc, kc, nth)

        return call

    monkeypatch.setattr(backend, "_packed", spy)
    threads = numba.get_num_threads()
    found = tuning.tune(dtypes=("float32",), n=96, large=128, seconds=0.02, max_tiles=1, save=False, teams=())
    _, evidence = found["float32"]
    kind = "auto_parallel" if threads > 1 else "auto_serial"
    assert {(k, side, nth) for k, side, nth in asked} == {(kind, 96, threads), (kind, 128, threads)}
    assert ("on one thread" if threads == 1 else f"on {threads} threads") in evidence["result"]
