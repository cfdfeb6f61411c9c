"""Operators that need more than "unwrap, run on CPU, re-wrap".

* device moves (``_to_copy``, ``copy_``): the only ops allowed to cross devices;
* ``native_dropout``: draws its mask from the *device* generator, not the host one;
* ``_amp_foreach_non_finite_check_and_unscale_``: in saturation mode the overflow
  flag (not inf values) tells the GradScaler to skip a step, as on older Ascend chips;
* factory ops reaching the ``PrivateUse1`` key (``torch.empty(..., device="npu")``).
"""

from __future__ import annotations

from typing import Any

import torch

from torchport.emulate import _tensor as T
from torchport.emulate._state import SATURATE, STATE

__all__ = ["factory_fallback", "register_backend_kernels"]

_a = torch.ops.aten
_CPU = torch.device("cpu")


def _target_index(device: Any, source_idx: int) -> int:
    if device is None:
        return source_idx
    return T.logical_index(device)


def _to_copy(func, args, kwargs):
    x = args[0]
    device = kwargs.get("device")
    kw = dict(kwargs)
    kw["device"] = _CPU
    kw.pop("pin_memory", None)
    kw.pop("non_blocking", None)
    src = T.unwrap(x)
    if device is not None and device.type == "cpu":
        if type(x) is T.NpuTensor:
            return func(src, **kw)  # device-to-host: a fresh host tensor
        return func(src, **kw)
    if type(x) is not T.NpuTensor:  # host-to-device through an npu-typed dtype/layout change
        return T.wrap(func(src, **kw), T.logical_index(device))
    idx = _target_index(device, x._idx)
    return T.wrap(func(src, **kw), idx)


def _copy_(func, args, kwargs):
    dst, src = args[0], args[1]
    T.unwrap(dst).copy_(T.unwrap(src))
    return dst


def _native_dropout(func, args, kwargs):
    x, p = args[0], float(args[1])
    train = args[2] if len(args) > 2 else kwargs.get("train")
    idx = x._idx
    e = x._elem
    if train is False or p == 0.0:
        return T.wrap(e.clone(), idx), T.wrap(torch.ones_like(e, dtype=torch.bool), idx)
    if p >= 1.0:
        return T.wrap(torch.zeros_like(e), idx), T.wrap(torch.zeros_like(e, dtype=torch.bool), idx)
    mask = torch.empty_like(e, dtype=torch.bool).bernoulli_(1.0 - p, generator=STATE.generators[idx])
    out = e * mask * (1.0 / (1.0 - p))
    return T.wrap(out, idx), T.wrap(mask, idx)


def _unscale(func, args, kwargs):
    info = T._OPS.get(func) or T._opinfo(func)
    out = T.run(func, info, args, kwargs)
    if STATE.overflow_mode == SATURATE and STATE.overflow_flag:
        found_inf = args[1]
        T.unwrap(found_inf).fill_(1.0)
        STATE.overflow_flag = False
    return out


def _is_pinned(func, args, kwargs):
    return False


def _pin_memory(func, args, kwargs):
    raise RuntimeError(f"cannot pin '{args[0].device}' memory: only dense CPU tensors can be pinned")


# --- fused RNN cells: torch's LSTM/GRU take the fused-cell path on accelerators (CUDA and
# PrivateUse1); the host has no kernels for them, so they are written out here. Gate order and
# workspace layout follow torch's CUDA kernels, so autograd's formulas apply unchanged.
def _lstm_cell(func, args, kwargs):
    input_gates, hidden_gates, cx = args[:3]
    input_bias = args[3] if len(args) > 3 else kwargs.get("input_bias")
    hidden_bias = args[4] if len(args) > 4 else kwargs.get("hidden_bias")
    idx = input_gates._idx
    gates = input_gates._elem + hidden_gates._elem
    if input_bias is not None:
        gates = gates + T.unwrap(input_bias) + T.unwrap(hidden_bias)
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx._elem + i * g
    hy = o * cy.tanh()
    return T.wrap(hy, idx), T.wrap(cy, idx), T.wrap(torch.cat([i, f, g, o], 1), idx)


def _lstm_cell_backward(func, args, kwargs):
    grad_hy, grad_cy, cx, cy, workspace, has_bias = args[:6]
    ref = workspace
    i, f, g, o = workspace._elem.chunk(4, 1)
    cx_, cy_ = cx._elem, cy._elem
    tanh_cy = cy_.tanh()
    ghy = T.unwrap(grad_hy) if grad_hy is not None else torch.zeros_like(cy_)
    gcy = T.unwrap(grad_cy) if grad_cy is not None else torch.zeros_like(cy_)
    gcy_total = ghy * o * (1 - tanh_cy * tanh_cy) + gcy
    grad_gates = torch.cat([
        gcy_total * g * i * (1 - i),
        gcy_total * cx_ * f * (1 - f),
        gcy_total * i * (1 - g * g),
        ghy * tanh_cy * o * (1 - o),
    ], 1)
    grad_bias = T.wrap(grad_gates.sum(0), ref._idx) if has_bias else None
    return T.wrap(grad_gates, ref._idx), T.wrap(gcy_total * f, ref._idx), grad_bias


