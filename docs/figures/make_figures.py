"""Draw the figures of the "How the kernels work" page (PNG, committed beside this script).

Run from anywhere: ``python docs/figures/make_figures.py``. Figures are drawn, not
measured, except where a caption says so, so the script needs only matplotlib.
The numbers in the occupancy figure come from :func:`occupancy`, which the page's
worked example also uses (the docs test runs that example).
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = Path(HERE).parents[1]  # the repository: recorded JSON lives under benchmarks/
A_COLOR, B_COLOR, C_COLOR = "#4c72b0", "#dd8452", "#55a868"
LIGHT = {"A": "#c9d6ee", "B": "#f6d5bd", "C": "#cce7d3"}
DPI = 110

# H100 SXM (compute capability 9.0) per-SM limits, from NVIDIA's CUDA C Programming Guide.
H100 = dict(
    smem_per_sm=228 * 1024,
    smem_reserved_per_block=1024,
    regs_per_sm=65536,
    threads_per_sm=2048,
    blocks_per_sm=32,
    reg_alloc_unit=256,
    warp=32,
)


def occupancy(threads: int, regs_per_thread: int, smem_per_block: int, dev=H100) -> dict:
    """Blocks per SM allowed by each resource, and the resulting occupancy.

    Registers are allocated per warp in units of 256 (so 40 regs/thread costs
    ceil(40*32/256)*256 = 1280 per warp); each block also costs 1 KiB of shared
    memory reserved by the system.
    """
    warps = math.ceil(threads / dev["warp"])
    regs_per_warp = math.ceil(regs_per_thread * dev["warp"] / dev["reg_alloc_unit"]) * dev["reg_alloc_unit"]
    limits = {
        "threads": dev["threads_per_sm"] // threads,
        "registers": dev["regs_per_sm"] // (regs_per_warp * warps),
        "shared memory": dev["smem_per_sm"] // (smem_per_block + dev["smem_reserved_per_block"]),
        "block slots": dev["blocks_per_sm"],
    }
    blocks = min(limits.values())
    return {
        "limits": limits,
        "blocks_per_sm": blocks,
        "limited_by": min(limits, key=limits.get),
        "threads_per_sm": blocks * threads,
        "occupancy": blocks * threads / dev["threads_per_sm"],
    }


# ---------------------------------------------------------------- drawing helpers


def grid(ax, x, y, rows, cols, cell=1.0, face="white", edge="#999999", lw=0.6):
    """A rows x cols grid of cells whose top-left corner is (x, y) (y grows downwards)."""
    for r in range(rows):
        for c in range(cols):
            ax.add_patch(Rectangle((x + c * cell, y + r * cell), cell, cell, facecolor=face, edgecolor=edge, lw=lw))


def box(ax, x, y, w, h, face, edge="black", lw=1.5, alpha=1.0, hatch=None, z=2):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, lw=lw, alpha=alpha, hatch=hatch, zorder=z))


def arrow(ax, p, q, color="black", lw=1.5, style="-|>", rad=0.0):
    ax.add_patch(
        FancyArrowPatch(
            p, q, arrowstyle=style, mutation_scale=12, color=color, lw=lw, connectionstyle=f"arc3,rad={rad}", zorder=5
        )
    )


def canvas(width, height, w_units, h_units):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(-0.5, w_units)
    ax.set_ylim(h_units, -0.8)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def save(fig, name):
    path = os.path.join(HERE, name)
    fig.savefig(path, dpi=DPI, bbox_inches="tight", facecolor="white")
    plt.close(fig)
    print("wrote", os.path.relpath(path))


# ---------------------------------------------------------------- figures


def fig_naive():
    """One thread per C element: a whole row of A and column of B from global memory."""
    fig, ax = canvas(9, 3.4, 29, 9.5)
    n = 8
    grid(ax, 0, 0, n, n, face=LIGHT["A"])
    grid(ax, 10, 0, n, n, face=LIGHT["B"])
    grid(ax, 20, 0, n, n, face=LIGHT["C"])
    i, j = 2, 5
    box(ax, 0, i, n, 1, A_COLOR, alpha=0.85)
    box(ax, 10 + j, 0, 1, n, B_COLOR, alpha=0.85)
    box(ax, 20 + j, i, 1, 1, C_COLOR)
    for x, label in ((4, "A (M x K)"), (14, "B (K x N)"), (24, "C (M x N)")):
        ax.text(x, -0.4, label, ha="center", fontsize=11)
    ax.text(9, 4, "@", ha="center", va="center", fontsize=16)
    ax.text(19, 4, "=", ha="center", va="center", fontsize=16)
    arrow(ax, (0.3, i + 0.5), (7.7, i + 0.5), color="white")
    arrow(ax, (10 + j + 0.5, 0.3), (10 + j + 0.5, 7.7), color="white")
    ax.text(
        14,
        9.1,
        "thread (m, n) = (2, 5): for k in 0..K-1:  acc += A[m, k] * B[k, n]\n"
        "2 loads from global memory per multiply-add: about 0.25 FLOP per byte (float32)",
        ha="center",
        va="center",
        fontsize=10,
    )
    save(fig, "naive.png")


def fig_tiled():
    """Tiles sweeping along A's block row and down B's block column; one C tile accumulates."""
    fig, ax = canvas(10, 5.2, 31, 14.5)
    t = 2  # drawing units per tile
    nt = 4
    colors = ["#08306b", "#2171b5", "#6baed6", "#c6dbef"]
    ocolors = ["#7f2704", "#d94801", "#fd8d3c", "#fdd0a2"]
    grid(ax, 0, 0, nt, nt, cell=t, face=LIGHT["A"], edge="#555555", lw=1)
    grid(ax, 11, 0, nt, nt, cell=t, face=LIGHT["B"], edge="#555555", lw=1)
    grid(ax, 22, 0, nt, nt, cell=t, face=LIGHT["C"], edge="#555555", lw=1)
    bi, bj = 1, 2
    for p in range(nt):
        box(ax, p * t, bi * t, t, t, colors[p], lw=1)
        ax.text(
            p * t + 1, bi * t + 1, f"{p}", color="white" if p < 2 else "black", ha="center", va="center", fontsize=12
        )
        box(ax, 11 + bj * t, p * t, t, t, ocolors[p], lw=1)
        ax.text(
            11 + bj * t + 1,
            p * t + 1,
            f"{p}",
            color="white" if p < 2 else "black",
            ha="center",
            va="center",
            fontsize=12,
        )
    box(ax, 22 + bj * t, bi * t, t, t, C_COLOR, lw=2)
    ax.text(22 + bj * t + 1, bi * t + 1, "Σ", ha="center", va="center", fontsize=14, color="white")
    arrow(ax, (0.2, bi * t - 0.4), (7.8, bi * t - 0.4), color=A_COLOR)
    arrow(ax, (11 + bj * t + 2.4, 0.2), (11 + bj * t + 2.4, 7.8), color="#d94801")
    for x, label in ((4, "A: block row of the C tile"), (15, "B: block column"), (26, "C: one work-group's tile")):
        ax.text(x, -0.45, label, ha="center", fontsize=10)
    ax.text(10, 4, "@", ha="center", va="center", fontsize=16)
    ax.text(21, 4, "=", ha="center", va="center", fontsize=16)
    # the timeline of one phase
    y = 10
    steps = [
        ("load A tile p\n+ B tile p\n(one element each)", "#dddddd", 6),
        ("BARRIER", "#c44e52", 2.6),
        ("TS multiply-adds\nfrom local memory", "#dddddd", 6),
        ("BARRIER", "#c44e52", 2.6),
        ("next phase\np + 1", "#ffffff", 4.5),
    ]
    x = 1
    for text, face, w in steps:
        box(ax, x, y, w, 2.6, face, lw=1)
        ax.text(
            x + w / 2,
            y + 1.3,
            text,
            ha="center",
            va="center",
            fontsize=9,
            color="white" if face == "#c44e52" else "black",
        )
        x += w + 0.6
    ax.text(1, y - 0.6, "each phase p = 0, 1, ..., ceil(K / TS) - 1, per work-group:", fontsize=10)
    ax.text(
        1,
        y + 3.5,
        "1st barrier: the tiles are complete before anyone reads them.   "
        "2nd barrier: nobody overwrites them while a neighbour still reads.",
        fontsize=9,
    )
    save(fig, "tiled.png")


def fig_edges():
    """A size that is not a multiple of the tile: guarded loads read zeros, guarded stores skip."""
    fig, ax = canvas(8.5, 4.6, 24, 12.5)
    ts, m = 4, 10  # 10 x 10 matrix, 4 x 4 tiles -> 3 x 3 tiles, the last ones partial
    cell = 0.9
    grid(ax, 0, 0, 12, 12, cell=cell, face="white", edge="#dddddd", lw=0.4)
    box(ax, 0, 0, m * cell, m * cell, LIGHT["C"], lw=0.8, z=1)
    for r in range(3):
        for c in range(3):
            box(ax, c * ts * cell, r * ts * cell, ts * cell, ts * cell, "none", edge="#333333", lw=1.4, z=3)
    # the part of the last tiles outside the matrix
    box(ax, m * cell, 0, (12 - m) * cell, 12 * cell, "#eeeeee", edge="none", lw=0, hatch="///", z=2)
    box(ax, 0, m * cell, m * cell, (12 - m) * cell, "#eeeeee", edge="none", lw=0, hatch="///", z=2)
    box(ax, 0, 0, m * cell, m * cell, "none", edge=C_COLOR, lw=2.5, z=4)
    ax.text(m * cell / 2, -0.45, "C is 10 x 10, tiles are 4 x 4: 3 x 3 work-groups", ha="center", fontsize=10)
    ax.text(12.3, 1.2, "inside: normal loads and stores", fontsize=10, va="center")
    box(ax, 12.3, 2.2, 0.8, 0.8, LIGHT["C"], lw=0.8)
    ax.text(13.4, 2.6, "element of the matrix", fontsize=9, va="center")
    box(ax, 12.3, 3.6, 0.8, 0.8, "#eeeeee", lw=0.8, hatch="///")
    ax.text(13.4, 4.0, "outside: its work-item still runs", fontsize=9, va="center")
    ax.text(
        12.3,
        6.0,
        "loads:  if (m < M && k < K) v = A[...] else v = 0\n"
        "          (zeros add nothing to the sum)\n"
        "barriers: every work-item reaches them,\n"
        "          also the ones outside C\n"
        "store:  if (m < M && n < N) C[...] = acc",
        fontsize=9,
        va="top",
        family="monospace",
    )
    save(fig, "tiled_edges.png")


def fig_tile_size():
    """Tile edge TS against shared memory per work-group and arithmetic intensity (float32)."""
    ts = [4, 8, 16, 32, 64]
    smem_kib = [2 * t * t * 4 / 1024 for t in ts]
    threads = [t * t for t in ts]
    intensity = [t / 4 for t in ts]  # 2*TS flops per 8 bytes loaded, per work-item and phase
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.3))
    x = range(len(ts))
    labels = [str(t) for t in ts]
    axes[0].bar(x, smem_kib, color=A_COLOR)
    axes[0].axhline(48, color="#c44e52", ls="--")
    axes[0].set_ylim(0.08, 300)
    axes[0].text(-0.4, 70, "48 KiB static limit per block", color="#c44e52", fontsize=8)
    axes[0].set_title("tile memory per work-group (KiB)\n2 x TS x TS x 4 bytes", fontsize=10)
    axes[0].set_yscale("log")
    axes[1].bar(x, threads, color=["#55a868" if t <= 1024 else "#c44e52" for t in threads])
    axes[1].axhline(1024, color="#c44e52", ls="--")
    axes[1].text(-0.4, 1300, "1024 threads per block max", color="#c44e52", fontsize=8)
    axes[1].set_title("work-items per work-group\nTS x TS", fontsize=10)
    axes[1].set_yscale("log")
    axes[2].bar(x, intensity, color=B_COLOR)
    axes[2].set_title("FLOP per byte from global memory\n(2 TS FLOP per 8 bytes loaded)", fontsize=10)
    for a in axes:
        a.set_xticks(list(x), labels)
        a.set_xlabel("tile edge TS")
    fig.tight_layout()
    save(fig, "tile_size.png")


def fig_occupancy():
    """The worked example: blocks per H100 SM allowed by each resource, for two kernels."""
    cases = [
        ("16x16 tiled\n256 threads, 40 regs,\n2 KiB shared", occupancy(256, 40, 2 * 16 * 16 * 4)),
        (
            "128x128x8 register-blocked\n256 threads, 128 regs,\n16 KiB shared (double-buffered)",
            occupancy(256, 128, 2 * 8 * (128 + 128) * 4),
        ),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for ax, (title, occ) in zip(axes, cases):
        names = list(occ["limits"])
        vals = [occ["limits"][k] for k in names]
        colors = ["#c44e52" if k == occ["limited_by"] else "#8c8c8c" for k in names]
        ax.barh(names, vals, color=colors)
        for yv, v in enumerate(vals):
            ax.text(v + 0.5, yv, str(v), va="center", fontsize=9)
        ax.set_title(
            f"{title}\n-> {occ['blocks_per_sm']} blocks = {occ['threads_per_sm']} threads per SM "
            f"({occ['occupancy']:.0%})",
            fontsize=9,
        )
        ax.set_xlabel("blocks per SM allowed by this resource")
        ax.invert_yaxis()
        ax.set_xlim(0, max(vals) * 1.15 + 2)
    fig.tight_layout()
    save(fig, "occupancy.png")


def fig_regblock():
    """Register blocking: each work-item owns a WPTM x WPTN micro-tile; one step is an outer product."""
    fig, ax = canvas(10.5, 3.6, 33, 9.5)
    # Left: a 16 x 16 block of C, 4 x 4 work-items each with a 4 x 4 micro-tile.
    cell = 0.6
    grid(ax, 0, 0, 16, 16, cell=cell, face=LIGHT["C"], edge="#bbbbbb", lw=0.3)
    for r in range(4):
        for c in range(4):
            box(ax, c * 4 * cell, r * 4 * cell, 4 * cell, 4 * cell, "none", edge="#333333", lw=1, z=3)
    box(ax, 1 * 4 * cell, 2 * 4 * cell, 4 * cell, 4 * cell, C_COLOR, lw=2, z=4)
    ax.text(8 * cell, -0.45, "block of C: 4 x 4 work-items,\neach owning 4 x 4 results", ha="center", fontsize=9)
    # Right: the outer product of one step kk.
    x0 = 13
    grid(ax, x0, 2, 4, 1, cell=1, face=LIGHT["A"])
    box(ax, x0, 2, 1, 4, A_COLOR, alpha=0.8, lw=1)
    ax.text(x0 + 0.5, 1.4, "a_reg\n(WPTM)", ha="center", fontsize=9)
    grid(ax, x0 + 2, 0, 1, 4, cell=1, face=LIGHT["B"])
    box(ax, x0 + 2, 0, 4, 1, B_COLOR, alpha=0.8, lw=1)
    ax.text(x0 + 6.3, 0.5, "b_reg (WPTN)", va="center", fontsize=9)
    grid(ax, x0 + 2, 2, 4, 4, cell=1, face=C_COLOR)
    ax.text(
        x0 + 4,
        6.8,
        "acc[WPTM][WPTN] += a_reg[i] * b_reg[j]\n4 + 4 loads from local memory,\n16 multiply-adds in registers",
        ha="center",
        va="top",
        fontsize=9,
    )
    arrow(ax, (16 * cell + 0.2, 10 * cell), (x0 - 0.3, 4), rad=-0.2)
    # Far right: a vector load.
    x1 = 24.5
    grid(ax, x1, 2, 1, 8, cell=1, face="white")
    box(ax, x1, 2, 4, 1, "#8172b3", alpha=0.85, lw=1.5)
    ax.text(x1 + 4, 1.2, "one float4 load = 4 consecutive floats\n(16 bytes, one instruction)", ha="center", fontsize=9)
    ax.text(
        x1 + 4,
        4.2,
        "needs: unit stride, 16-byte alignment,\nsizes a multiple of 4 (checked at run time;\n"
        "otherwise the scalar path)",
        ha="center",
        va="top",
        fontsize=9,
    )
    save(fig, "regblock.png")


def fig_cpu_loops():
    """Loop order on a row-major CPU array: i-j-k walks a column of B, i-k-j walks rows."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, order in zip(axes, ("ijk", "ikj")):
        ax.set_xlim(-0.5, 18)
        ax.set_ylim(9.5, -1.5)
        ax.set_aspect("equal")
        ax.axis("off")
        grid(ax, 0, 0, 8, 8, face=LIGHT["B"])
        grid(ax, 10, 0, 8, 8, face=LIGHT["C"])
        if order == "ijk":
            box(ax, 3, 0, 1, 8, B_COLOR, alpha=0.85, lw=1)
            arrow(ax, (3.5, 0.2), (3.5, 7.8), color="white")
            box(ax, 13, 2, 1, 1, C_COLOR, lw=1)
            ax.set_title(
                "for i: for j: for k:  C[i,j] += A[i,k] * B[k,j]\n"
                "inner loop strides down a column of B:\na new cache line per step, no SIMD",
                fontsize=9,
            )
        else:
            box(ax, 0, 4, 8, 1, B_COLOR, alpha=0.85, lw=1)
            arrow(ax, (0.2, 4.5), (7.8, 4.5), color="white")
            box(ax, 10, 2, 8, 1, C_COLOR, lw=1)
            arrow(ax, (10.2, 2.5), (17.8, 2.5), color="white")
            ax.set_title(
                "for i: for k: for j:  C[i,j] += A[i,k] * B[k,j]\n"
                "inner loop walks a row of B and a row of C:\nconsecutive addresses, vectorised",
                fontsize=9,
            )
        ax.text(4, 8.9, "B (row-major)", ha="center", fontsize=9)
        ax.text(14, 8.9, "C", ha="center", fontsize=9)
    fig.tight_layout()
    save(fig, "cpu_loops.png")


