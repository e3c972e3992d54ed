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


def test_cliff_cells_are_parameters_and_one_runs_on_the_cpu(monkeypatch):
    suite = importlib.import_module("polymm_asv_benchmarks.cliffs")
    assert suite.CliffCell.params[0] == common.BACKENDS and suite.CliffCell.params[1] == suite.CELLS
    assert len(set(suite.CELLS)) == len(suite.CELLS)
    assert "gemv-4096 float32" in suite.CELLS and "square-256 int8" in suite.CELLS
    assert not any(c.startswith("grid-") for c in suite.CELLS)  # the GPU grid is recorded elsewhere
    assert not hasattr(suite.CliffCell, "setup_cache")  # no whole-suite run before the first figure
    monkeypatch.setattr(suite, "BUDGET", 0.0)
    bench = suite.CliffCell()
    bench.setup("cpu", "square-32 float32")
    assert bench.track_ratio("cpu", "square-32 float32") > 0
    for backend, cell in [("no-such-backend", "square-32 float32"), ("cpu", "tc-square-1024 float16")]:
        with pytest.raises(NotImplementedError):
            suite.CliffCell().setup(backend, cell)


def _combinations():
    """Every "name(params)" asv would match --bench against, from the suite's classes."""
    import inspect
    import itertools

    names = []
    for module in ("matmul", "cliffs"):
        mod = importlib.import_module(f"polymm_asv_benchmarks.{module}")
        for cls_name, cls in vars(mod).items():
            if not inspect.isclass(cls) or cls.__module__ != mod.__name__ or cls_name.startswith("_"):
                continue
            for method in (m for m in dir(cls) if m.startswith(("time_", "track_"))):
                for params in itertools.product(*cls.params):
                    names.append(f"{module}.{cls_name}.{method}({', '.join(map(repr, params))})")
    return names


def test_the_quick_slice_selects_every_benchmark_and_stays_small():
    import re

    lines = (ROOT / "asv_bench" / "quick.txt").read_text().splitlines()
    regexes = [re.compile(line) for line in lines if line and not line.startswith("#")]  # regex by contract
    names = _combinations()
    chosen = [n for n in names if any(r.search(n) for r in regexes)]
    for regex in regexes:
        assert any(regex.search(n) for n in names), f"{regex.pattern} selects nothing"
    benchmarks = {n.split("(")[0] for n in names}
    assert benchmarks == {n.split("(")[0] for n in chosen}, "a benchmark the quick run leaves out"
    # ~0.5-1.3 s a combination on 2 cores (a process each): a few minutes at most
    assert len(chosen) < 300, len(chosen)


def _ignored(path: Path) -> bool:
    import subprocess

    return subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", str(path)]).returncode == 0


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_asv_runs_write_only_ignored_paths():
    import json
    import re

    for name in ("asv.conf.json", "asv.existing.conf.json"):
        text = re.sub(r"^\s*//.*$", "", (ROOT / "asv_bench" / name).read_text(), flags=re.M)
        conf = json.loads(text)
        for key in ("results_dir", "html_dir", "env_dir"):
            assert _ignored(ROOT / "asv_bench" / conf[key] / "x.json"), f"{name}: {key} {conf[key]} is tracked"
    publish = importlib.import_module("asv_publish_offline")
    assert _ignored(publish.WORK / "results" / "x.json")
    assert not _ignored(publish.RECORDS / "x.json")  # the records are committed
    for script in ("asv_local_run.sh", "asv_record_local.sh", "asv_gpu_run.sh", "asv_regression_check.sh"):
        text = (ROOT / "scripts" / script).read_text()
        assert "-m asv " not in text, f"{script} runs asv without scripts/asv_run.py"
    assert "asv_bench/results" not in (ROOT / "scripts" / "asv_local_run.sh").read_text().replace(
        "asv_bench/scratch/results", ""
    )


