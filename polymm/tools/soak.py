"""A soak run: a long stream of varied products on one backend, with memory watched throughout.

polymm lives in services, notebooks and training loops that run for days on products of
ever-changing shapes. Whatever a backend keeps per shape (compiled variants, plans, programs,
buffers) grows with the variety of its inputs, and no test that runs for seconds on a few
shapes sees it. :func:`run` draws random products (shapes, dtypes, layouts, batches,
matrix-vector) from several threads, checks the values of a sample against the reference, and
samples the process's resident memory (and the device's, for GPU backends) as it goes;
:func:`verdict` says how much memory grew after the warm-up, per 10,000 products.

Used by ``polymm soak`` and by the CI test that bounds the growth of the ``cpu`` backend.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

import numpy as np

import polymm

from ..testing.reference import assert_matches, random_array

__all__ = ["Sample", "Soak", "run", "verdict", "report", "plot", "resident_bytes", "DEFAULT_DTYPES"]

#: What a stream of user products is made of, unless ``dtypes`` says otherwise.
DEFAULT_DTYPES = ("float32", "float64", "float16", "complex64", "int32", "int8")
#: Share of products whose values are checked (a few rows of the product, against the reference).
CHECK_SHARE = 0.1


@dataclass(frozen=True)
class Sample:
    """Memory at one moment: products done so far, seconds since the start, bytes."""

    products: int
    seconds: float
    resident: int
    device: int | None


@dataclass
class Soak:
    """What a soak run did and saw."""

    backend: str
    threads: int
    dtypes: list[str]
    max_side: int
    products: int = 0
    checked: int = 0
    wrong: int = 0
    errors: int = 0
    refused: list[str] = field(default_factory=list)  # dtypes the backend's check_dtype refuses here
    messages: list[str] = field(default_factory=list)  # the first wrong values and errors
    samples: list[Sample] = field(default_factory=list)
    seconds: float = 0.0
    compile_seconds: float = 0.0  # the kernels compiled (or loaded) before the first product


def resident_bytes() -> int:
    """This process's resident memory (Linux ``/proc``; else the peak, from ``resource``)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _device_meter(impl):
    """A function returning the device memory in use, or None where there is no device to read:
    CuPy's device-wide figure for ``cupy`` backends, ``nvidia-smi``'s per-process one for OpenCL
    on an NVIDIA GPU."""
    if impl.array_library == "cupy":
        import cupy

        def cuda() -> int:
            free, total = cupy.cuda.runtime.memGetInfo()
            return total - free

        return cuda
    if impl.array_library == "pyopencl":
        queue = impl.from_numpy(np.zeros(1, np.float32)).queue
        if "nvidia" in queue.device.vendor.lower():
            pid = str(os.getpid())

            def nvidia_smi() -> int | None:
                try:
                    rows = subprocess.run(
                        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                        capture_output=True,
                        text=True,
                        timeout=10,
                    ).stdout.splitlines()
                except (OSError, subprocess.SubprocessError):
                    return None
                used = [int(r.split(",")[1]) for r in rows if r.split(",")[0].strip() == pid]
                return used[0] * 2**20 if used else 0

            return nvidia_smi
    return lambda: None


def _draw(rng, max_side):
    """One product's shapes as (shape of x1, shape of x2, transpose x1, transpose x2)."""
    m, k, n = (int(v) for v in rng.integers(1, max_side + 1, size=3))
    batch = () if rng.random() < 0.8 else (int(rng.integers(1, 9)),)
    shape2 = (k,) if rng.random() < 0.1 else (*batch, k, n)
    return (*batch, m, k), shape2, rng.random() < 0.2, rng.random() < 0.2 and len(shape2) > 1


def _operand(rng, shape, dtype, transposed):
    """Random values of ``shape``; a transposed view of a C array when ``transposed``."""
    if not transposed:
        return random_array(rng, shape, dtype)
    flipped = (*shape[:-2], shape[-1], shape[-2])
    return np.swapaxes(random_array(rng, flipped, dtype), -1, -2)


