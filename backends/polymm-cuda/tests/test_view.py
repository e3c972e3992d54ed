"""The CuPy adapter's ``view()`` (the conformance suite's transposed, strided, reversed and broadcast
layouts of CuPy arrays): the same elements as NumPy's view of the same memory; none read-only.
Skipped cleanly without CuPy or a CUDA device."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
try:
    _NDEV = cp.cuda.runtime.getDeviceCount()
except Exception:  # no driver
    _NDEV = 0
pytestmark = pytest.mark.skipif(_NDEV < 1, reason="no CUDA device")

from polymm.arrays import kind_named  # noqa: E402

#: (shape, element strides, element offset) over a 48-element buffer
LAYOUTS = {
    "c": ((6, 8), (8, 1), 0),
    "transposed": ((8, 6), (1, 8), 0),
    "step": ((3, 4), (16, 2), 1),
    "reversed": ((6, 8), (-8, -1), 47),
    "broadcast": ((3, 6, 8), (0, 8, 1), 0),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_cupy_views_show_the_elements_numpy_views_show(layout):
    shape, strides, offset = LAYOUTS[layout]
    host = np.arange(48, dtype=np.float32)
    cupy_kind, numpy_kind = kind_named("cupy"), kind_named("numpy")
    view = cupy_kind.view(cp.asarray(host), shape, strides, offset)
    assert cupy_kind.owns(view) and tuple(view.shape) == shape
    assert cupy_kind.elem_strides(view) == strides
    np.testing.assert_array_equal(cp.asnumpy(view), numpy_kind.view(host, shape, strides, offset))


def test_cupy_views_share_memory_and_none_is_read_only():
    kind = kind_named("cupy")
    x = cp.zeros(16, dtype=cp.float32)
    view = kind.view(x, (4, 4), (1, 4))
    assert kind.shares_memory(view, x) and not kind.is_c_contiguous(view)
    view[0, 1] = 7  # writes the memory it views
    assert float(x[4]) == 7
    assert kind.view(x, (4, 4), (4, 1), writeable=False) is None  # CuPy has no read-only arrays
