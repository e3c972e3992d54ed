"""The whole conformance suite in one import, for a plugin's own pytest run::

    # tests/test_polymm_conformance.py
    from polymm.testing.suite import *  # noqa: F401,F403

collects exactly what ``python -m pytest --pyargs polymm.testing`` runs: the semantics and dtype
cases (``test_conformance``), the kernel-path shapes (``test_paths``), the contractions
(``test_contractions``: tensordot, vecdot, einsum) and the array adapter's cases (``test_adapters``). Not named ``test_*``, so ``--pyargs`` does not collect it twice.
"""

from .test_adapters import *  # noqa: F401,F403
from .test_conformance import *  # noqa: F401,F403
from .test_contractions import *  # noqa: F401,F403
from .test_paths import *  # noqa: F401,F403