def run(
    backend: str = "cpu",
    *,
    seconds: float | None = None,
    products: int | None = None,
    threads: int = 1,
    dtypes=None,
    max_side: int = 300,
    seed: int = 0,
    interval: float = 0.25,
    on_sample=None,
    compile_first: bool = True,
) -> Soak:
    """Random products on ``backend`` from ``threads`` threads until ``seconds`` have passed or
    ``products`` are done (whichever comes first; one of them is required), memory sampled
    every ``interval`` seconds and after the last product. ``on_sample(soak, sample)`` is
    called with each sample (progress).

    ``compile_first``: compile the backend's kernels for the dtypes first
    (:func:`polymm.warmup`), so that a kernel compiled late in the run (on a cold cache, the
    first product of a rare shape class) is not read as memory that grows with the shapes."""
    if seconds is None and products is None:
        raise ValueError("a soak needs seconds=, products= or both")
    if threads < 1 or max_side < 1 or (seconds is not None and seconds <= 0) or (products is not None and products < 1):
        raise ValueError("threads, max_side, seconds and products must be positive")
    impl = polymm.get_backend(backend)
    names = list(dtypes or DEFAULT_DTYPES)
    soak = Soak(backend=backend, threads=threads, dtypes=names, max_side=max_side)
    usable = []
    for name in names:
        dtype = np.dtype(name)  # a clear error for a name NumPy does not know
        try:  # the backend's own word on what it computes here (float64 without fp64, say)
            impl.check_dtype(dtype, impl.from_numpy(np.zeros((1, 1), dtype)))
        except TypeError as exc:
            soak.refused.append(f"{name}: {exc}")
        else:
            usable.append(name)
    if not usable:
        raise ValueError(f"backend {backend!r} computes none of {', '.join(names)} here: {'; '.join(soak.refused)}")
    if compile_first:
        begun = time.perf_counter()
        polymm.warmup(usable, backend=backend)
        soak.compile_seconds = time.perf_counter() - begun
    device_bytes = _device_meter(impl)
    lock = threading.Lock()
    stop = threading.Event()
    start = time.perf_counter()
    deadline = start + seconds if seconds is not None else float("inf")

    def take_sample():
        sample = Sample(soak.products, time.perf_counter() - start, resident_bytes(), device_bytes())
        soak.samples.append(sample)
        if on_sample is not None:
            on_sample(soak, sample)

    def note(kind, text, exc=None):
        if exc is not None and exc.__traceback__ is not None:  # where it was raised: the backend's line, not ours
            frames = traceback.extract_tb(exc.__traceback__)
            ours = [f for f in frames if "polymm" in f.filename and not f.filename.endswith("soak.py")]
            frame = (ours or frames)[-1]
            text += f" (at {frame.filename}:{frame.lineno} in {frame.name}; raised in {frames[-1].name})"
        with lock:
            setattr(soak, kind, getattr(soak, kind) + 1)
            if len(soak.messages) < 20:
                soak.messages.append(text)

    def worker(index):
        rng = np.random.default_rng([seed, index])
        while not stop.is_set():
            with lock:
                if (products is not None and soak.products >= products) or time.perf_counter() >= deadline:
                    break
                soak.products += 1
                dtype = usable[rng.integers(len(usable))]
            s1, s2, t1, t2 = _draw(rng, max_side)
            x1, x2 = _operand(rng, s1, dtype, t1), _operand(rng, s2, dtype, t2)
            try:
                result = polymm.matmul(impl.from_numpy(x1), impl.from_numpy(x2), backend=backend)
                if rng.random() < CHECK_SHARE:
                    rows = np.unique(rng.integers(0, s1[-2], size=min(s1[-2], 4)))
                    got = np.take(impl.to_numpy(result), rows, axis=-2 if len(s2) > 1 else -1)
                    assert_matches(got, x1[..., rows, :], x2)
                    with lock:
                        soak.checked += 1
            except AssertionError as exc:
                note("wrong", f"{dtype} {s1} @ {s2} (transposed {t1}, {t2}): {exc}")
            except Exception as exc:  # counted and reported, never hidden
                note("errors", f"{dtype} {s1} @ {s2}: {type(exc).__name__}: {exc}", exc)

    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    take_sample()
    for t in pool:
        t.start()
    try:
        while any(t.is_alive() for t in pool):
            for t in pool:
                t.join(timeout=interval / len(pool))
            take_sample()
    finally:
        stop.set()
        for t in pool:
            t.join()
    impl.synchronize()
    take_sample()
    soak.seconds = time.perf_counter() - start
    return soak


def verdict(soak: Soak, warmup: int = 5000) -> dict:
    """Memory growth after the first ``warmup`` products (or the first quarter of the run, if it
    is shorter): the growth in MB, and the least-squares slope in MB per 10,000 products."""
    warm = min(warmup, soak.products // 4)
    after = [s for s in soak.samples if s.products >= warm]
    out = {"warmup_products": warm, "measured_products": 0, "growth_mb": None, "mb_per_10k": None}
    for kind in ("resident", "device"):
        points = [(s.products, getattr(s, kind)) for s in after if getattr(s, kind) is not None]
        if len(points) < 2 or points[-1][0] == points[0][0]:
            continue
        x = np.array([p for p, _ in points], float)
        y = np.array([b for _, b in points], float) / 2**20
        slope = np.polyfit(x, y, 1)[0] if np.ptp(x) else 0.0
        prefix = "" if kind == "resident" else "device_"
        out[prefix + "growth_mb"] = round(float(y[-1] - y[0]), 1)
        out[prefix + "mb_per_10k"] = round(float(slope * 10_000), 2)
        out["measured_products"] = int(x[-1] - x[0])
    if out["growth_mb"] is None:
        out["note"] = "too few samples after the warm-up to measure growth: run longer"
    out["start_mb"] = round(soak.samples[0].resident / 2**20, 1) if soak.samples else None
    out["end_mb"] = round(soak.samples[-1].resident / 2**20, 1) if soak.samples else None
    return out


def report(soak: Soak, command: str, warmup: int = 5000) -> dict:
    """The JSON document ``polymm soak --json FILE`` writes."""
    from .cliffs import machine_info

    return {
        "suite": "soak",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "machine": machine_info([soak.backend]),
        "soak": {k: v for k, v in asdict(soak).items() if k != "samples"},
        "verdict": verdict(soak, warmup),
        "samples": [asdict(s) for s in soak.samples],
    }


def plot(document: dict, path: str) -> None:
    """Resident (and device) memory against products done, the warm-up shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = document["samples"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = [s["products"] for s in samples]
    ax.plot(x, [s["resident"] / 2**20 for s in samples], label="host, resident")
    if any(s["device"] is not None for s in samples):
        ax.plot(x, [(s["device"] or 0) / 2**20 for s in samples], label="device")
    ax.axvspan(0, document["verdict"]["warmup_products"], color="0.9", label="warm-up")
    v, s = document["verdict"], document["soak"]
    ax.set_title(
        f"polymm soak: {s['backend']}, {s['threads']} threads, {s['products']:,} products; "
        f"after warm-up {v['growth_mb']} MB ({v['mb_per_10k']} MB / 10k)",
        fontsize=9,
    )
    ax.set_xlabel("products")
    ax.set_ylabel("MB")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
