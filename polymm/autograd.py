"""``polymm.matmul`` on PyTorch tensors that require grad: differentiable.

:class:`MatMul` is a :class:`torch.autograd.Function` whose backward is two polymm products (on
the backend, algorithm and precision of the forward call), so a model trained through
``polymm.matmul`` gets its gradients from the same kernels.  PyTorch is optional: this module is
imported only when a tensor that requires grad reaches :func:`polymm.matmul`.  The backward's
products go through :func:`polymm.matmul` again, so with ``create_graph=True`` they are
differentiable in turn.
"""

from __future__ import annotations

import torch

from .dispatch import matmul as _matmul
from .precision import current

__all__ = ["MatMul", "matmul"]


def matmul(x1, x2, /, *, backend=None, algorithm="auto", out=None):
    """``x1 @ x2`` of PyTorch tensors, differentiable (:class:`MatMul`); refuses ``out=`` as ``torch.matmul`` does."""
    if out is not None:
        raise TypeError(
            "polymm.matmul: out= cannot receive a product of tensors that require grad "
            "(torch.matmul refuses it too); call it without out="
        )
    return MatMul.apply(x1, x2, {"backend": backend, "algorithm": algorithm, "precision": current()})


class MatMul(torch.autograd.Function):
    """``x1 @ x2`` with the array API's rules; its gradients are ``g @ x2^H`` and ``x1^H @ g``,
    with the 1-D operands' dimensions removed again and broadcast dimensions summed."""

    @staticmethod
    def forward(ctx, x1, x2, options):
        ctx.save_for_backward(x1, x2)
        ctx.options = options
        return _matmul(x1.detach(), x2.detach(), **options)  # DLPack exports no tensor that requires grad

    @staticmethod
    def backward(ctx, grad):
        x1, x2 = ctx.saved_tensors
        if not torch.is_grad_enabled():  # no create_graph: plain products, not differentiable ones
            x1, x2 = x1.detach(), x2.detach()
        a = x1 if x1.ndim > 1 else x1.unsqueeze(0)  # the 1-D rules: a row ...
        b = x2 if x2.ndim > 1 else x2.unsqueeze(-1)  # ... and a column
        if x2.ndim == 1:
            grad = grad.unsqueeze(-1)
        if x1.ndim == 1:
            grad = grad.unsqueeze(-2)
        g1 = g2 = None
        if ctx.needs_input_grad[0]:
            g1 = _reduced(_matmul(grad, b.mT.conj(), **ctx.options), a.shape, x1)
        if ctx.needs_input_grad[1]:
            g2 = _reduced(_matmul(a.mT.conj(), grad, **ctx.options), b.shape, x2)
        return g1, g2, None


def _reduced(grad, promoted: tuple, x):
    """``grad`` (broadcast to the product's batch) summed back to ``promoted`` (``x``'s shape under
    the 1-D rules), then shaped and typed as ``x`` (the real part for a real ``x``)."""
    lead = grad.ndim - len(promoted)
    if lead:
        grad = grad.sum(dim=tuple(range(lead)))
    stretched = tuple(i for i, n in enumerate(promoted) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(dim=stretched, keepdim=True)
    if grad.is_complex() and not x.is_complex():
        grad = grad.real
    return grad.reshape(x.shape).to(x.dtype)
