"""``polymm fuzz`` with complex128 on the FP64 tensor cores from the smallest products on (the
planner's REALIFY_WORK and the FP64 tensor cores' least tile count set to 0 and 1), so that its
shapes reach ``polymm_dmmaz_*`` (B realified as it is read); prints how many plans took it.

    python fuzz_dmmaz.py --backend cuda --dtypes complex128 --cases 12500 --seed S --json
"""

import sys

from polymm.cli import main
from polymm.kernels import planner
from polymm_cuda import tensorcore

planner.REALIFY_WORK = 0
tensorcore.DMMA_MIN_TILES = 1
_choose, taken = tensorcore.choose_dmma, []


def counted(dtype, *args, **kwargs):
    name, why = _choose(dtype, *args, **kwargs)
    if dtype.name == "complex128":
        taken.append(name is not None and tensorcore.is_complex_dmma(name))
    return name, why


tensorcore.choose_dmma = counted
rc = main(["fuzz", *sys.argv[1:]])
print(f"polymm_dmmaz plans: {sum(taken)} of {len(taken)} complex128 plans asked", file=sys.stderr)
sys.exit(rc)
