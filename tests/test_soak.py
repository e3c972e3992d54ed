"""The soak run (``polymm soak``): a stream of varied products with memory watched, and the CPU
backend's memory bounded under it."""

from __future__ import annotations

import json

import pytest

import polymm
from polymm.tools import cli, soak

#: Resident growth allowed on ``cpu`` over ~4,500 varied products after the first 1,500
#: (float32, float64, int32; M, N, K up to 300; two threads). Measured on 2026-11-27 (2-core
#: Xeon, commit 3c65db4): 4.2-15.1 MB over five runs, most of it the C allocator's heaps (see
#: docs/memory.md). Before the small-product kernels stopped being compiled per N, float32
#: alone grew 183 MB over 2,200 products.
CPU_GROWTH_MB = 40


def test_a_soak_counts_checks_and_samples_memory():
    run = soak.run("cpu", products=400, threads=2, dtypes=["float32", "int8"], max_side=40, seed=3)
    assert run.products == 400 and run.checked > 0
    assert run.wrong == 0 and run.errors == 0, run.messages
    assert run.samples[0].products == 0 and run.samples[-1].products == 400
    assert all(s.resident > 10 * 2**20 for s in run.samples)
    assert all(a.products <= b.products and a.seconds <= b.seconds for a, b in zip(run.samples, run.samples[1:]))


def test_a_wrong_value_is_counted_and_named(monkeypatch):
    """A backend that returns a wrong number is caught by the sampled check, not hidden."""
    real = polymm.matmul

    def off_by_one(x1, x2, **kw):
        return real(x1, x2, **kw) + 1

    monkeypatch.setattr(soak.polymm, "matmul", off_by_one)
    monkeypatch.setattr(soak, "CHECK_SHARE", 1.0)
    run = soak.run("cpu", products=20, dtypes=["float64"], max_side=20)
    assert run.wrong == 20 and run.errors == 0
    assert "float64" in run.messages[0]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="seconds=, products="):
        soak.run("cpu")
    with pytest.raises(ValueError, match="positive"):
        soak.run("cpu", products=10, threads=0)
    with pytest.raises(TypeError, match="not understood"):
        soak.run("cpu", products=10, dtypes=["float33"])


def test_the_command_writes_json_and_a_plot(tmp_path, capsys):
    doc, png = tmp_path / "soak.json", tmp_path / "soak.png"
    args = ["soak", "--products", "300", "--threads", "2", "--dtypes", "float32,int32", "--max-side", "50"]
    assert cli.main([*args, "--warmup", "100", "--json", str(doc), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "polymm soak cpu: 300 products" in out and "0 wrong, 0 errors" in out
    document = json.loads(doc.read_text())
    assert document["suite"] == "soak" and document["soak"]["products"] == 300
    assert document["verdict"]["warmup_products"] == 75  # a quarter of a run shorter than --warmup
    assert document["samples"][-1]["products"] == 300
    assert png.stat().st_size > 10_000


def test_cpu_memory_stays_flat_under_varied_shapes():
    """Issue 38's CI check: memory after the warm-up does not grow with the variety of shapes."""
    run = soak.run("cpu", products=6000, threads=2, dtypes=["float32", "float64", "int32"], seed=5)
    found = soak.verdict(run, warmup=1500)
    assert run.wrong == 0 and run.errors == 0, run.messages
    assert found["measured_products"] > 3000, found
    assert found["growth_mb"] < CPU_GROWTH_MB, found
