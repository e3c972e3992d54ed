"""PoCL's on-disk kernel cache, checked before PoCL reads it.

PoCL keeps each compiled program as ``<cache>/<xx>/<hash>/program.bc`` (LLVM
bitcode) with one shared object per kernel below it.  A truncated or corrupted
entry is fatal inside PoCL: a bad shared object aborts the process at the launch,
a bad bitcode file loses the kernel and aborts the process at exit.  Neither can
be caught from Python, so entries whose files do not even start like bitcode or
an ELF object are removed first, once per process; PoCL then compiles them
again (and caches them anew).  Other drivers' caches are left to their drivers.
"""

from __future__ import annotations

import os
import shutil
import warnings

__all__ = ["pocl_cache_dir", "drop_corrupt_pocl_entries"]

_BITCODE_MAGICS = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")  # raw bitcode, bitcode wrapper
_ELF_MAGIC = b"\x7fELF"
_ELF_HEADER_BYTES = 64


def pocl_cache_dir() -> str:
    """Where PoCL caches kernels: ``POCL_CACHE_DIR``, else ``$XDG_CACHE_HOME/pocl/kcache``."""
    explicit = os.environ.get("POCL_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pocl", "kcache")


def _corrupt(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(_ELF_HEADER_BYTES)
    except OSError:
        return False  # unreadable to us: PoCL's business (permissions, a concurrent writer)
    if path.endswith(".bc"):
        return not head.startswith(_BITCODE_MAGICS)
    return not head.startswith(_ELF_MAGIC) or len(head) < _ELF_HEADER_BYTES


def drop_corrupt_pocl_entries(root: str | None = None) -> list[str]:
    """Remove the cache entries under ``root`` (default :func:`pocl_cache_dir`) holding a
    program or kernel file that is not bitcode / ELF; returns the entries removed, with one
    warning naming them."""
    root = root or pocl_cache_dir()
    dropped = []
    for bucket in _listdir(root):
        for entry in _listdir(os.path.join(root, bucket)):
            where = os.path.join(root, bucket, entry)
            for folder, _, files in os.walk(where):
                if any(_corrupt(os.path.join(folder, f)) for f in files if f.endswith((".bc", ".so"))):
                    shutil.rmtree(where, ignore_errors=True)
                    dropped.append(where)
                    break
    if dropped:
        warnings.warn(
            f"polymm opencl: removed {len(dropped)} corrupted PoCL kernel-cache entr"
            f"{'y' if len(dropped) == 1 else 'ies'} ({', '.join(dropped)}); PoCL compiles them again",
            RuntimeWarning,
            stacklevel=2,
        )
    return dropped


def _listdir(path: str) -> list[str]:
    try:
        return [name for name in os.listdir(path) if os.path.isdir(os.path.join(path, name))]
    except OSError:
        return []
