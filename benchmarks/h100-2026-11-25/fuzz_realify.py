"""``polymm fuzz`` with complex128 realified from the smallest products on (the planner's
REALIFY_WORK and the FP64 tensor cores' least tile count set to 0 and 1), so that its shapes
(up to 129) reach the path; prints how many plans took it.

    python fuzz_realify.py --backend cuda --dtypes complex128 --cases 12500 --seed S --json
"""

import sys

from polymm.cli import main
from polymm.kernels import planner
from polymm_cuda import tensorcore

planner.REALIFY_WORK = 0
tensorcore.DMMA_MIN_TILES = 1
_realified, taken = planner._realified, []


def counted(*args, **kwargs):
    made = _realified(*args, **kwargs)
    taken.append(made is not None)
    return made


planner._realified = counted
rc = main(sys.argv[1:])
print(f"realified plans: {sum(taken)} of {len(taken)} complex128 plans asked", file=sys.stderr)
sys.exit(rc)
