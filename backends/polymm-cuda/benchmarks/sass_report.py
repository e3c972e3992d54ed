"""Register/spill report and SASS instruction mix of the hot fast-kernel instantiations.

Needs nvcc and cuobjdump (the GPU machine has both).  Usage:
    python3 backends/polymm-cuda/benchmarks/sass_report.py OUTDIR
"""

import collections
import os
import re
import subprocess
import sys
import tempfile

from polymm_cuda import fastgemm

HOT = [
    ("float32", "128x256x16", True, 1, True, 4, True),
    ("float32", "128x128x16", True, 4, True, 4, False),
    ("float32", "256x128x8", True, 1, True, 1, True),
    ("float32", "64x64x8w", True, 4, True, 4, False),
    ("float64", "64x64x8w", True, 1, True, 2, True),
    ("int32", "128x256x16", True, 1, True, 4, True),
]


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (dt, cfg, ak, va, bnm, vb, mode) in enumerate(HOT):
            size = fastgemm.DTYPE_TAGS[dt][2]
            v = fastgemm.Variant(dt, fastgemm.CONFIG_BY_NAME[(size, cfg)], ak, va, bnm, vb, mode)
            src = os.path.join(tmp, "k.cu")
            with open(src, "w") as f:
                f.write(fastgemm.source() + fastgemm.explicit_instantiation(v))
            cub = os.path.join(tmp, "k.cubin")
            p = subprocess.run(
                ["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", cub, src],
                capture_output=True,
                text=True,
            )
            res = " ".join(re.findall(r"Used \d+ registers|\d+ bytes spill stores", p.stderr))
            sass = subprocess.run(["cuobjdump", "-sass", cub], capture_output=True, text=True).stdout
            ops = collections.Counter(
                re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)", sass, re.M)
            )
            top = ", ".join(f"{k}:{n}" for k, n in ops.most_common(14))
            lines.append(f"{v.name_expression}: {res}\n    {top}")
            if i == 0:  # the hottest one in full
                with open(os.path.join(outdir, "sass_hot.txt"), "w") as f:
                    f.write(sass)
    report = "\n".join(lines)
    with open(os.path.join(outdir, "sass_report.txt"), "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
