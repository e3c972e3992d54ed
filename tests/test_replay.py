"""The short path's replays (``polymm.dispatch._replay_key``), on a device library of this file's
own: a product seen before is launched again as planned, and only when everything that decided
its plan is the same (the adapter's call key, the backend, the algorithm, the precision mode).
The CUDA backend's replays are proven on the GPU (``backends/polymm-cuda/tests``); this is the
core's logic, everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import polymm
from polymm.arrays import PLAIN_TYPES, ArrayKind


class Held:
    """A "device" array: a NumPy array the host may not read directly."""

    def __init__(self, data: np.ndarray):
        self.data = data
        self.shape, self.strides, self.dtype, self.ndim = data.shape, data.strides, data.dtype, data.ndim

    @property
    def T(self):  # noqa: N802 - the array API's name
        return Held(self.data.T)


class HeldKind(ArrayKind):
    """The adapter: keys a product by dtype, shapes and strides; replays hand the arrays over."""

    name = "held"
    modules = ()

    def owns(self, x):
        return isinstance(x, Held)

    def origin(self, x):
        return x, 0

    def empty(self, shape, dtype, like):
        return Held(np.full(shape, np.nan, dtype))  # poisoned: a launch that skips it shows

    def call_key(self, x1, x2):
        return x1.dtype, x1.shape, x1.strides, x2.shape, x2.strides

    def replay(self, x1, x2, shape, launch):
        result = self.empty(shape, x1.dtype, x1)
        launch(x1, x2, result)
        return result


def _view(held: Held, shape, elem_strides):
    data = held.data
    return np.lib.stride_tricks.as_strided(data, shape, tuple(s * data.itemsize for s in elem_strides))


class HeldBackend(polymm.Backend):
    """Computes on ``Held`` arrays with NumPy; counts its plans and its replayed launches."""

    array_library = "held"
    algorithms = ("auto", "other")
    plans: list = []
    replayed: list = []

    def matmul(self, a, b, out, algorithm):
        self.plans.append((a.shape, a.strides, b.shape, b.strides, algorithm, polymm.precision.current()))
        self._compute(a.shape, a.strides, b.shape, b.strides, a.buffer, b.buffer, out.buffer)

    def replayable(self, a, b, out, algorithm):
        if algorithm == "other":
            return None  # as a backend whose plan for these operands copies them first
        planned = (a.shape, a.strides, b.shape, b.strides)

        def launch(x1, x2, result):
            self.replayed.append(planned)
            self._compute(*planned, x1, x2, result)

        return launch

    @staticmethod
    def _compute(a_shape, a_strides, b_shape, b_strides, x1, x2, result):
        count, m, _ = a_shape
        n = b_shape[2]
        out = _view(result, (count, m, n), (m * n, n, 1))
        np.matmul(_view(x1, a_shape, a_strides), _view(x2, b_shape, b_strides), out=out)


@pytest.fixture
def held(monkeypatch):
    """The library and its backend, registered afresh (which forgets earlier replays)."""
    monkeypatch.setitem(PLAIN_TYPES, Held, HeldKind())
    polymm.register_backend("held", HeldBackend, replace=True)
    HeldBackend.plans, HeldBackend.replayed = [], []
    rng = np.random.default_rng(3)

    def product(shape1, shape2, dtype="float64", **kwargs):
        """``x1 @ x2`` of new random values, checked against NumPy; returns the result."""
        x1, x2 = (rng.standard_normal(s).astype(dtype) for s in (shape1, shape2))
        got = polymm.matmul(Held(x1), Held(x2), backend="held", **kwargs)
        assert type(got) is Held and got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got.data, x1 @ x2, rtol=1e-5, atol=1e-5)
        return got

    return product


def test_a_product_seen_before_is_replayed(held):
    for _ in range(3):
        held((5, 7), (7, 3))
    assert len(HeldBackend.plans) == 1 and len(HeldBackend.replayed) == 2
    for _ in range(3):  # a batch and a vector: the short path's other shapes
        held((2, 5, 7), (7,))
    assert len(HeldBackend.plans) == 2 and len(HeldBackend.replayed) == 4


def test_what_decided_the_plan_keys_the_replay(held):
    held((5, 7), (7, 3))
    rng = np.random.default_rng(4)
    x1, x2 = rng.standard_normal((5, 7)), rng.standard_normal((3, 7))
    got = polymm.matmul(Held(x1), Held(x2).T, backend="held")  # other strides: planned again
    np.testing.assert_allclose(got.data, x1 @ x2.T)
    held((5, 7), (7, 3), dtype="float32")  # another dtype
    held((5, 7), (7, 3), precision="tf32")  # another precision mode
    with polymm.use_precision("tf32x3"):
        held((5, 7), (7, 3))
    assert len(HeldBackend.plans) == 5 and not HeldBackend.replayed
    held((5, 7), (7, 3), precision="tf32")
    assert len(HeldBackend.plans) == 5 and len(HeldBackend.replayed) == 1
    assert [p[-1] for p in HeldBackend.plans] == ["default", "default", "default", "tf32", "tf32x3"]


def test_what_a_backend_will_not_replay_is_planned_every_call(held):
    for _ in range(3):
        held((5, 7), (7, 3), algorithm="other")
    assert len(HeldBackend.plans) == 3 and not HeldBackend.replayed


def test_a_backend_registered_again_plans_its_own_products(held):
    held((5, 7), (7, 3))
    held((5, 7), (7, 3))
    assert len(HeldBackend.plans) == 1
    polymm.register_backend("held", HeldBackend, replace=True)
    held((5, 7), (7, 3))
    assert len(HeldBackend.plans) == 2
