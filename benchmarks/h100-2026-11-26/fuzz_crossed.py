"""polymm fuzz, counting the calls that ran as one crossed product (polymm.dispatch._crossed)."""

import sys
from polymm import dispatch
from polymm.cli import main

_crossed, hits = dispatch._crossed, []


def counted(*args, **kwargs):
    got = _crossed(*args, **kwargs)
    hits.append(got is not None)
    return got


dispatch._crossed = counted
rc = main(["fuzz", *sys.argv[1:]])
print(f"crossed products: {sum(hits)} of {len(hits)} asked", file=sys.stderr)
sys.exit(rc)
