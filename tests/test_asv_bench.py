"""The asv suite and the offline dashboard tooling stay runnable (asv itself runs them elsewhere).

Quick checks: the benchmark modules import and their parameters are what the dashboard
expects, one small benchmark of each kind really runs on the CPU backend, an unavailable
backend is skipped the asv way (``NotImplementedError``), both asv configurations load, and
every CDN reference in the installed asv's page has a vendored copy.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def _load_suite(name="polymm_asv_benchmarks"):
    """asv_bench/benchmarks as a package of its own name (``benchmarks`` is too common a name)."""
    folder = ROOT / "asv_bench" / "benchmarks"
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.matmul"), importlib.import_module(f"{name}.common")


matmul, common = _load_suite()


def test_parameters_cover_the_dashboard():
    backends, algorithms, sizes, dtypes = matmul.Square.params
    assert {"cpu", "opencl", "cuda"} <= set(backends)
    assert {"naive", "tiled", "auto"} <= set(algorithms)
    assert min(sizes) == 64 and max(sizes) == 4096
    assert "float32" in dtypes
    assert any("tall-skinny" in s for s in matmul.SHAPES) and any("odd" in s for s in matmul.SHAPES)
    assert matmul.BATCHES
    for cls in (matmul.Square, matmul.Shapes, matmul.Batched):
        assert len(cls.param_names) == len(cls.params)
        assert cls.track_gflops.unit == "GFLOP/s"


@pytest.mark.parametrize(
    "cls,params",
    [
        (matmul.Square, ("cpu", "auto", 64, "float32")),
        (matmul.Shapes, ("cpu", "tiled", "tall-skinny 16384x64x256")),
        (matmul.Batched, ("cpu", "auto", "256 x 16x16")),
    ],
)
def test_a_small_benchmark_runs_on_the_cpu(cls, params):
    bench = cls()
    bench.setup(*params)
    bench.time_matmul(*params)
    assert bench.track_gflops(*params) > 0
    assert bench.track_ratio_to_reference(*params) > 0


def test_call_overhead_and_reference_run():
    bench = matmul.CallOverhead()
    bench.setup("cpu", 4)
    bench.time_matmul("cpu", 4)
    bench.time_reference("cpu", 4)
    ref = matmul.Reference()
    ref.setup("numpy", 256, "float64")
    assert ref.track_gflops("numpy", 256, "float64") > 0


def test_unavailable_backends_and_sizes_are_skipped_not_failed():
    with pytest.raises(NotImplementedError):
        matmul.Square().setup("no-such-backend", "auto", 64, "float32")
    with pytest.raises(NotImplementedError):
        matmul.Square().setup("cpu", "tiled-dynamic", 64, "float32")  # not a cpu algorithm
    with pytest.raises(NotImplementedError):
        matmul.Square().setup("cpu", "naive", 4096, "float32")  # minutes on a laptop
    if importlib.util.find_spec("cupy") is None:
        with pytest.raises(NotImplementedError):
            matmul.Reference().setup("cupy", 256, "float32")


def test_random_inputs_are_never_zero():
    for dtype in ("float32", "int8", "complex64", "bool"):
        x = common.random_array((64, 64), dtype)
        assert x.any()


@pytest.mark.skipif(importlib.util.find_spec("asv") is None, reason="asv is not installed (the docs extra)")
@pytest.mark.parametrize("name", ["asv.conf.json", "asv.existing.conf.json"])
def test_asv_configurations_load(name):
    from asv.config import Config

    conf = Config.load(str(ROOT / "asv_bench" / name))
    assert conf.project == "polymm"
    assert Path(conf.benchmark_dir).name == "benchmarks"


@pytest.mark.skipif(importlib.util.find_spec("asv") is None, reason="asv is not installed (the docs extra)")
def test_every_cdn_reference_of_asvs_page_is_vendored():
    import asv

    publish = importlib.import_module("asv_publish_offline")
    page = Path(asv.__file__).parent / "www" / "index.html"
    html, unknown = publish.localise(page.read_text(encoding="utf-8"))
    assert not unknown, f"asv loads these from CDNs with no vendored copy: {unknown}"
    assert "cdn.jsdelivr" not in html and "cdnjs.cloudflare" not in html and "code.jquery.com" not in html
    for _, local in publish.LOCAL:
        assert (ROOT / "asv_bench" / "vendor" / local).is_file(), local


def test_cliff_suite_tracks_worst_cell_and_geomean():
    suite = importlib.import_module("polymm_asv_benchmarks.cliffs")
    summary = suite.run_suite(["cpu", "no-such-backend"], cases="square-32", budget=0.02)
    bench = suite.CliffSuite()
    bench.setup(summary, "cpu")
    worst, geomean = bench.track_worst_cell(summary, "cpu"), bench.track_geomean(summary, "cpu")
    assert 0 < worst <= geomean
    with pytest.raises(NotImplementedError):
        bench.setup(summary, "no-such-backend")
