"""``polymm fuzz`` on the 8-bit types, counting the plans that ``polymm_cuda.wgmma.choose`` gave the
swapped kernel (``polymm_wgmma_<type>_kn``: B read as stored through registers) and the K-major one.

    python fuzz_wgmma8.py --backend cuda --dtypes int8,uint8 --cases 12500 --seed S --json
"""

import collections
import sys

from polymm.cli import main
from polymm_cuda import wgmma

_choose, taken = wgmma.choose, collections.Counter()


def counted(dtype, *args, **kwargs):
    name, why = _choose(dtype, *args, **kwargs)
    if dtype.name in ("int8", "uint8"):
        taken[name.rsplit("_", 1)[1] if name else "none"] += 1
    return name, why


wgmma.choose = counted
rc = main(["fuzz", *sys.argv[1:]])
print(f"wgmma 8-bit plans: {dict(taken)}", file=sys.stderr)
sys.exit(rc)
