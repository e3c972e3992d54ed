"""The device database (``polymm/kernels/devices.json``): well formed, looked up from the most
specific device towards ``any``, read by the planner (not shadowed by constants in code), and
named by ``polymm explain`` behind each plan."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from polymm.kernels import devices, planner
from polymm.kernels.params import DeviceInfo, regblock_setting, save_tuned, table_params
from polymm.tools.explain import MODEL_DEVICES, explain

ROOT = Path(__file__).resolve().parents[1]
DB = devices.database()
EVIDENCE_KEYS = {"date", "device", "command", "record", "result"}

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "NVIDIA", "gpu", "cuda", 132, 1024, 48 * 1024, key="model-h100")
H200 = DeviceInfo("NVIDIA H200", "NVIDIA", "gpu", "cuda", 132, 1024, 48 * 1024, key="model-h200")
AMD = DeviceInfo("gfx1100", "Advanced Micro Devices, Inc.", "gpu", "opencl", 48, 256, 64 * 1024, key="model-amd")
POCL = DeviceInfo("cpu-haswell-AMD EPYC", "AuthenticAMD", "cpu", "opencl", 2, 4096, 0, key="model-pocl")


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
        save_tuned.__globals__["_tuned"].cache_clear()
        save_tuned.__globals__["_checked_entry"].cache_clear()


def test_explain_names_the_entries_behind_a_plan():
    assert "H100" in MODEL_DEVICES
    report = explain((128, 65536), (65536, 128), "float32", backend="opencl", device="H100")
    cites = [s.cite for s in report.settings]
    assert "any / split-k.slices_bytes" in cites and "H100 / regblock.float32" in cites
    text = str(report)
    assert "database  any / matvec.most_columns = 4" in text
    assert "split-k.slices_bytes = 16777216 [2026-11-24, H100 80GB HBM3" in text


def test_the_planner_keeps_formulas_only():
    """No module-level number (or tuple of numbers) in the planner: tiles and thresholds are
    data in the device database."""

    def numeric(node):
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        if isinstance(node, (ast.Tuple, ast.List)):
            return bool(node.elts) and all(numeric(e) for e in node.elts)
        if isinstance(node, ast.BinOp):
            return numeric(node.left) and numeric(node.right)
        return False

    tree = ast.parse((ROOT / "polymm" / "kernels" / "planner.py").read_text())
    constants = [
        ast.unparse(node.targets[0]) for node in tree.body if isinstance(node, ast.Assign) and numeric(node.value)
    ]
    assert not constants, f"numbers in code, not in the device database: {constants}"
