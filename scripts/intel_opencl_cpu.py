#!/usr/bin/env python
"""Intel's CPU OpenCL runtime, from PyPI, as a second OpenCL CPU driver beside PoCL.

PoCL 3.0 from PyPI (``pocl-binary-distribution``, LLVM 14) builds nothing on CPUs its LLVM does
not know (AMD Zen 5: "unknown target CPU 'generic'"), and the ``opencl`` backend is then
unavailable. Intel's runtime runs on such CPUs too. This downloads its wheels (pinned), unpacks
their libraries into ``DIR/lib`` (the runtime finds its own libraries beside it: RUNPATH
``$ORIGIN``), writes ``DIR/vendors/intel-cpu.icd`` naming it, and prints the one variable the
OpenCL loader needs:

    eval "$(python scripts/intel_opencl_cpu.py ~/.cache/polymm-intel-opencl)"
    polymm info        # opencl: the Intel device, PoCL's passed over with its reason

The ``opencl`` backend then picks the first device that builds programs.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEELS = ("intel-opencl-rt==2026.2.0", "tbb==2023.2.0", "intel-cmplr-lib-rt==2026.2.0")


def install(target: Path) -> Path:
    """Unpack the runtime into ``target``; the folder of its ICD file (for ``OCL_ICD_VENDORS``)."""
    lib, vendors = target / "lib", target / "vendors"
    runtime = lib / "libintelocl.so"
    if not runtime.exists():
        lib.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--dest", tmp, *WHEELS]
            subprocess.run(cmd, check=True)
            for wheel in sorted(Path(tmp).glob("*.whl")):
                with zipfile.ZipFile(wheel) as z:
                    for info in z.infolist():
                        parts = Path(info.filename).parts
                        # <name>.data/data/lib/<file>: what pip would put in <prefix>/lib
                        if len(parts) == 4 and parts[0].endswith(".data") and parts[1:3] == ("data", "lib"):
                            (lib / parts[3]).write_bytes(z.read(info))
        if not runtime.exists():
            raise SystemExit(f"the wheels {', '.join(WHEELS)} held no libintelocl.so")
    vendors.mkdir(parents=True, exist_ok=True)
    (vendors / "intel-cpu.icd").write_text(f"{runtime.resolve()}\n")
    return vendors


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="where to unpack the runtime (reused when it is there)")
    vendors = install(parser.parse_args(argv).dir)
    print(f"export OCL_ICD_VENDORS={shlex.quote(str(vendors.resolve()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