def fig_cpu_blocking():
    """Goto/BLIS blocking of the CPU 'auto' kernel: packed panels sized for L3, L2, L1 and registers."""
    fig, ax = canvas(11, 4.6, 36, 13.5)
    # B block KC x NC (packed, shared) in L3
    box(ax, 12, 0, 22, 5, LIGHT["B"], lw=1)
    ax.text(23, -0.4, "B block: KC x NC, packed once per (j0, p0)  [L3, shared by threads]", ha="center", fontsize=9)
    for j in range(11):
        box(ax, 12 + 2 * j, 0, 2, 5, "none", edge="#b0703a", lw=0.6)
    box(ax, 12 + 2 * 3, 0, 2, 5, B_COLOR, lw=1.2, alpha=0.9)
    ax.text(12 + 7.4, 5.5, "micro-panel KC x NR  [L1]", ha="left", va="top", fontsize=9)
    # A block MC x KC (packed per thread) in L2
    box(ax, 0, 7, 5, 6, LIGHT["A"], lw=1)
    for i in range(6):
        box(ax, 0, 7 + i, 5, 1, "none", edge="#3b5a8c", lw=0.6)
    box(ax, 0, 9, 5, 1, A_COLOR, lw=1.2, alpha=0.9)
    ax.text(-0.3, 6.5, "A block: MC x KC,\npacked in MR-row panels  [L2]", fontsize=9, ha="left")
    # C
    box(ax, 12, 7, 22, 6, LIGHT["C"], lw=1)
    box(ax, 12 + 6, 9, 2, 1, C_COLOR, lw=1.5)
    ax.text(12 + 7, 10.6, "MR x NR accumulators\n[registers]", ha="center", va="top", fontsize=9)
    ax.text(
        21.5,
        11.0,
        "for j0 in N by NC:\n  for p0 in K by KC:  pack B\n    for i0 in M by MC (threads): pack A\n"
        "      for each NR panel, each MR panel:\n        micro-kernel: KC rank-1 updates",
        fontsize=8.5,
        family="monospace",
        ha="left",
        va="center",
    )
    arrow(ax, (5.2, 9.5), (12 + 5.8, 9.5), color=A_COLOR)
    arrow(ax, (12 + 7, 5.2), (12 + 7, 8.8), color=B_COLOR)
    save(fig, "cpu_blocking.png")


