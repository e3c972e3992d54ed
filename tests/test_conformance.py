"""The shipped conformance suite, run here against every available backend.

``--polymm-backend=NAME`` (or ``POLYMM_TEST_BACKEND``) narrows it to one.
"""

from polymm.testing.test_conformance import *  # noqa: F401,F403
from polymm.testing.test_paths import *  # noqa: F401,F403,E402
from polymm.testing.test_contractions import *  # noqa: F401,F403,E402
