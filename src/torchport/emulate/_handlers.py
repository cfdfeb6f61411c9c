"""PrivateUse1 kernels written in Python: operators with device kernels on CUDA/torch_npu but none on the host.

torch's LSTM/GRU take the fused-cell path on accelerators (CUDA and PrivateUse1); the host has
no kernels for ``_thnn_fused_*_cell``, so they are written out here (SyncBatchNorm's five
kernels are in ``_syncbn.py``). The kernels run below autograd on npu tensors; the ops they call
reach the C++ CPU fallback.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.library import Library

__all__ = ["register", "HANDLERS"]

_a = torch.ops.aten


# --- fused RNN cells: torch's LSTM/GRU take the fused-cell path on accelerators (CUDA and
# PrivateUse1); the host has no kernels for them, so they are written out here. Gate order and
# workspace layout follow torch's CUDA kernels, so autograd's formulas apply unchanged.
def _lstm_cell(func, args, kwargs):
    input_gates, hidden_gates, cx = args[:3]
    input_bias = args[3] if len(args) > 3 else kwargs.get("input_bias")
    hidden_bias = args[4] if len(args) > 4 else kwargs.get("hidden_bias")
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], 1)


def _lstm_cell_backward(func, args, kwargs):
    grad_hy, grad_cy, cx, cy, workspace, has_bias = args[:6]
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    ghy = grad_hy if grad_hy is not None else torch.zeros_like(cy)
    gcy = grad_cy if grad_cy is not None else torch.zeros_like(cy)
    gcy_total = ghy * o * (1 - tanh_cy * tanh_cy) + gcy
    grad_gates = torch.cat([
        gcy_total * g * i * (1 - i),
        gcy_total * cx * f * (1 - f),
        gcy_total * i * (1 - g * g),
        ghy * tanh_cy * o * (1 - o),
    ], 1)
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, gcy_total * f, grad_bias


def _gru_cell(func, args, kwargs):
    input_gates, hidden_gates, hx = args[:3]
    input_bias = args[3] if len(args) > 3 else kwargs.get("input_bias")
    hidden_bias = args[4] if len(args) > 4 else kwargs.get("hidden_bias")
    ig, hg, h = input_gates, hidden_gates, hx
    if input_bias is not None:
        ig = ig + input_bias
        hg = hg + hidden_bias
    ir, iz, in_ = ig.chunk(3, 1)
    hr, hz, hn = hg.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (h - n)
    return hy, torch.cat([r, z, n, h, hn], 1)


def _gru_cell_backward(func, args, kwargs):
    grad_hy, workspace, has_bias = args[:3]
    r, z, n, h, hn = workspace.chunk(5, 1)
    gh = grad_hy
    gn_pre = gh * (1 - z) * (1 - n * n)
    gz_pre = gh * (h - n) * z * (1 - z)
    gr_pre = gn_pre * hn * r * (1 - r)
    grad_input = torch.cat([gr_pre, gz_pre, gn_pre], 1)
    grad_hidden = torch.cat([gr_pre, gz_pre, gn_pre * r], 1)
    grads = [grad_input, grad_hidden, gh * z]
    if has_bias:
        grads += [grad_input.sum(0), grad_hidden.sum(0)]
    else:
        grads += [None, None]
    return tuple(grads)


HANDLERS: dict = {
    _a._thnn_fused_lstm_cell.default: _lstm_cell,
    _a._thnn_fused_lstm_cell_backward_impl.default: _lstm_cell_backward,
    _a._thnn_fused_gru_cell.default: _gru_cell,
    _a._thnn_fused_gru_cell_backward.default: _gru_cell_backward,
}


def _kernel(op: Any, handler: Any) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        return handler(op, args, kwargs)

    return kernel


def register(handlers: dict) -> Library:
    """Register ``{OpOverload: handler(func, args, kwargs)}`` at PrivateUse1; destroy the library to undo."""
    lib = Library("aten", "IMPL")
    for op, handler in handlers.items():
        lib.impl(op, _kernel(op, handler), "PrivateUse1")
    return lib
