"""Faults the OpenCL backend survives: a corrupted or stale tuning file, a kernel that does not build.

Each is survived with a correct answer and one warning that says what was wrong, never a
crash or a kernel the device rejects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from polymm.testing import assert_matches, poison, random_array

pytest.importorskip("pyopencl")
cl_array = pytest.importorskip("pyopencl.array")
polymm_opencl = pytest.importorskip("polymm_opencl")
from polymm.kernels import params as _params  # noqa: E402


@pytest.fixture
def tuning_file(tmp_path, monkeypatch):
    path = tmp_path / "opencl-tuning.json"
    monkeypatch.setenv("POLYMM_TUNING", str(path))
    _params._tuned.cache_clear()
    _params._checked_entry.cache_clear()
    yield path
    _params._tuned.cache_clear()
    _params._checked_entry.cache_clear()


@pytest.fixture(scope="module")
def device():
    """The planner's description of the default OpenCL device."""
    return polymm_opencl.device_info(polymm_opencl.default_queue().device)


def _regblock_product(rng):
    """A product ``auto`` computes with the register-blocked kernel, on a fresh backend (no plans yet)."""
    backend = polymm_opencl.OpenCLBackend()
    queue = polymm_opencl.default_queue()
    x1 = random_array(rng, (1, 96, 80), "float32")
    x2 = random_array(rng, (1, 80, 72), "float32")
    out = cl_array.to_device(queue, poison((1, 96, 72), "float32"))
    backend.matmul(cl_array.to_device(queue, x1), cl_array.to_device(queue, x2), out, "auto")
    assert backend.last_choice[0] == "regblock", backend.last_choice
    assert_matches(out.get(), x1, x2)


