"""The polymm conformance suite: one set of tests every backend must pass.

Run it against any registered backend, built-in or third-party::

    python -m pytest --pyargs polymm.testing --polymm-backend=cpu
    POLYMM_TEST_BACKEND=opencl python -m pytest --pyargs polymm.testing

``--polymm-backend`` takes a name, a comma-separated list, or ``all`` (every
available backend; the default).  A backend named explicitly that is not
available is an error, never a silent skip.  The helpers here
(:func:`reference_matmul`, :func:`random_array`, :func:`assert_matches`) are
public so a plugin's own tests can use them too.
"""

from .reference import assert_matches, poison, random_array, reference_matmul

__all__ = ["assert_matches", "poison", "random_array", "reference_matmul"]
