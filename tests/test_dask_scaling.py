"""``scripts/dask_scaling.py``: its CPU-only pieces (arguments, the record, the plot, a tiny CPU cluster run).

The GPU runs themselves are recorded by hand on a GPU machine (``docs/scaling.md``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dask.array", reason="Dask is not installed (pip install 'polymm[dask]')")
pytest.importorskip("distributed")

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "dask_scaling.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("dask_scaling", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["dask_scaling"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["dask_scaling"]


def test_arguments(script):
    args = script.parse_args([])
    assert args.strong[0] == 32768 and args.workers is None and not args.cpu and args.reduction == "auto"
    args = script.parse_args(["--workers", "1,2", "--strong", "64,128", "--chunk", "32", "--reduction", "tree"])
    assert (args.workers, args.strong, args.chunk, args.reduction) == ([1, 2], [64, 128], 32, "tree")
    args = script.parse_args(["--tall", "256:64", "--deep", "64:512,32:128", "--precision", "tf32x3"])
    assert (args.tall, args.deep, args.precision, args.dtype) == (
        [(256, 64)],
        [(64, 512), (32, 128)],
        "tf32x3",
        "float32",
    )
    bad_args = (["--workers", "one"], ["--workers", "0"], ["--chunk", "0"], ["--reduction", "sideways"])
    bad_args += (["--tall", "256"], ["--deep", "64:0"], ["--dtype", "int3"])
    for bad in bad_args:
        with pytest.raises(SystemExit):
            script.parse_args(bad)


def test_nvlink_multicast_is_off_in_every_process(script):
    import os

    assert script.WORKER_ENV == {"NCCL_NVLS_ENABLE": "0"} and os.environ["NCCL_NVLS_ENABLE"] == "0"


def test_without_a_gpu_it_says_so(script, capsys):
    try:
        import cupy  # noqa: F401

        pytest.skip("CuPy is installed here: the no-GPU message cannot be provoked")
    except ImportError:
        pass
    assert script.main(["--strong", "64", "--weak", "32", "--chunk", "32"]) == 2
    err = capsys.readouterr().err
    assert "CuPy is not installed" in err and "--cpu" in err


def test_summary_arithmetic(script):
    def row(mode, n, workers, impl, seconds, tflops):
        return {"mode": mode, "n": n, "workers": workers, "impl": impl, "median_s": seconds, "tflops": tflops}

    figures = [
        row("strong", 64, 1, "polymm", 2.0, 1.0),
        row("strong", 64, 2, "polymm", 1.25, 1.6),
        row("strong", 64, 2, "dask", 1.0, 2.0),
        row("weak", 32, 1, "polymm", 1.0, 1.0),
        row("weak", 32, 2, "polymm", 1.0, 1.5),
        {"mode": "strong", "n": 128, "workers": 1, "impl": "polymm", "error": "MemoryError()"},
    ]
    s = script.summary(figures)
    assert s["strong_speedup"] == {"polymm n=64 w=2": 1.6}
    assert s["polymm_over_dask"] == {"strong n=64 w=2": 0.8}
    assert s["weak_efficiency"] == {"polymm n0=32 w=1": 1.0, "polymm n0=32 w=2": 0.75}


def test_cpu_run_writes_json_and_plot(tmp_path):
    """The command itself (its block maker must reach the workers), on a one-worker CPU cluster, tiny sizes."""
    out, png = tmp_path / "scaling.json", tmp_path / "scaling.png"
    argv = ["--cpu", "--workers", "1", "--strong", "96", "--weak", "40", "--chunk", "32", "--repeats", "1"]
    argv += ["--tall", "128:32", "--deep", "32:128"]
    run = subprocess.run(
        [sys.executable, str(SCRIPT), *argv, "--json", str(out), "--plot", str(png)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "strong w=1" in run.stdout
    record = json.loads(out.read_text())
    assert set(record) >= {"date", "device", "command", "versions", "settings", "figures", "summary"}
    assert record["device"].startswith("cpu") and record["versions"]["dask"] and "--cpu" in record["command"]
    figures = record["figures"]
    modes = ("strong", "tall", "deep", "weak")
    assert {(f["mode"], f["impl"]) for f in figures} == {(m, i) for m in modes for i in ("polymm", "dask")}
    for f in figures:
        assert "error" not in f, f
        assert len(f["seconds"]) == 1 and f["median_s"] > 0 and f["tflops"] > 0
        assert len(f["bytes_moved"]) == 1 and f["bytes_moved"][0] == 0  # one worker: nothing moves
        if f["impl"] == "polymm":
            assert f["check"]["passed"] and f["check"]["max_rel_diff_vs_library"] < 1e-4
            assert f["reduction"] in ("panel", "tree")
    assert [f["shape"] for f in figures if f["mode"] == "weak"][0] == [[40, 40], [40, 40]]
    assert [f["shape"] for f in figures if f["mode"] == "tall"][0] == [[128, 32], [32, 32]]
    assert [f["shape"] for f in figures if f["mode"] == "deep"][0] == [[32, 128], [128, 32]]
    assert png.stat().st_size > 10_000


def test_a_throughput_above_the_peak_is_an_error(script):
    """A clock stopped before the devices finished shows as an impossible rate: recorded as an error."""
    row = {"impl": "polymm", "tflops": 297.0, "median_s": 0.1}
    flagged = script._above_peak(row, "1 x NVIDIA H200", 1)
    assert flagged["error"] == "297.0 TFLOP/s is above the peak of 1 x 1 x NVIDIA H200 (67.0)"
    assert "error" not in script._above_peak({**row, "tflops": 120.0}, "2 x NVIDIA H200", 2)
    assert "error" not in script._above_peak(row, "1 x Some Future GPU", 1)  # unknown peak: kept
    tf32 = {**row, "dtype": "float32", "precision": "tf32x3"}  # TF32 tensor cores: a higher ceiling
    assert "error" not in script._above_peak(tf32, "1 x NVIDIA H200", 1)
    assert "error" in script._above_peak({**tf32, "tflops": 600.0}, "1 x NVIDIA H200", 1)


def test_gpu_transport_says_when_it_falls_back_to_tcp(script, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed_ucxx", None)  # as if not installed
    assert script.transport("auto") == "tcp"
    assert "distributed-ucxx is not installed" in capsys.readouterr().err
    assert script.transport("ucx") == "ucx" and script.transport("tcp") == "tcp"


def test_the_clock_waits_for_the_devices_and_counts_transfers(script):
    """``timed`` synchronizes every worker after ``wait`` and reports the bytes the workers received
    from each other: on a two-worker CPU cluster, a product whose blocks live on both moves some."""
    import cloudpickle
    import dask.array as da
    import distributed

    cloudpickle.register_pickle_by_value(script)  # the workers cannot import the script by name
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as client:
            client.wait_for_workers(2)
            a = da.ones((256, 256), chunks=64).persist()
            b = da.ones((256, 256), chunks=64).persist()
            distributed.wait([a, b])
            synced = []
            real_run = client.run

            def run(fn, *args, **kwargs):
                synced.append(fn.__name__)
                return real_run(fn, *args, **kwargs)

            client.run = run
            seconds, moved, receiving, result = script.timed(client, a @ b)
            assert seconds > 0 and moved > 0 and receiving > 0
            assert synced == ["_received", "_device_sync", "_received"]
            assert float(result[0, 0].compute()) == 256.0


def test_bytes_script_records_measured_and_estimated_bytes(tmp_path):
    """``scripts/dask_bytes.py`` on one case: the record's fields, and polymm's bytes equal to explain's estimate."""
    out = tmp_path / "bytes.json"
    script = SCRIPT.parent / "dask_bytes.py"
    # strict pins: with loose ones (the default) work stealing may move a task when a worker falls behind,
    # as it does on a loaded machine, and a few more bytes move than estimated
    env = dict(os.environ, DASK_POLYMM__PIN="strict")
    run = subprocess.run(
        [sys.executable, str(script), "--cases", "small-x2-broadcast", "--repeats", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads(out.read_text())
    assert set(record) >= {"date", "machine", "command", "what", "cases", "after"}
    assert record["after"]["pin"] == "strict"
    case = record["after"]["cases"]["small-x2-broadcast"]
    assert case["check"] and case["schedule"] == "broadcast"
    assert case["polymm_bytes"] == case["estimate_bytes"] == 512 * 128 * 4  # x2 sent once, to the other worker
    assert case["placement"]["x2"] == [[[0, 0], 0]]