def _one_warning(record, *words):
    messages = [str(w.message) for w in record if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    for word in words:
        assert word in messages[0], messages[0]


@pytest.mark.parametrize(
    "content, why",
    [
        (b"\x00\x9f{ not json", "cannot be read as JSON"),
        (b'{"truncated": {"float32": {"mwg": 6', "cannot be read as JSON"),
        (b"[1, 2, 3]", "not a table of devices"),
    ],
)
def test_a_corrupted_tuning_file_is_ignored_with_one_warning(tuning_file, device, content, why):
    tuning_file.write_bytes(content)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert _params.tuned_params(device, "float32") is None
        assert _params.tuned_params(device, "float64") is None  # the file is read (and warned about) once
        _regblock_product(np.random.default_rng(1))
    _one_warning(record, str(tuning_file), why, "polymm.tools.tune")


@pytest.mark.parametrize(
    "entry, why",
    [
        ({"mwg": 64, "tile_rows": 8}, "stale or invalid"),  # written by another version's parameters
        ({"mwg": 60, "nwg": 64, "mdimc": 16, "ndimc": 16}, "stale or invalid"),  # mwg not a multiple of mdimc
        # valid, but 128 x 128 work-items: more than a work-group of the devices here
        ({"mwg": 768, "nwg": 512, "mdimc": 128, "ndimc": 128, "use_local": False}, "does not fit"),
    ],
)
def test_a_stale_tuning_entry_falls_back_to_the_table(tuning_file, device, entry, why):
    tuning_file.write_text(json.dumps({device.key: {"float32": entry}}))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert _params.tuned_params(device, "float32") is None
        _regblock_product(np.random.default_rng(2))
    _one_warning(record, why, device.name)


def test_a_valid_tuning_entry_is_used(tuning_file, device):
    table = _params.table_params(device, "float32")
    tuning_file.write_text(json.dumps({device.key: {"float32": vars(table)}}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _params.tuned_params(device, "float32") == table


def test_a_kernel_that_does_not_build_falls_back_with_one_warning(monkeypatch, device):
    """A broken register-blocked build (forced here) costs speed, never the answer."""
    real_render = polymm_opencl.programs.render

    def broken_render(dialect, kernel, *args, **kwargs):
        source = real_render(dialect, kernel, *args, **kwargs)
        return source + "\nthis line is not OpenCL C;\n" if kernel == "regblock" else source

    monkeypatch.setattr(polymm_opencl.programs, "render", broken_render)
    backend = polymm_opencl.OpenCLBackend()
    queue = polymm_opencl.default_queue()
    rng = np.random.default_rng(3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for m in (96, 97):  # two shapes, two plans: one warning
            x1 = random_array(rng, (1, m, 80), "float32")
            x2 = random_array(rng, (1, 80, 72), "float32")
            out = cl_array.to_device(queue, poison((1, m, 72), "float32"))
            backend.matmul(cl_array.to_device(queue, x1), cl_array.to_device(queue, x2), out, "auto")
            assert backend.last_choice[0] == "tiled", backend.last_choice
            assert_matches(out.get(), x1, x2)
    _one_warning(record, "regblock", device.name, "does not build")
    with pytest.raises(polymm_opencl.KernelBuildError, match="regblock"):  # asked for by name: the error
        backend.launch(
            cl_array.to_device(queue, x1),
            cl_array.to_device(queue, x2),
            out,
            "regblock",
            _params.table_params(device, "float32"),
        )


PRODUCT = """
import numpy as np, polymm
from polymm.testing import assert_matches, random_array
rng = np.random.default_rng(4)
x1, x2 = random_array(rng, (40, 50), "float32"), random_array(rng, (50, 30), "float32")
assert_matches(polymm.matmul(x1, x2, backend="opencl"), x1, x2)
print("ok")
"""


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
@pytest.mark.parametrize("suffix", [".so", ".bc"])
def test_a_corrupted_driver_cache_is_rebuilt(tmp_path, device, suffix, damage):
    """PoCL keeps compiled kernels on disk and aborts the process on a corrupted kernel object
    (at the launch) or program (at exit): such entries, overwritten or cut short (a write that
    did not finish), are removed before PoCL reads them, also before the device's first build."""
    if "portable computing language" not in device.platform.lower():
        pytest.skip("corrupts PoCL's kernel cache (POCL_CACHE_DIR); the device here is another driver's")
    env = dict(os.environ, POCL_CACHE_DIR=str(tmp_path))
    run = lambda: subprocess.run([sys.executable, "-c", PRODUCT], capture_output=True, text=True, env=env, timeout=600)  # noqa: E731
    first = run()
    assert first.returncode == 0 and first.stdout.strip() == "ok", first.stderr
    cached = [p for p in tmp_path.rglob("*" + suffix)]
    assert cached, "PoCL cached nothing"
    for path in cached:
        if damage == "truncated":
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        else:
            path.write_bytes(b"\x7fELF truncated" if suffix == ".so" else b"BC garbage")
    second = run()
    assert second.returncode == 0 and second.stdout.strip() == "ok", second.stderr
    assert second.stderr.count("RuntimeWarning") == 1 and "corrupted PoCL kernel-cache" in second.stderr, second.stderr
    third = run()  # cached afresh: silent
    assert third.returncode == 0 and "Warning" not in third.stderr, third.stderr


def test_cache_files_are_judged_whole_by_their_own_framing(tmp_path, device):
    """The checks behind the removal, on files PoCL wrote here: whole files pass, every cut and
    a wrong magic fail."""
    from polymm_opencl.drivercache import bitcode_is_whole, elf_is_whole

    if "portable computing language" not in device.platform.lower():
        pytest.skip("needs files written by PoCL's kernel cache")
    env = dict(os.environ, POCL_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", PRODUCT], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    files = {".bc": list(tmp_path.rglob("*.bc")), ".so": list(tmp_path.rglob("*.so"))}
    assert files[".bc"] and files[".so"], files
    for suffix, whole in ((".bc", bitcode_is_whole), (".so", elf_is_whole)):
        for path in files[suffix]:
            data = path.read_bytes()
            assert whole(data), path
            for cut in (4, len(data) // 3, len(data) // 2, len(data) - 8, len(data) - 1):
                assert not whole(data[:cut]), (path, cut)
            assert not whole(b"\0" + data[1:]), path


def test_the_cache_check_reads_only_files_written_since_the_last(tmp_path, monkeypatch):
    """Every process checks PoCL's cache before its first build; a file checked whole before is
    not read again (a cache of 15,000 files took 0.9 s of every start), one written since is,
    and a damaged one is still removed."""
    import struct

    from polymm_opencl import drivercache

    bitcode = b"BC\xc0\xde" + struct.pack("<II", 1, 0)  # the magic and one empty top-level block
    entries = []
    for i in range(3):
        entry = tmp_path / f"{i:02x}" / f"entry{i}"
        (entry / "kernel" / "1-1-1").mkdir(parents=True)
        (entry / "program.bc").write_bytes(bitcode)
        entries.append(entry)
    reads = []
    real = drivercache._corrupt
    monkeypatch.setattr(drivercache, "_corrupt", lambda path: reads.append(path) or real(path))
    assert drivercache.drop_corrupt_pocl_entries(str(tmp_path)) == [] and len(reads) == 3
    assert (tmp_path / drivercache.MARKER).is_file()
    reads.clear()
    old = time.time() - 60  # checked whole a minute ago: not read again
    for entry in entries:
        os.utime(entry / "program.bc", (old, old))
    monkeypatch.setattr(drivercache, "_last_check", lambda root: time.time_ns() - 30_000_000_000)
    assert drivercache.drop_corrupt_pocl_entries(str(tmp_path)) == [] and reads == []
    (entries[1] / "program.bc").write_bytes(bitcode[:6])  # written since, and cut short
    with pytest.warns(RuntimeWarning, match="corrupted PoCL kernel-cache"):
        assert drivercache.drop_corrupt_pocl_entries(str(tmp_path)) == [str(entries[1])]
    assert [os.path.basename(os.path.dirname(p)) for p in reads] == ["entry1"]
    assert entries[0].is_dir() and not entries[1].exists()
