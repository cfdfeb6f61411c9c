"""The five SyncBatchNorm kernels (CUDA and torch_npu implement them; the host has none).

Written from the reference formulas of torch's CUDA kernels (aten/src/ATen/native/cuda/
Normalization.cu): statistics in float32, per channel (dim 1), reduced over every other dim.
"""

from __future__ import annotations

from typing import Any

import torch


__all__ = ["HANDLERS"]

_a = torch.ops.aten


def _bind(func: Any, args: tuple, kwargs: dict) -> dict:
    names = [a.name for a in func._schema.arguments]
    out = dict(zip(names, args))
    out.update(kwargs)
    for a in func._schema.arguments:
        out.setdefault(a.name, None)
    return out


def _dims(x: torch.Tensor) -> list[int]:
    return [d for d in range(x.dim()) if d != 1]


def _shape(x: torch.Tensor) -> list[int]:
    return [1, -1] + [1] * (x.dim() - 2)


def _u(t: Any) -> Any:
    return t


def _index(*ts: Any) -> torch.device:
    for t in ts:
        if isinstance(t, torch.Tensor):
            return t.device
    raise RuntimeError("SyncBatchNorm kernel called without a tensor")


def _w(t: Any, device: torch.device) -> Any:
    """An output the caller did not ask for is an empty tensor (CUDA: undefined)."""
    return t if t is not None else torch.empty(0, device=device)


def _stats(func, args, kwargs):
    b = _bind(func, args, kwargs)
    x = _u(b["input"]).float()
    dims = _dims(x)
    mean = x.mean(dims)
    var = x.var(dims, unbiased=False)
    invstd = (var + float(b["eps"])).rsqrt()
    idx = _index(b["input"])
    return _w(mean, idx), _w(invstd, idx)


def _gather_stats_with_counts(func, args, kwargs):
    b = _bind(func, args, kwargs)
    idx = _index(b["input"])
    mean_all, invstd_all = _u(b["mean"]).float(), _u(b["invstd"]).float()
    counts = _u(b["counts"]).float().reshape(-1, 1)
    eps, momentum = float(b["eps"]), float(b["momentum"])
    n = counts.sum()
    mean = (counts * mean_all).sum(0) / n
    var_i = invstd_all.pow(-2) - eps
    var = (counts * (var_i + (mean_all - mean).pow(2))).sum(0) / n
    invstd = (var + eps).rsqrt()
    rm, rv = _u(b["running_mean"]), _u(b["running_var"])
    with torch.no_grad():
        if rm is not None:
            rm.mul_(1 - momentum).add_(mean.to(rm.dtype), alpha=momentum)
        if rv is not None:
            unbiased = var * n / (n - 1) if float(n) > 1 else var
            rv.mul_(1 - momentum).add_(unbiased.to(rv.dtype), alpha=momentum)
    return _w(mean, idx), _w(invstd, idx)


def _elemt(func, args, kwargs):
    b = _bind(func, args, kwargs)
    x = _u(b["input"])
    shape = _shape(x)
    y = (x.float() - _u(b["mean"]).float().reshape(shape)) * _u(b["invstd"]).float().reshape(shape)
    if b["weight"] is not None:
        y = y * _u(b["weight"]).float().reshape(shape)
    if b["bias"] is not None:
        y = y + _u(b["bias"]).float().reshape(shape)
    out = y.to(x.dtype)
    if b.get("out") is not None:
        b["out"].copy_(out)
        return b["out"]
    return _w(out, _index(b["input"]))


def _backward_reduce(func, args, kwargs):
    b = _bind(func, args, kwargs)
    idx = _index(b["input"], b["grad_out"])
    g, x = _u(b["grad_out"]).float(), _u(b["input"]).float()
    shape, dims = _shape(x), _dims(x)
    xmu = x - _u(b["mean"]).float().reshape(shape)
    sum_dy = g.sum(dims)
    sum_dy_xmu = (g * xmu).sum(dims)
    weight = b["weight"]
    wdtype = _u(weight).dtype if weight is not None else x.dtype
    grad_weight = (sum_dy_xmu * _u(b["invstd"]).float()).to(wdtype) if b["weight_g"] else None
    grad_bias = sum_dy.to(wdtype) if b["bias_g"] else None
    if not b["input_g"]:
        sum_dy_xmu_out, sum_dy_out = None, None
    else:
        sum_dy_out, sum_dy_xmu_out = sum_dy, sum_dy_xmu
    return _w(sum_dy_out, idx), _w(sum_dy_xmu_out, idx), _w(grad_weight, idx), _w(grad_bias, idx)


def _backward_elemt(func, args, kwargs):
    b = _bind(func, args, kwargs)
    idx = _index(b["input"], b["grad_out"])
    g, x = _u(b["grad_out"]), _u(b["input"])
    shape = _shape(x)
    norm = 1.0 / _u(b["count"]).float().sum()
    invstd = _u(b["invstd"]).float().reshape(shape)
    mean_dy = (_u(b["sum_dy"]).float() * norm).reshape(shape)
    mean_dy_xmu = (_u(b["sum_dy_xmu"]).float() * norm).reshape(shape)
    xmu = x.float() - _u(b["mean"]).float().reshape(shape)
    gi = (g.float() - mean_dy - xmu * invstd * invstd * mean_dy_xmu) * invstd
    if b["weight"] is not None:
        gi = gi * _u(b["weight"]).float().reshape(shape)
    return _w(gi.to(x.dtype), idx)


HANDLERS = {
    _a.batch_norm_stats.default: _stats,
    _a.batch_norm_gather_stats_with_counts.default: _gather_stats_with_counts,
    _a.batch_norm_elemt.default: _elemt,
    _a.batch_norm_elemt.out: _elemt,
    _a.batch_norm_backward_reduce.default: _backward_reduce,
    _a.batch_norm_backward_elemt.default: _backward_elemt,
}
