"""A third-party polymm backend in a few lines: NumPy's matmul, one batch at a time.

It exists to show plugin authors the whole path (entry point, the
:class:`polymm.Backend` interface, the conformance suite) with nothing else in
the way.  Run the suite against it with::

    python -m pytest --pyargs polymm.testing --polymm-backend=example
"""

import numpy as np

import polymm


class ExampleBackend(polymm.Backend):
    """Computes each batch with :func:`numpy.matmul` on the plain 2-D problems polymm hands over."""

    algorithms = ("auto",)
    array_library = "numpy"

    def devices(self):
        return ["host (NumPy)"]

    @np.errstate(all="ignore")  # NaN and Inf propagate silently, as from the other backends
    def matmul(self, a, b, out, algorithm):
        if out.dtype == np.float16:
            # The contract wants float16 accumulated in float32, not in float16.
            for i in range(out.shape[0]):
                out[i] = np.matmul(a[i].astype(np.float32), b[i].astype(np.float32))
            return
        for i in range(out.shape[0]):
            np.matmul(a[i], b[i], out=out[i])