def _gru_cell(func, args, kwargs):
    input_gates, hidden_gates, hx = args[:3]
    input_bias = args[3] if len(args) > 3 else kwargs.get("input_bias")
    hidden_bias = args[4] if len(args) > 4 else kwargs.get("hidden_bias")
    idx = input_gates._idx
    ig, hg, h = input_gates._elem, hidden_gates._elem, hx._elem
    if input_bias is not None:
        ig = ig + T.unwrap(input_bias)
        hg = hg + T.unwrap(hidden_bias)
    ir, iz, in_ = ig.chunk(3, 1)
    hr, hz, hn = hg.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (h - n)
    return T.wrap(hy, idx), T.wrap(torch.cat([r, z, n, h, hn], 1), idx)


def _gru_cell_backward(func, args, kwargs):
    grad_hy, workspace, has_bias = args[:3]
    idx = workspace._idx
    r, z, n, h, hn = workspace._elem.chunk(5, 1)
    gh = T.unwrap(grad_hy)
    gn_pre = gh * (1 - z) * (1 - n * n)
    gz_pre = gh * (h - n) * z * (1 - z)
    gr_pre = gn_pre * hn * r * (1 - r)
    grad_input = torch.cat([gr_pre, gz_pre, gn_pre], 1)
    grad_hidden = torch.cat([gr_pre, gz_pre, gn_pre * r], 1)
    grads = [T.wrap(grad_input, idx), T.wrap(grad_hidden, idx), T.wrap(gh * z, idx)]
    if has_bias:
        grads += [T.wrap(grad_input.sum(0), idx), T.wrap(grad_hidden.sum(0), idx)]
    else:
        grads += [None, None]
    return tuple(grads)


T._HANDLERS.update({
    _a._thnn_fused_lstm_cell: _lstm_cell,
    _a._thnn_fused_lstm_cell_backward_impl: _lstm_cell_backward,
    _a._thnn_fused_gru_cell: _gru_cell,
    _a._thnn_fused_gru_cell_backward: _gru_cell_backward,
    _a._to_copy: _to_copy,
    _a.copy_: _copy_,
    _a.native_dropout: _native_dropout,
    _a._amp_foreach_non_finite_check_and_unscale_: _unscale,
    _a.is_pinned: _is_pinned,
    _a._pin_memory: _pin_memory,
})


def factory_fallback(op, *args, **kwargs):
    """PrivateUse1 boxed fallback: factory ops with ``device="npu[:k]"`` run on the CPU, then wrap."""
    if not STATE.installed:
        raise T.EmulatorNotInstalled(f"{op}: the emulated NPU is not installed")
    idx = T.logical_index(kwargs.get("device"))
    kwargs["device"] = _CPU
    if kwargs.get("pin_memory"):
        kwargs["pin_memory"] = False
    info = T._OPS.get(op) or T._opinfo(op)
    if info.has_generator:
        kwargs["generator"] = T.host_generator(kwargs.get("generator"), idx)
    if info.falls_back:
        T._warn_fallback(info.name)
    ctx = T._Ctx()
    args = T._unwrap(args, ctx)
    out = op(*args, **kwargs)
    return T._rewrap(out, idx, ctx.seen)


def _copy_from(self, dst, non_blocking=False):
    T.unwrap(dst).copy_(T.unwrap(self))
    return dst


def _copy_from_and_resize(self, dst):
    d = T.unwrap(dst)
    s = T.unwrap(self)
    if d.shape != s.shape:
        d.resize_(s.shape)
        if type(dst) is T.NpuTensor:
            T._sync_metadata(dst, d)
    d.copy_(s)
    return dst


def register_backend_kernels(lib) -> None:
    """Per-op ``PrivateUse1`` kernels for ops that reach the backend key *with tensor arguments*.

    That happens when torch excludes the Python key (``torch.tensor(data, device="npu")``
    copies with it excluded). torch 2.14 cannot route such calls to a Python *fallback*
    (an internal assert in the trampoline), so these get explicit registrations.
    """
    lib.impl("_copy_from", _copy_from, "PrivateUse1")
    lib.impl("_copy_from_and_resize", _copy_from_and_resize, "PrivateUse1")
