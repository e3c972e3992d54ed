"""``polymm.matmul`` on PyTorch tensors that require grad is differentiable: its backward is two
polymm products, checked against finite differences by ``torch.autograd.gradcheck`` (float64) on
the CPU, and on CUDA tensors where CuPy and a GPU are there."""

import subprocess
import sys

import pytest

import polymm

torch = pytest.importorskip("torch")


def _devices():
    available = {b.name for b in polymm.backends() if b.available}
    found = ["cpu"]
    if torch.cuda.is_available() and "cuda" in available:
        found.append("cuda")
    return found


#: (x1 shape, x2 shape): plain, 1-D on either side or both, batched, broadcast both ways.
SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4, 5)),
    ((4,), (2, 4, 3)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((1, 3, 4), (2, 4, 2)),
]


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: "@".join("x".join(map(str, p)) for p in s))
def test_gradcheck(device, shapes):
    gen = torch.Generator().manual_seed(0)
    x1, x2 = (torch.randn(s, dtype=torch.float64, generator=gen).to(device).requires_grad_() for s in shapes)
    assert torch.autograd.gradcheck(polymm.matmul, (x1, x2))
    assert torch.autograd.gradgradcheck(polymm.matmul, (x1, x2))  # the backward's products are polymm's too


@pytest.mark.parametrize("device", _devices())
def test_gradients_match_torch_and_only_asked_ones_are_computed(device):
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(2, 1, 3, 4, dtype=torch.complex128, generator=gen).to(device).requires_grad_()
    b = torch.randn(5, 4, 2, dtype=torch.complex128, generator=gen).to(device)  # no grad wanted
    c = polymm.matmul(a, b)
    assert c.requires_grad and c.grad_fn is not None and type(c) is torch.Tensor
    c.abs().sum().backward()
    (expected,) = torch.autograd.grad(torch.matmul(a, b).abs().sum(), a)
    torch.testing.assert_close(a.grad, expected)
    assert b.grad is None


def test_mixed_dtypes_give_each_operand_its_own_gradient_dtype(monkeypatch):
    import polymm.autograd

    products = []
    product = polymm.autograd._matmul
    monkeypatch.setattr(polymm.autograd, "_matmul", lambda *args, **kw: products.append(args) or product(*args, **kw))
    a = torch.randn(3, 4, dtype=torch.float32, requires_grad=True)
    b = torch.randn(4, 2, dtype=torch.complex128, requires_grad=True)
    polymm.matmul(a, b).abs().sum().backward()
    assert len(products) == 3  # the forward product and the backward's two, all polymm's
    ref_a, ref_b = a.detach().clone().double().requires_grad_(), b.detach().clone().requires_grad_()
    torch.matmul(ref_a.to(torch.complex128), ref_b).abs().sum().backward()
    assert a.grad.dtype == torch.float32 and b.grad.dtype == torch.complex128
    torch.testing.assert_close(a.grad, ref_a.grad.float())
    torch.testing.assert_close(b.grad, ref_b.grad)


def test_out_and_no_grad():
    a = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    b = torch.ones(3, 2, dtype=torch.float64)
    with pytest.raises(TypeError, match="out= cannot receive a product of tensors that require grad"):
        polymm.matmul(a, b, out=torch.empty(2, 2, dtype=torch.float64))
    with torch.no_grad():
        c = polymm.matmul(a, b)
    assert not c.requires_grad and c.tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_the_runtime_imports_no_torch_for_other_arrays():
    code = (
        "import sys, numpy as np, polymm\n"
        "polymm.matmul(np.ones((2, 3)), np.ones(3))\n"
        "assert 'torch' not in sys.modules and 'polymm.autograd' not in sys.modules, 'torch imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
