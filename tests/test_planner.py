"""The planner as kernel families ranked by one cost model (polymm.kernels.families, cost, planner).

Model devices only: no GPU is needed to ask which candidate wins and why.
"""

import dataclasses

import numpy as np
import pytest

from polymm.kernels import KernelParams, abi, families, planner
from polymm.kernels.cost import Work, wave_fill
from polymm.kernels.families import Candidate, Choice, Family, Problem, Refusal
from polymm.kernels.params import DeviceInfo
from polymm.tools.explain import explain

H100 = DeviceInfo(
    "NVIDIA H100 80GB HBM3", "NVIDIA", "gpu", "cuda", 132, 1024, 48 * 1024, key="model-h100", max_batch=65535, cc=90
)
AMD = DeviceInfo("gfx1100", "Advanced Micro Devices, Inc.", "gpu", "opencl", 48, 256, 64 * 1024, key="model-amd")
POCL = DeviceInfo(
    "pthread-AMD EPYC", "AuthenticAMD", "cpu", "opencl", 2, 4096, 1 << 20, platform="Portable Computing Language",
    vector_bytes=64,
)  # fmt: skip
INTEL_CPU_RUNTIME = dataclasses.replace(
    POCL, name="AMD EPYC", vendor="Intel(R) Corporation", platform="Intel(R) OpenCL"
)


def _row(m, k, batch=1):
    return (0, (m * k if batch > 1 else 0, k, 1))


def _rank(device, dtype, shape, a=None, b=None, precision="default"):
    bt, m, n, k = shape
    a = a or _row(m, k, bt)
    b = b or _row(k, n, bt)
    return planner.rank(Problem(device, np.dtype(dtype), shape, a, b, precision))


def test_wave_fill_counts_the_last_wave():
    assert wave_fill(132, 132) == 1.0
    assert wave_fill(133, 132) == pytest.approx(133 / 264)
    assert wave_fill(66, 132) == 0.5
    assert wave_fill(0, 132) == pytest.approx(1 / 132)  # an empty launch still takes a slot


def test_estimate_grows_with_work_and_shrinks_with_fill():
    one = Work("simt:float32", 1e9, groups=132, tile=(64, 64), bytes=1e6)
    assert one.seconds(AMD) < dataclasses.replace(one, macs=2e9).seconds(AMD)
    assert one.seconds(AMD) < dataclasses.replace(one, groups=24).seconds(AMD)  # half the waves idle
    assert one.seconds(AMD) < dataclasses.replace(one, tile=(16, 16)).seconds(AMD)  # more loads per multiply-add
    assert one.seconds(AMD) < dataclasses.replace(one, copied=1e8).seconds(AMD)
    # bytes moved around the product add to its time; its own bytes overlap its multiply-adds
    overlapped, serial = (dataclasses.replace(one, **{key: 1e5}) for key in ("bytes", "serial"))
    assert overlapped.seconds(AMD) == one.seconds(AMD) < serial.seconds(AMD)
    assert "0.1 MB moved around the product" in serial.describe(AMD)
    with pytest.raises(KeyError, match="no cost.rates entry for 'wgmma:float16' on gfx1100"):
        Work("wgmma:float16", 1e9, groups=1).seconds(AMD)


def test_every_auto_plan_runs_its_best_candidate():
    """The plan is the ranking's first candidate (or, for a relayout, the shared one), on every
    device model and a spread of shapes, and the candidates are in the order of their estimates."""
    pytest.importorskip("polymm_cuda.backend")  # registers CUDA's families
    shapes = [(1, 1, 4096, 4096), (1, 4096, 2, 4096), (1, 4, 4096, 4096), (1, 128, 128, 65536), (64, 16, 16, 16)]
    shapes += [(1, 1024, 1024, 1024), (1, 100, 300, 700), (2, 2048, 2048, 64)]
    for device in (H100, dataclasses.replace(H100, cc=80), AMD):
        for dtype in ("float32", "float64", "float16", "complex128", "int8"):
            for shape in shapes:
                ranking = _rank(device, dtype, shape)
                made = planner.plan(
                    device, dtype, shape, _row(shape[1], shape[3], shape[0]), _row(shape[3], shape[2], shape[0])
                )
                estimates = [c.work.seconds(device) for c in ranking.candidates]
                assert estimates == sorted(estimates), [c.family for c in ranking.candidates]
                best = ranking.best
                expected = ranking.shared if best.relayout else best
                assert made.ranking.best.family == best.family
                assert made.relayout == best.relayout
                if best.build is None:
                    assert made.choice == expected.choice, (device.name, dtype, shape)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_runs_as_a_real_product_on_intels_cpu_runtime_only(dtype):
    """Intel's CPU OpenCL runtime (its database node lists realify.simt) runs complex products as
    one real product on the table's tiles; PoCL keeps its complex blocks (not measured there)."""
    shape = (1, 256, 256, 256)
    on_intel = planner.plan(INTEL_CPU_RUNTIME, dtype, shape, _row(256, 256), _row(256, 256))
    assert on_intel.ranking.best.family == "realify" and [launch.kernel for launch in on_intel.launches] == [
        "realify",
        "regblock",
    ]
    assert on_intel.dtype == np.dtype(planner.REAL_OF[dtype])
    on_pocl = planner.plan(POCL, dtype, shape, _row(256, 256), _row(256, 256))
    assert on_pocl.ranking.best.family == "cpu-blocks"