def test_asv_run_reaps_an_orphaned_benchmark_process(tmp_path):
    """A process that leaves its own process group behind (as asv's benchmark processes do) and
    whose parent dies is handed to asv_run (a subreaper) and stopped by ``reap``."""
    import subprocess
    import textwrap

    probe = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        sys.path.insert(0, {str(ROOT / "scripts")!r})
        import asv_run
        if not asv_run.become_subreaper():
            print("no-subreaper"); sys.exit(0)
        # a parent that starts a sleeper in a new session, then exits: the sleeper is orphaned
        subprocess.run(["sh", "-c", "setsid sleep 60 >/dev/null 2>&1 & echo $! > {tmp_path / "pid"}"])
        time.sleep(0.3)
        orphan = int(open({str(tmp_path / "pid")!r}).read())
        assert orphan in asv_run.descendants(), "the orphan was not handed to the subreaper"
        stopped = asv_run.reap(grace=1.0)
        assert orphan in stopped, stopped
        assert not asv_run.descendants()
        print("reaped")
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "no-subreaper":
        pytest.skip("no prctl(PR_SET_CHILD_SUBREAPER) here")
    assert done.stdout.strip() == "reaped"


def test_keep_copies_a_run_into_the_records_and_refuses_quick_runs(tmp_path):
    import json

    keep = importlib.import_module("asv_keep")
    source, records = tmp_path / "scratch", tmp_path / "records"
    (source / "box").mkdir(parents=True)
    (source / "box" / "machine.json").write_text("{}")
    (source / "box" / "abcdef12-existing-py.json").write_text("{}")
    (source / "box" / "12345678-existing-py.json").write_text("{}")
    (source / "benchmarks.json").write_text(json.dumps({"new": 1, "version": 2}))
    records.mkdir()
    (records / "benchmarks.json").write_text(json.dumps({"old": 1, "new": 0, "version": 2}))
    keep.keep("box", ["abcdef1234"], source, records)
    assert sorted(p.name for p in (records / "box").iterdir()) == ["abcdef12-existing-py.json", "machine.json"]
    assert json.loads((records / "benchmarks.json").read_text()) == {"old": 1, "new": 1, "version": 2}
    with pytest.raises(SystemExit):
        keep.keep("box-quick", [], source, records)


@pytest.mark.skipif(importlib.util.find_spec("asv") is None, reason="asv is not installed (the docs extra)")
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_publish_labels_each_machine_with_the_age_of_its_data(tmp_path):
    publish = importlib.import_module("asv_publish_offline")
    results = publish.gather(records_only=True, work=tmp_path)
    assert (results / "benchmarks.json").is_file()
    rows = {r["machine"]: r for r in publish.machines(results)}
    assert {"polymm-2core-ci", "polymm-h100"} <= set(rows)
    amd = rows["polymm-2core-ci"]  # the AMD machine's newest record: 2026-11-22, hundreds of commits back
    assert amd["source"] == "record" and amd["date"].startswith("2026-11-22")
    assert amd["stale"] and amd["note"]  # an old run is not presented as current
    html = publish.banner(list(rows.values()))
    assert "STALE" in html and 'location.protocol === "file:"' in html and "--serve" in html


@pytest.mark.skipif(importlib.util.find_spec("asv") is None, reason="asv is not installed (the docs extra)")
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_a_quick_local_run_changes_no_tracked_file(tmp_path):
    """One tiny benchmark through scripts/asv_local_run.sh: results land in the ignored scratch
    folder, ``git status`` is what it was (asv used to rewrite results/benchmarks.json)."""
    import os
    import shutil
    import subprocess

    def status():
        return subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    before = status()
    machine = "pytest-asv-probe"
    env = dict(os.environ, HOME=str(tmp_path), ASV_MACHINE=machine, PYTHON=sys.executable)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    scratch = ROOT / "asv_bench" / "scratch" / "results" / f"{machine}-quick"
    try:
        done = subprocess.run(
            [
                str(ROOT / "scripts" / "asv_local_run.sh"),
                "--quick",
                "--bench",
                r"CallOverhead.time_reference\('cpu', 4\)",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert list(scratch.glob("*-existing-*.json")), "no result in the scratch folder"
        assert status() == before
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
