"""The device database (``polymm/kernels/devices.json``): well formed, looked up from the most
specific device towards ``any``, read by the planner (not shadowed by constants in code), and
named by ``polymm explain`` behind each plan."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from polymm.kernels import devices, planner
from polymm.kernels import params as kernel_params
from polymm.kernels.params import DeviceInfo, regblock_setting, save_tuned, table_params
from polymm.tools.explain import MODEL_DEVICES, explain

ROOT = Path(__file__).resolve().parents[1]
DB = devices.database()
EVIDENCE_KEYS = {"date", "device", "command", "record", "result"}

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "NVIDIA", "gpu", "cuda", 132, 1024, 48 * 1024, key="model-h100")
H200 = DeviceInfo("NVIDIA H200", "NVIDIA", "gpu", "cuda", 132, 1024, 48 * 1024, key="model-h200")
AMD = DeviceInfo("gfx1100", "Advanced Micro Devices, Inc.", "gpu", "opencl", 48, 256, 64 * 1024, key="model-amd")
POCL = DeviceInfo("cpu-haswell-AMD EPYC", "AuthenticAMD", "cpu", "opencl", 2, 4096, 0, key="model-pocl")
POCL_AVX512 = DeviceInfo(
    "pthread-Intel Xeon", "GenuineIntel", "cpu", "opencl", 2, 4096, 0, key="pocl512", vector_bytes=64
)
HOST_AVX2 = DeviceInfo("x86_64", "", "cpu", "numba", 2, 1, 0, key="model-host", platform="host avx2")
HOST_AVX512 = DeviceInfo("x86_64", "", "cpu", "numba", 16, 1, 0, key="model-host", platform="host avx512")


def test_every_entry_says_what_it_is_and_why():
    nodes = DB["devices"]
    assert nodes["any"]["match"] == "" and "parent" not in nodes["any"]
    for name, node in nodes.items():
        assert name == "any" or node["parent"] in nodes, name
    for node, families in DB["settings"].items():
        assert node in nodes, f"settings for an unknown device {node!r}"
        for family, entries in families.items():
            for key, e in entries.items():
                where = f"{node} / {family}.{key}"
                assert set(e) <= {"value", "why", "evidence"} and "value" in e, where
                assert e.get("why"), f"{where} does not say why"
                assert set(e.get("evidence", {})) <= EVIDENCE_KEYS, where


@pytest.mark.parametrize(
    "device, chain",
    [
        (H100, ("H100", "NVIDIA GPU", "gpu", "any")),
        (H200, ("NVIDIA GPU", "gpu", "any")),  # the H100's tiles are not assumed for it
        (AMD, ("gpu", "any")),
        (POCL, ("OpenCL CPU", "any")),
        (POCL_AVX512, ("OpenCL CPU, AVX-512", "OpenCL CPU", "any")),
        (HOST_AVX2, ("host CPU", "any")),
        (HOST_AVX512, ("host CPU, AVX-512", "host CPU", "any")),
    ],
)
def test_a_device_reads_its_own_entries_then_its_parents(device, chain):
    assert devices.settings_for(device).chain == chain


def test_a_device_says_only_where_it_differs():
    assert devices.settings_for(POCL).setting("split-k", "min_k").device == "OpenCL CPU"
    assert devices.settings_for(H100).setting("split-k", "min_k").device == "any"
    assert devices.settings_for(H100)("split-k", "min_k") < devices.settings_for(POCL)("split-k", "min_k")
    with pytest.raises(KeyError, match="no nonsense.setting"):
        devices.settings_for(H100)("nonsense", "setting")


SHAPES = [(1, 4096, 4096, 4096), (1, 128, 128, 65536), (1, 1, 4096, 4096), (1, 4096, 4096, 2), (1, 3, 500, 700),
          (64, 32, 32, 32), (1, 255, 255, 255), (1, 1000, 1000, 1000), (4, 300, 200, 100)]  # fmt: skip


@pytest.mark.parametrize("device", [H100, H200, AMD, POCL], ids=lambda d: d.key)
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "float16", "int32"])
def test_every_plan_names_the_entries_it_read(device, dtype):
    """Planning a spread of shapes finds every setting it asks for, and each plan carries them."""
    for bt, m, n, k in SHAPES:
        made = planner.plan(device, dtype, (bt, m, n, k), (0, (m * k, k, 1)), (0, (k * n, n, 1)))
        assert made.settings and all(isinstance(s, devices.Setting) for s in made.settings)
        if made.choice.kernel == "regblock":
            assert any(s.family == "regblock" for s in made.settings)


def test_the_planner_decides_by_the_database(monkeypatch):
    """Change an entry and the plan follows: the number lives in the data, not in code."""
    shape, a, b = (1, 256, 256, 3072), (0, (256 * 3072, 3072, 1)), (0, (3072 * 256, 256, 1))
    assert planner.plan(H100, "float32", shape, a, b).choice.splits == 1  # K = 12 x max(M, N): not deep
    monkeypatch.setitem(devices.entry("any", "split-k", "deep_k"), "value", 8)
    deep = planner.plan(H100, "float32", shape, a, b)
    assert deep.choice.splits > 1 and "deep K=3072 >= 8 x max(M, N)" in deep.reason
    assert ("any / split-k.deep_k", 8) in [(s.cite, s.value) for s in deep.settings]


def test_regblock_tiles_come_from_the_most_specific_device_that_can_run_them():
    assert regblock_setting(H100, "float32").device == "H100"
    assert regblock_setting(H200, "float32").device == "NVIDIA GPU"
    assert regblock_setting(POCL, "float32").device == "OpenCL CPU"
    assert regblock_setting(AMD, "int8").cite == "gpu / regblock.other"
    small = DeviceInfo("tiny", "x", "gpu", "opencl", 2, 64, 4096, key="model-tiny")  # 64 work-items, 4 KiB
    assert regblock_setting(small, "float32").cite == "any / regblock.other"


def test_a_recorded_tuning_is_read_before_the_database(tmp_path, monkeypatch):
    """What the tuner saved for this device is what the next plan uses, and explain says so."""
    monkeypatch.setenv("POLYMM_TUNING", str(tmp_path / "tuning.json"))
    tuned = table_params(H100, "float32").replace(group=4)
    save_tuned(H100, "float32", tuned)
    try:
        found = regblock_setting(H100, "float32")
        assert found.device.startswith("tuning file") and found.value["group"] == 4
        made = planner.plan(H100, "float32", (1, 4096, 4096, 4096), (0, (4096**2, 4096, 1)), (0, (4096**2, 4096, 1)))
        assert made.choice.params.group == 4 and found in made.settings
        assert json.loads((tmp_path / "tuning.json").read_text())["model-h100"]["float32"]["group"] == 4
    finally:
        monkeypatch.delenv("POLYMM_TUNING")
        kernel_params._tuned.cache_clear()  # the tuning file read back from its usual place
        kernel_params._checked_entry.cache_clear()


def test_explain_names_the_entries_behind_a_plan():
    assert "H100" in MODEL_DEVICES
    report = explain((128, 65536), (65536, 128), "float32", backend="opencl", device="H100")
    cites = [s.cite for s in report.settings]
    assert "any / split-k.slices_bytes" in cites and "H100 / regblock.float32" in cites
    text = str(report)
    assert "database  any / matvec.most_columns = 4" in text
    assert "split-k.slices_bytes = 16777216 [2026-11-24, H100 80GB HBM3" in text


def test_tensor_core_plans_name_their_entries(monkeypatch):
    """The CUDA tensor-core families read their tiles and thresholds from the database too (the
    H200 from ``NVIDIA GPU``, as the H100), and explain names them; change one and the plan follows."""
    pytest.importorskip("polymm_cuda.backend")  # registers CUDA's kernel families
    ampere = dataclasses.replace(H100, cc=80)  # relayout: mma.sync's copies (wgmma makes its own)
    report = explain((1024, 1024), (1024, 1024), "float64", backend="cuda", device="H200")
    cites = [s.cite for s in report.settings]
    assert {"NVIDIA GPU / dmma.min_tiles", "NVIDIA GPU / dmma.wide_gain", "NVIDIA GPU / dmma.wide_tile"} <= set(cites)
    assert "dmma.shape_one_wave = 1684 [2026-11-25, H100 80GB HBM3" in str(report)
    column_a = (0, (2048 * 2048, 1, 2048))  # A along M: no mma.sync kernel reads it as it lies
    row = (0, (2048 * 2048, 2048, 1))
    made = planner.plan(ampere, "float16", (1, 2048, 2048, 2048), column_a, row)
    assert made.relayout and ("NVIDIA GPU / relayout.work", 128**3) in [(s.cite, s.value) for s in made.settings]
    monkeypatch.setitem(devices.entry("NVIDIA GPU", "relayout", "work"), "value", 2048**3 + 1)
    assert not planner.plan(ampere, "float16", (1, 2048, 2048, 2048), column_a, row).relayout


#: Module-level numbers that stay in code, each a fact of the hardware or of a kernel's source
#: (the .cu file hard-codes it too), not a tuning choice: the tuning is in the database.
HARDWARE_AND_SOURCE_FACTS = {
    "polymm/kernels/planner.py": set(),
    "polymm/kernels/simt.py": set(),
    "polymm/kernels/cost.py": set(),
    "polymm/kernels/families.py": set(),
    "backends/polymm-cuda/polymm_cuda/families.py": set(),
    "backends/polymm-numba/polymm_numba/params.py": set(),
    "backends/polymm-cuda/polymm_cuda/tensorcore.py": {
        "BM",  # kernels/tensorcore.cu's TC_BM: its tile's rows
        "THREADS",  # kernels/tensorcore.cu's TC_THREADS
        "MIN_CC",  # mma.sync m16n8k16, ldmatrix and cp.async: sm_80 and later
        "DMMA_BM",  # kernels/dmma.cu's defaults (DM_WARPS_M x DM_WM, ...), which no option overrides
        "DMMA_BN",
        "DMMA_THREADS",
        "DMMA_STAGES",
        "DMMA_BLOCKS_PER_SM",  # kernels/dmma.cu's DM_MINB
        "DMMAZ_MIN_CC",  # polymm_dmmaz_* need Hopper's f64 MMA shapes
    },
    "backends/polymm-cuda/polymm_cuda/wgmma.py": {
        "CC",  # sm_90a code runs on compute capability 9.0 only
        "BM",  # kernels/wgmma.cu's WG_BM
        "SHORT_BM",  # kernels/wgmma.cu's other WG_BM: a ring per consumer warp group
        "MOST_SMEM",  # the dynamic shared memory a block may opt into on sm_90
        "ROW",  # bytes of K per pipeline slice: one 128-byte swizzled row
        "THREADS",  # three warp groups: a producer and two consumers
        "TF32_PRODUCTS",  # kernels/wgmma.cu's SEGMENTS per precision mode
        "_ALIGN",  # the copy engine's address and stride granularity
        "SPLIT_KC",  # kernels/tf32_split.cu's SP_KC
        "_SWIZZLE_128B",  # CUtensorMap enum values
        "_L2_256B",
        "_DATA_TYPE",
    },
}


def _numeric(node) -> bool:
    """Whether an expression is made of numbers only (a tuple, dict values, a call's arguments)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_numeric(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.values) and all(_numeric(v) for v in node.values)
    if isinstance(node, ast.Call):
        args = [*node.args, *(k.value for k in node.keywords)]
        return bool(args) and all(_numeric(a) for a in args)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    return False


def _module_numbers(path: Path) -> set[str]:
    """The names a module binds to numbers at its top level."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if _numeric(value):
            found |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return found


@pytest.mark.parametrize("module", sorted(HARDWARE_AND_SOURCE_FACTS))
def test_the_planners_keep_formulas_only(module):
    """No module-level number (or tuple, dict or call of numbers) in the planner or the CUDA
    tensor-core planning but the listed facts of hardware and kernel source: tiles and thresholds
    are data in the device database."""
    found = _module_numbers(ROOT / module)
    allowed = HARDWARE_AND_SOURCE_FACTS[module]
    assert not found - allowed, f"numbers in code, not in the device database: {sorted(found - allowed)}"
    assert not allowed - found, f"listed as facts but no longer numbers in {module}: {sorted(allowed - found)}"


def test_the_cpu_backend_reads_its_numbers_from_the_database():
    """The Numba backend's blockings and thresholds are the database's for this host (its ISA
    chooses the node), and explain names the entries behind its path."""
    pytest.importorskip("numba")
    from polymm_numba import params

    host = devices.settings_for(params.HOST)
    assert host.chain[0] == ("host CPU, AVX-512" if params.WIDE_VECTORS else "host CPU")
    assert params.SPLITK_CHUNK == host("cpu-split-k", "chunk")
    blk = params.blocking_for("float32")
    # float32's own entry where the node has one, else the element size's; a blocking this
    # machine's tuning file records (polymm tune --backend cpu) comes first
    entry = params.tuned_blocking("float32") or host.setting("cpu-blocking", "float32", "4")
    assert (blk.mr, blk.nr, blk.kc) == tuple(entry.value[k] for k in ("mr", "nr", "kc"))
    report = explain((1000, 1000), (1000, 1000), "float32", backend="cpu")
    cites = [s.cite for s in report.settings]
    assert entry.cite in cites and "host CPU / cpu-threads.serial_work" in cites
    assert "database  host CPU / cpu-threads.tiny_work = 4096" in str(report)
    narrow = explain((4000, 4000), (4000,), "float64", backend="cpu")
    assert "host CPU / cpu-narrow.most" in [s.cite for s in narrow.settings]


def test_the_tuner_sizes_cpu_candidates_by_the_devices_vectors():
    """PoCL reports its native float vector width: the tuner's CPU shapes use one vector of the
    dtype (16 floats on AVX-512, 8 on AVX2 or where the width is unknown)."""
    from polymm.tools import tune

    def widths(device, dtype):
        return {p.vw for p in tune.candidates(device, dtype)[1:]}  # [0]: the database's own entry

    assert widths(POCL, "float32") == {8} and widths(POCL_AVX512, "float32") == {16}
    assert widths(POCL_AVX512, "float64") == {8}


def test_the_tuner_writes_the_database(tmp_path):
    """``python -m polymm.tools.tune --database H100`` writes its winner into devices.json with its
    evidence; the planner reads it from there (here: a copy of the file)."""
    import shutil
    from importlib import resources

    from polymm.kernels import KernelParams
    from polymm.tools import tune

    copy = tmp_path / "devices.json"
    shutil.copy(resources.files("polymm.kernels").joinpath("devices.json"), copy)
    best = KernelParams(mwg=128, nwg=128, kwg=8, mdimc=16, ndimc=16, vw=4, gvw=4, pad=0, maxrreg=128)
    table = table_params(H100, "float32")
    n = 2048
    path = tune.record("H100", H100, "float32", best, [(table, 2e-3), (best, 1e-3)], n, "tune --database H100", copy)
    written = json.loads(copy.read_text())["settings"]["H100"]["regblock"]["float32"]
    assert path == str(copy) and KernelParams(**written["value"]) == best
    assert written["value"]["maxrreg"] == 128 and "use_local" not in written["value"]  # defaults left out
    assert written["evidence"]["device"] == H100.name and written["evidence"]["command"] == "tune --database H100"
    assert (
        f"{2 * n**3 / 1e-3 / 1e9:.0f} GFLOP/s (the table's tiles: {2 * n**3 / 2e-3 / 1e9:.0f} GFLOP/s)"
        in (written["evidence"]["result"])
    )
    with pytest.raises(KeyError, match="no device 'H300' in the database"):
        tune.record("H300", H100, "float32", best, [(best, 1e-3)], n, "x", copy)
