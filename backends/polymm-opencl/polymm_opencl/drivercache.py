"""PoCL's on-disk kernel cache, checked before PoCL reads it.

PoCL keeps each compiled program as ``<cache>/<xx>/<hash>/program.bc`` (LLVM
bitcode) with one shared object per kernel below it.  A truncated or corrupted
entry is fatal inside PoCL: a bad shared object aborts the process at the launch,
a bad bitcode file loses the program's IR and aborts the process at exit ("still
have references to IRs").  Neither can be caught from Python, so before the
process builds its first program on a PoCL device (:func:`check_once`), every
entry holding a file that is not whole is removed; PoCL then compiles it again.

"Whole" is checked from the files' own framing, which costs a few reads per file:
bitcode starts with its magic and its top-level blocks' declared lengths add up to
the file's size; a shared object starts with an ELF header whose section table
lies inside the file.  Only files written since the last check are read (its start
time is kept in ``<cache>/.polymm-checked``, which PoCL never reads): reading all of a
cache of 15,000 files took 0.9 s of every process's start.  Other drivers' caches are
left to their drivers.
"""

from __future__ import annotations

import os
import shutil
import struct
import threading
import time
import warnings

__all__ = ["pocl_cache_dir", "drop_corrupt_pocl_entries", "check_once", "bitcode_is_whole", "elf_is_whole"]

_RAW_BITCODE = b"BC\xc0\xde"
_WRAPPED_BITCODE = b"\xde\xc0\x17\x0b"
_ELF_MAGIC = b"\x7fELF"
#: The file in the cache's root that holds the start of the last check (nanoseconds since the epoch).
MARKER = ".polymm-checked"
#: Files this much older than the last check are read again (coarse file-system clocks).
_SLACK_NS = 2_000_000_000


def pocl_cache_dir() -> str:
    """Where PoCL caches kernels: ``POCL_CACHE_DIR``, else ``$XDG_CACHE_HOME/pocl/kcache``."""
    explicit = os.environ.get("POCL_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pocl", "kcache")


def bitcode_is_whole(data: bytes) -> bool:
    """True when ``data`` is LLVM bitcode whose top-level blocks fill it exactly.

    Raw bitcode is the magic, then blocks, each opened by a 32-bit word (abbreviation id 1 =
    ENTER_SUBBLOCK in 2 bits, block id and abbreviation width) and a 32-bit length in words.
    The wrapper form (Darwin's) names the raw stream's offset and size in its header."""
    if data.startswith(_WRAPPED_BITCODE):
        if len(data) < 20:
            return False
        offset, size = struct.unpack_from("<II", data, 8)
        return offset + size <= len(data) and bitcode_is_whole(data[offset : offset + size])
    if not data.startswith(_RAW_BITCODE) or len(data) % 4 or len(data) == 4:
        return False
    at = 4
    while at < len(data):
        if at + 8 > len(data):
            return False
        opener, words = struct.unpack_from("<II", data, at)
        if opener & 0x3 != 1:  # a top-level entry that is not a block: damaged
            return False
        at += 8 + 4 * words
    return at == len(data)


def elf_is_whole(data: bytes) -> bool:
    """True when ``data`` starts with a 64-bit little-endian ELF header (what PoCL writes on
    x86-64 and AArch64 hosts) whose section header table lies inside ``data``; other classes
    are judged by their magic alone."""
    if not data.startswith(_ELF_MAGIC) or len(data) < 64:
        return False
    if data[4] != 2 or data[5] != 1:  # not ELF64 little-endian: no layout to check here
        return True
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    return 64 <= shoff and shoff + shentsize * shnum <= len(data)


def _corrupt(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False  # unreadable to us: PoCL's business (permissions, a concurrent writer)
    return not (bitcode_is_whole(data) if path.endswith(".bc") else elf_is_whole(data))


def drop_corrupt_pocl_entries(root: str | None = None) -> list[str]:
    """Remove the cache entries under ``root`` (default :func:`pocl_cache_dir`) holding a
    program or kernel file that is not whole; returns the entries removed, with one warning
    naming them."""
    root = root or pocl_cache_dir()
    started, since = time.time_ns(), _last_check(root) - _SLACK_NS
    dropped = []
    for bucket in _listdir(root):
        for entry in _listdir(os.path.join(root, bucket)):
            where = os.path.join(root, bucket, entry)
            for folder, _, files in os.walk(where):
                paths = (os.path.join(folder, f) for f in files if f.endswith((".bc", ".so")))
                if any(_written_since(path, since) and _corrupt(path) for path in paths):
                    shutil.rmtree(where, ignore_errors=True)
                    dropped.append(where)
                    break
    _mark_checked(root, started)
    if dropped:
        warnings.warn(
            f"polymm opencl: removed {len(dropped)} corrupted PoCL kernel-cache entr"
            f"{'y' if len(dropped) == 1 else 'ies'} ({', '.join(dropped)}); PoCL compiles them again",
            RuntimeWarning,
            stacklevel=3,
        )
    return dropped


def _last_check(root: str) -> int:
    """When the last whole check of ``root`` started (0: never, or unreadable)."""
    try:
        with open(os.path.join(root, MARKER), encoding="ascii") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _written_since(path: str, since: int) -> bool:
    try:
        return os.stat(path).st_mtime_ns >= since
    except OSError:
        return False  # gone meanwhile


def _mark_checked(root: str, started: int) -> None:
    """Note that every file of ``root`` written before ``started`` has been checked."""
    if not os.path.isdir(root):
        return
    temporary = os.path.join(root, f"{MARKER}.{os.getpid()}")
    try:
        with open(temporary, "w", encoding="ascii") as f:
            f.write(str(started))
        os.replace(temporary, os.path.join(root, MARKER))
    except OSError:
        pass  # a read-only cache: every process checks it whole


_checked = False
_check_lock = threading.Lock()


def check_once(platform_name: str) -> None:
    """Drop PoCL's corrupted cache entries the first time this process is about to build a
    program on a PoCL platform; every later call (and any other driver) costs nothing."""
    global _checked
    if _checked or "portable computing language" not in platform_name.lower():
        return
    with _check_lock:
        if not _checked:
            drop_corrupt_pocl_entries()
            _checked = True


def _listdir(path: str) -> list[str]:
    try:
        return [name for name in os.listdir(path) if os.path.isdir(os.path.join(path, name))]
    except OSError:
        return []