def test_the_first_shared_family_that_takes_a_product_is_the_only_shared_candidate():
    """The database's switch points divide the shapes between the shared families: a matrix-vector
    product is matvec's, never also the tiles'; the families behind it are not asked."""
    ranking = _rank(AMD, "float32", (1, 4096, 2, 4096))
    assert [c.family for c in ranking.candidates] == ["matvec"]
    assert ranking.shared is ranking.best
    assert "tiles" not in {r.family for r in ranking.refusals}  # not asked
    ranking = _rank(AMD, "float32", (1, 1000, 1000, 1000))
    assert [c.family for c in ranking.candidates] == ["tiles"]
    assert {r.family for r in ranking.refusals} >= {"matvec", "vecmat", "row-strip", "split-k", "small-batched"}
    assert all(r.reason for r in ranking.refusals)


def test_a_new_family_is_one_descriptor(monkeypatch):
    """A backend adds a kernel family by registering its descriptor: where its estimate is the
    lowest, "auto" plans it and says why; elsewhere it is ranked and loses; where it declines, it
    says why."""
    monkeypatch.setattr(families, "_FAMILIES", list(families._FAMILIES))
    tile = KernelParams(mwg=64, nwg=64, kwg=16, mdimc=16, ndimc=16)

    def propose(p: Problem):
        if p.dtype.name != "float32":
            return Refusal("fast-float32", "float32 only")
        work = Work("simt:float32", p.M * p.N * p.K / 100, groups=10**4, tile=(64, 64))  # a hundred times faster
        return Candidate("fast-float32", Choice("regblock", tile, "the new family's tiles"), work)

    families.register(Family("fast-float32", "a hypothetical family", propose, dialects=("opencl",), shared=False))
    strides = (0, (512 * 512, 512, 1))
    made = planner.plan(AMD, "float32", (1, 512, 512, 512), strides, strides)
    assert made.choice.reason == "the new family's tiles" and made.product.params == tile
    assert [c.family for c in made.ranking.candidates] == ["fast-float32", "tiles"]
    made = planner.plan(AMD, "float64", (1, 512, 512, 512), strides, strides)
    assert made.ranking.best.family == "tiles"
    assert Refusal("fast-float32", "float32 only") in made.ranking.refusals
    cuda = dataclasses.replace(AMD, dialect="cuda")  # the family serves OpenCL devices only
    assert "fast-float32" not in {c.family for c in _rank(cuda, "float32", (1, 512, 512, 512)).candidates}


def test_preferred_families_rank_first(monkeypatch):
    """``POLYMM_PREFER`` sends a product to a family wherever it offers a candidate (the proof runs
    exercise the tensor-core kernels on small products so), whatever the estimates say."""
    pytest.importorskip("polymm_cuda.backend")
    shape = (1, 136, 100, 1032)  # 4 tiles of wgmma on 132 SMs: the SIMT tiles rank first
    monkeypatch.delenv("POLYMM_PREFER", raising=False)
    ranking = _rank(H100, "float16", shape)
    assert [c.family for c in ranking.candidates] == ["tiles", "wgmma"]
    monkeypatch.setenv("POLYMM_PREFER", "dmma, wgmma")
    ranking = _rank(H100, "float16", shape)
    assert [c.family for c in ranking.candidates] == ["wgmma", "tiles"]


def test_relayout_is_offered_only_where_the_copies_would_be_read():
    """The tensor cores on copies of the operands (``mma.sync``, before Hopper): for A along M
    (copied K-major), not for an A that is K-contiguous but misaligned (the copy keeps it as it is,
    so no kernel would read it). On Hopper ``wgmma`` copies what it cannot read itself."""
    pytest.importorskip("polymm_cuda.backend")
    ampere = dataclasses.replace(H100, cc=80)
    m = n = k = 1024
    column_a = (0, (m * k, 1, m))
    ranking = _rank(ampere, "float16", (1, m, n, k), a=column_a)
    assert ranking.best.family == "relayout" and ranking.best.relayout
    misaligned = (1, (m * (k + 1), k + 1, 1))  # rows one element longer, from the second element
    ranking = _rank(ampere, "float16", (1, m, n, k), a=misaligned)
    why = {r.family: r.reason for r in ranking.refusals}["relayout"]
    assert why.startswith("no kernel would read the copies either")
    assert ranking.best.family == "tiles"
    for a in (column_a, misaligned):
        ranking = _rank(H100, "float16", (1, m, n, k), a=a)
        assert ranking.best.family == "wgmma" and ranking.best.choice.reason.endswith("A copied K-major first")
        assert [x["kernel"] for x in ranking.best.choice.external["before"]] == [
            "polymm_transpose_2" if a is column_a else "polymm_restride_2"
        ]


