"""The text of the CUDA-only kernels (``kernels/*.cu``), each after the helpers they share.

NVRTC compiles a string without include paths, so the shared header is put in front of each file
rather than ``#include``d; nvcc then compiles the same text. Every module that builds a CUDA-only
launch reads its kernel from here, which imports nothing of this package (no cycle through it).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["KERNELS", "source"]

KERNELS = Path(__file__).parent / "kernels"


def source(name: str) -> str:
    """The text of ``kernels/<name>.cu`` after the PTX helpers (``kernels/ptx.cuh``)
    (``tensorcore``: 16- and 8-bit types; ``dmma``: float64; ``wgmma``, ``tf32_split``, ``transpose``)."""
    return (KERNELS / "ptx.cuh").read_text() + (KERNELS / f"{name}.cu").read_text()
