"""The shipped conformance suite, run here against every available backend.

``--polymm-backend=NAME`` (or ``POLYMM_TEST_BACKEND``) narrows it to one.
"""

from polymm.testing.suite import *  # noqa: F401,F403