def test_wgmma_splits_deep_products_on_few_tiles():
    """A deep product on few tiles (K >= split-k.deep_k x max(M, N)) runs on wgmma in runs of K
    that fill the SMs, their float32 partial sums added in order by one more launch."""
    pytest.importorskip("polymm_cuda.backend")
    ranking = _rank(H100, "float16", (1, 256, 256, 524288))
    best = ranking.best
    assert best.family == "wgmma" and "64 runs of K, added in order" in best.choice.reason
    ext = best.choice.external
    assert "-DWG_SPLIT=1" in ext["options"] and ext["values"] == {"splits": 64} and ext["grid"][0] == 128
    assert ext["scratch"] == [64 * 256 * 256 * 4] and ext["into"] == 3
    assert [x["kernel"] for x in ext["after"]] == ["polymm_wgmma_sum_float16"]
    made = planner.plan(H100, "float16", (1, 256, 256, 524288), _row(256, 524288), _row(524288, 256))
    product, summed = made.launches
    assert product.buffers[abi.buffer_positions(ext["abi"])["C"]] == 3 and summed.buffers == {0: 3, 3: 2}
    shallow = _rank(H100, "float16", (1, 256, 256, 2048)).best  # not deep: no runs
    assert shallow.family != "wgmma" or "runs of K" not in shallow.choice.reason


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_vecmat_reads_wider_runs_of_rows_of_a_large_b(dtype):
    """vecmat's work-items read 16 bytes of a row of B where B holds at least
    ``vecmat.wide_from_bytes`` (1 x 16384 @ 16384 x 16384 float32 on the H200: 3.4 -> 4.2 TB/s),
    8 bytes on smaller ones (twice the work-groups: 1 x 4096 @ 4096 x 4096 slower with 16)."""
    size = np.dtype(dtype).itemsize
    for n, item in ((16384, 16), (4096, 8)):
        choice = _rank(H100, dtype, (1, 1, n, n)).best.choice
        assert choice.kernel == "vecmat" and choice.params.gvw * size == item, choice


def test_explain_shows_the_ranking():
    pytest.importorskip("polymm_cuda.backend")
    text = str(explain((1024, 1024), (1024, 1024), "float16", backend="cuda", device="H100"))
    assert "ranked    1. wgmma: " in text and "us est., wgmma:float16, 128 groups" in text
    assert "          3. tiles: " in text
    assert "declined  matvec: N=1024 > matvec.most_columns=4" in text


def test_a_device_no_family_serves_is_a_clear_error():
    odd = dataclasses.replace(AMD, kind="fpga")
    with pytest.raises(ValueError) as raised:
        _rank(odd, "float32", (1, 64, 64, 64))
    assert str(raised.value) == "no kernel family serves gfx1100 (fpga, opencl): no family is registered for it"


@pytest.mark.parametrize("rows", [1, 2043, 65536, 4 * 65535 * 4 + 1, 3_000_000])
def test_gpu_copies_cover_every_row_within_cudas_grid(rows):
    """A GPU's pack launch copies a column of ``mr`` rows per work-item, a grid's height apart:
    the grid covers every row once and stays within CUDA's 65535 work-groups per dimension."""
    from polymm.kernels import GRID_ROWS, launch_geometry, pack_params, realify_params

    params = pack_params(False, rows)
    glob, local = launch_geometry("pack", params, rows, 2045, 3)
    height = -(-rows // params.mr)  # the kernel's own: rows r0 + i * height for i < mr
    assert params.ts == 1 and params.mr >= 4 and glob[1] >= height and glob[1] // local[1] <= GRID_ROWS
    assert height * params.mr >= rows and glob[0] >= 2045 and glob[2] == 3
    assert pack_params(True, rows).ts == 16  # CPUs: a tile per work-item
    realify = realify_params(rows)  # B's rows: ts per work-item, a grid's height apart
    glob, local = launch_geometry("realify", realify, rows, 2045, 3)
    assert glob[1] >= -(-rows // realify.ts) and glob[1] // local[1] <= GRID_ROWS and realify.ts >= 4
