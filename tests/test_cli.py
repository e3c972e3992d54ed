"""The command line: ``polymm info``, ``polymm bench`` and ``--version``."""

import json
import subprocess
import sys


def polymm_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "polymm.tools.cli", *args], capture_output=True, text=True, timeout=600
    )


def test_info_lists_backends():
    proc = polymm_cli("info", "--json")
    assert proc.returncode == 0, proc.stderr
    infos = {i["name"]: i for i in json.loads(proc.stdout)}
    assert infos["cpu"]["available"] and "auto" in infos["cpu"]["algorithms"]
    assert "float32" in infos["cpu"]["dtypes"] and infos["cpu"]["devices"]
    table = polymm_cli("info")
    assert table.returncode == 0 and "cpu: available" in table.stdout


def test_info_reads_well_piped_at_80_columns():
    """Piped (as here), each line fits 80 columns and no word is cut: every word of a backend's
    dtypes and device lines stands whole in the output."""
    out = polymm_cli("info").stdout
    assert out and max(map(len, out.splitlines())) <= 80
    words = set(out.split())
    assert {"float32,", "complex128,", "auto"} <= words


def test_version():
    import polymm

    proc = polymm_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"polymm {polymm.__version__}"


def test_bench_json_checks_and_measures(tmp_path):
    plot = tmp_path / "bench.png"
    args = [
        "bench",
        "--backend",
        "cpu",
        "--sizes",
        "32,17x19x23",
        "--dtype",
        "float32,int16",
        "--repeat",
        "2",
        "--json",
    ]
    try:
        import matplotlib  # noqa: F401

        args += ["--plot", str(plot)]
    except ImportError:
        plot = None
    proc = polymm_cli(*args)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    from polymm import get_backend

    assert len(rows) == 2 * 2 * len(get_backend("cpu").algorithms)
    for row in rows:
        assert row["correct"] and row["gflops"] > 0 and row["reference"] == "numpy.matmul" and row["ratio"] > 0
    assert {(r["m"], r["n"], r["k"]) for r in rows} == {(32, 32, 32), (17, 19, 23)}
    # piped, progress is a plain line per measurement, as it ends (on stderr: stdout holds the JSON)
    logged = [line for line in proc.stderr.splitlines() if line.startswith("cpu/")]
    assert len(logged) == len(rows) and logged[0].startswith(f"cpu/{rows[0]['algorithm']} float32 32x32x32: ")
    if plot is not None:
        assert plot.stat().st_size > 1000


def test_bench_rejects_bad_arguments():
    proc = polymm_cli("bench", "--backend", "no-such-backend", "--sizes", "8")
    assert proc.returncode == 2 and "no-such-backend" in proc.stderr
    proc = polymm_cli("bench", "--sizes", "8x0")
    assert proc.returncode == 2 and "bad size" in proc.stderr
