"""``scripts/intel_opencl_cpu.py``: what it unpacks and the variable it prints, with the download
replaced by wheels made here (the real one is 300 MB; CI runs it where PoCL builds nothing)."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "intel_opencl_cpu.py"


@pytest.fixture
def script(monkeypatch):
    spec = importlib.util.spec_from_file_location("intel_opencl_cpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    downloads = []

    def download(cmd, check):
        """``pip download ... --dest DIR wheels``: two wheels laid out as pip's, one not a library."""
        assert check and cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd
        dest = Path(cmd[cmd.index("--dest") + 1])
        downloads.append(cmd[cmd.index("--dest") + 2 :])
        with zipfile.ZipFile(dest / "intel_opencl_rt-1-py3-none-any.whl", "w") as z:
            z.writestr("intel_opencl_rt-1.data/data/lib/libintelocl.so", b"runtime")
            z.writestr("intel_opencl_rt-1.data/data/etc/OpenCL/vendors/intel-cpu.icd", b"/opt/elsewhere\n")
            z.writestr("intel_opencl_rt-1.dist-info/METADATA", b"")
        with zipfile.ZipFile(dest / "tbb-1-py3-none-any.whl", "w") as z:
            z.writestr("tbb-1.data/data/lib/libtbb.so.12", b"tbb")

    monkeypatch.setattr(module.subprocess, "run", download)
    return module, downloads


def test_unpacks_the_libraries_and_names_the_runtime(script, tmp_path, capsys):
    module, downloads = script
    assert module.main([str(tmp_path / "rt")]) == 0
    assert downloads == [list(module.WHEELS)] and all("==" in w for w in module.WHEELS)  # pinned
    lib = tmp_path / "rt" / "lib"
    assert sorted(p.name for p in lib.iterdir()) == ["libintelocl.so", "libtbb.so.12"]
    icd = tmp_path / "rt" / "vendors" / "intel-cpu.icd"
    assert icd.read_text() == f"{(lib / 'libintelocl.so').resolve()}\n"
    assert capsys.readouterr().out == f"export OCL_ICD_VENDORS={icd.parent.resolve()}\n"
    # a second call reuses what is there
    assert module.main([str(tmp_path / "rt")]) == 0 and len(downloads) == 1


def test_wheels_without_the_runtime_are_an_error(script, tmp_path, monkeypatch):
    module, _ = script
    monkeypatch.setattr(module.subprocess, "run", lambda cmd, check: None)  # downloads nothing
    with pytest.raises(SystemExit, match="held no libintelocl.so"):
        module.install(tmp_path / "rt")