def fig_precision():
    """Measured (in NumPy, by emulation): worst relative error against K for each precision
    mode, with the bound each mode documents (polymm.precision.error_bound)."""
    import numpy as np

    from polymm.precision import PRECISIONS, error_bound
    from polymm.testing.emulation import emulated_matmul

    rng = np.random.default_rng(2026)
    ks = [2**p for p in range(0, 15)]
    eps = float(np.finfo(np.float32).eps)
    colors = {"default": A_COLOR, "tf32x3": C_COLOR, "tf32": B_COLOR}
    labels = {"default": "float32 (default)", "tf32x3": '"tf32x3" (3 TF32 products)', "tf32": '"tf32"'}
    worst = {mode: [] for mode in PRECISIONS}
    for k in ks:
        a = rng.standard_normal((64, k)).astype(np.float32)
        b = rng.standard_normal((k, 64)).astype(np.float32)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        for mode in PRECISIONS:
            worst[mode].append(float((np.abs(emulated_matmul(a, b, mode) - exact) / scale).max()))
    # the same measure on the H100's tensor cores (scripts/precision_error.py),
    # where a mode's kernel ran (deep K goes to the SIMT kernels in float32)
    gpu = json.loads((ROOT / "benchmarks/tensorcore/precision-error-h100-2026-11-23-50182e5.json").read_text())
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    for mode in PRECISIONS:
        ax.loglog(ks, worst[mode], "o-", color=colors[mode], label=f"{labels[mode]}: emulated")
        on_gpu = [
            (k, e)
            for k, e, kern in zip(gpu["k"], gpu["worst_relative_error"][mode], gpu["kernel"][mode])
            if mode == "default" or "wgmma" in kern
        ]
        ax.loglog(*zip(*on_gpu), "x", color=colors[mode], markersize=9, label=f"{labels[mode]}: H100")
        ax.loglog(ks, [error_bound(mode, k, eps) for k in ks], "--", color=colors[mode], label="documented bound")
    ax.set_xlabel("K (contraction length)")
    ax.set_ylabel("worst |C - AB| / (|A||B|)")
    ax.set_title("Error of each precision mode, float32 inputs (NumPy emulation, H100 kernels)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, which="major", alpha=0.3)
    save(fig, "precision.png")


def fig_tensorcore():
    """The float16 tensor-core kernel: block tile -> warp tiles -> MMA tiles -> one thread's fragment."""
    fig, ax = canvas(12, 4.7, 41, 14.5)
    # 1. Block tile 128 x 256 in 2 x 4 warp tiles of 64 x 64 (drawn 1 unit = 16 elements).
    u = 1 / 16 * 1.0
    w, h = 256 * u, 128 * u
    box(ax, 0, 0, w, h, LIGHT["C"], lw=1.5)
    for r in range(2):
        for c in range(4):
            box(ax, c * 64 * u, r * 64 * u, 64 * u, 64 * u, "none", edge="#333333", lw=1, z=3)
            ax.text(c * 64 * u + 2, r * 64 * u + 2, f"warp {r * 4 + c}", ha="center", va="center", fontsize=8)
    box(ax, 64 * u, 64 * u, 64 * u, 64 * u, C_COLOR, lw=2, z=2)
    ax.text(w / 2, -0.45, "block: 128 x 256 of C, 8 warps (2 x 4) of 64 x 64", ha="center", fontsize=9)
    # 2. One warp tile: 4 x 8 MMA tiles of 16 x 8.
    x0 = 18.5
    cw, ch = 1.0, 2.0
    for r in range(4):
        for c in range(8):
            box(ax, x0 + c * cw, r * ch, cw, ch, LIGHT["C"], edge="#555555", lw=0.6)
    box(ax, x0 + 2 * cw, 1 * ch, cw, ch, C_COLOR, lw=1.5, z=3)
    ax.text(x0 + 4, -0.45, "one warp: 4 x 8 MMAs of 16 x 8\n(m16n8k16: f32 += f16 x f16)", ha="center", fontsize=9)
    arrow(ax, (128 * u + 0.2, 96 * u), (x0 - 0.3, 4), rad=-0.2)
    # 3. One 16 x 8 accumulator tile: lane l owns rows l/4 and l/4 + 8, columns 2 (l % 4), +1.
    x1 = 32
    cell = 0.55
    for r in range(16):
        for c in range(8):
            lane = (r % 8) * 4 + c // 2
            shade = "#cce7d3" if lane % 2 == 0 else "#a8d5b5"
            ax.add_patch(Rectangle((x1 + c * cell, r * cell), cell, cell, facecolor=shade, edgecolor="#ffffff", lw=0.5))
            if c % 2 == 0:
                ax.text(x1 + (c + 1) * cell, (r + 0.5) * cell, str(lane), ha="center", va="center", fontsize=6)
    ax.text(
        x1 + 4 * cell,
        -0.45,
        "16 x 8 accumulators: the lane\nthat holds each pair (4 floats/lane)",
        ha="center",
        fontsize=9,
    )
    arrow(ax, (x0 + 3 * cw + 0.1, 1.5 * ch), (x1 - 0.3, 5.6), rad=-0.2)
    # The pipeline below: cp.async stages of K slices in flight while the warps multiply.
    y = 11.5
    for s in range(4):
        face = LIGHT["A"] if s < 3 else LIGHT["C"]
        box(ax, s * 5.2, y, 4.9, 2.2, face, lw=1)
        label = f"stage {s}: slice k+{s}\ncp.async in flight" if s < 3 else "stage 3: slice k\nldmatrix -> mma"
        ax.text(s * 5.2 + 2.45, y + 1.1, label, ha="center", va="center", fontsize=7.5)
    ax.text(
        21.5,
        y + 1.1,
        "4-stage ring, one barrier per K slice (32 deep); A and B rows\n"
        "swizzled (16-byte chunk XOR row bits): each ldmatrix phase\nreads 8 different bank groups",
        va="center",
        fontsize=9,
    )
    save(fig, "tensorcore.png")


def fig_wgmma():
    """Hopper's kernel: a producer warp group feeding two consumer warp groups through a ring of
    shared-memory stages (copy engine, mbarriers), and the 128-byte swizzle it reads."""
    fig, ax = canvas(13, 5.2, 46, 17)
    # 1. The block tile: 128 x 256 of C, rows 0-63 to warp group 1, rows 64-127 to warp group 2.
    u = 1 / 16
    box(ax, 0, 1, 256 * u, 64 * u, LIGHT["C"], lw=1.2)
    box(ax, 0, 1 + 64 * u, 256 * u, 64 * u, "#a8d5b5", lw=1.2)
    ax.text(
        8,
        1 + 32 * u,
        "warp group 1: rows 0-63\n128 float32 accumulators / thread",
        ha="center",
        va="center",
        fontsize=8,
    )
    ax.text(8, 1 + 96 * u, "warp group 2: rows 64-127", ha="center", va="center", fontsize=8)
    ax.text(8, 0.2, "block: 128 x 256 of C (persistent: one tile after another)", ha="center", fontsize=9)
    box(ax, 0, 10.2, 16, 1.6, LIGHT["A"], lw=1.2)
    ax.text(
        8, 11.0, "warp group 0: the producer (one thread asks the copy engine)", ha="center", va="center", fontsize=8
    )
    # 2. The ring of stages, each an A tile and a B tile, with its two barriers.
    x0 = 21.5
    for s_ in range(4):
        y = 1 + s_ * 3.0
        box(ax, x0, y, 3.0, 2.2, LIGHT["A"], lw=1)
        ax.text(x0 + 1.5, y + 1.1, "A\n128 x 64", ha="center", va="center", fontsize=7)
        box(ax, x0 + 3.2, y, 6.0, 2.2, LIGHT["B"], lw=1)
        ax.text(x0 + 6.2, y + 1.1, "B  64 x 256", ha="center", va="center", fontsize=7)
        ax.text(x0 + 9.5, y + 0.55, f"full[{s_}]", fontsize=7, va="center", color=A_COLOR)
        ax.text(x0 + 9.5, y + 1.65, f"empty[{s_}]", fontsize=7, va="center", color=C_COLOR)
    ax.text(x0 + 5.5, 0.2, "ring of 4 stages (48 KiB each)", ha="center", fontsize=9)
    arrow(ax, (16.2, 11.0), (x0 - 0.2, 2.1), color=A_COLOR, rad=0.25)
    ax.text(18.7, 9.3, "TMA: tiles land,\nbytes counted\non full[s]", fontsize=7.5, color=A_COLOR, ha="center")
    arrow(ax, (x0 - 0.2, 5.1), (16.2, 4.0), color=C_COLOR, rad=0.1)
    ax.text(18.7, 3.6, "wgmma reads\nthe stage", fontsize=7.5, color=C_COLOR, ha="center")
    ax.text(
        x0 - 1.5,
        14.2,
        "consumers: wait full[s] -> 4 x wgmma.m64n256k16 -> commit;\n"
        "once the next slice's MMAs are issued, the last one is done:\n"
        "arrive on empty[s]. producer: wait empty[s] -> refill it.",
        fontsize=8,
        va="center",
    )
    # 3. The 128-byte swizzle: 8 rows of 8 chunks of 16 bytes, chunk c of row r stored at c XOR r.
    x1 = 35.5
    cell = 1.1
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
    for r in range(8):
        for slot in range(8):
            chunk = slot ^ r
            ax.add_patch(
                Rectangle(
                    (x1 + slot * cell, 1 + r * cell), cell, cell, facecolor=colors[chunk], edgecolor="white", lw=0.8
                )
            )
            ax.text(
                x1 + (slot + 0.5) * cell,
                1 + (r + 0.5) * cell,
                str(chunk),
                ha="center",
                va="center",
                fontsize=7,
                color="white",
            )
    ax.text(x1 + 4 * cell, 0.2, "128-byte swizzle atom (1 KiB)", ha="center", fontsize=9)
    ax.text(
        x1 + 4 * cell,
        1 + 8 * cell + 0.6,
        "row r = 64 K-elements of one row of A;\n16-byte chunk c stored in slot c XOR r:\n"
        "a k16 step (chunks 2j, 2j+1) of 8 rows\nhits 8 different slots, all 32 banks",
        ha="center",
        va="top",
        fontsize=8,
    )
    save(fig, "wgmma.png")


FIGURES = [
    fig_naive,
    fig_tiled,
    fig_edges,
    fig_tile_size,
    fig_occupancy,
    fig_regblock,
    fig_cpu_loops,
    fig_cpu_blocking,
    fig_precision,
    fig_tensorcore,
    fig_wgmma,
]


def main(argv=None) -> int:
    wanted = set(argv or ())
    for make in FIGURES:
        if not wanted or make.__name__ in wanted:
            make()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
