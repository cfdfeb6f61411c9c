"""Autocast for the emulated NPU: kernels at the ``AutocastPrivateUse1`` dispatch key.

The op policy follows torch's CUDA/torch_npu lists: matmuls and convolutions run in
the low precision (float16 by default, bfloat16 on request); softmax, log_softmax,
losses, norms and reductions run in float32; multi-input ops (cat, stack,
addcmul ...) promote to the widest input type; everything else falls through and
runs in whatever type its inputs have (so BatchNorm keeps float16 activations with
float32 statistics, as on the device).

``torch.autocast("npu")``, ``torch.npu.amp.autocast()`` and ``torch.amp.autocast("npu")``
all turn the same key on; these kernels do the casting.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.library import Library

from torchport.emulate._state import STATE

__all__ = ["register", "LOWER_PRECISION_OPS", "FP32_OPS", "PROMOTE_OPS"]

LOWER_PRECISION_OPS = (
    "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "_convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv",
    "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "scaled_dot_product_attention",
)
FP32_OPS = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm", "frobenius_norm", "nuclear_norm",
    "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "softmax", "log_softmax", "cumprod", "cumsum", "sum", "prod", "mean", "norm", "linalg_vector_norm",
    "linalg_matrix_norm",
)
PROMOTE_OPS = (
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler", "index_put",
    "scatter_add", "tensordot", "stack", "cat", "index_copy",
)

_KEY = "AutocastPrivateUse1"
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)
_LOW = (torch.float16, torch.bfloat16)


def _eligible(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float64 and x.device.type == "npu"


def _cast(x: Any, dtype: torch.dtype, only_low: bool = False) -> Any:
    if _eligible(x):
        if x.dtype == dtype or (only_low and x.dtype not in _LOW):
            return x
        # torch's at::autocast::cached_cast, as torch_npu's kernels use it: a float32 leaf that requires grad
        # (a weight) is cast once per autocast region, forward and backward share it (the cache is global,
        # torch.clear_autocast_cache() empties it when the outermost region exits)
        return STATE.native.autocast_cached_cast(x, dtype)
    if type(x) in (list, tuple):
        return type(x)(_cast(v, dtype, only_low) for v in x)
    return x


def _widest(args: Any, kwargs: dict) -> torch.dtype | None:
    found = None
    for x in list(args) + list(kwargs.values()):
        for t in (x if type(x) in (list, tuple) else (x,)):
            if _eligible(t):
                if t.dtype == torch.float32:
                    return torch.float32
                found = found or t.dtype
    return found


def _lower(op: Callable) -> Callable:
    def kernel(*args, **kwargs):
        dtype = torch.get_autocast_dtype("npu")
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*_cast(args, dtype), **{k: _cast(v, dtype) for k, v in kwargs.items()})

    return kernel


def _fp32(op: Callable) -> Callable:
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*_cast(args, torch.float32, True), **{k: _cast(v, torch.float32, True) for k, v in kwargs.items()})

    return kernel


def _promote(op: Callable) -> Callable:
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            dtype = _widest(args, kwargs)
            if dtype is not None:
                args = _cast(args, dtype)
                kwargs = {k: _cast(v, dtype) for k, v in kwargs.items()}
            return op(*args, **kwargs)

    return kernel


def register() -> list[Library]:
    """Register the fallthrough and the per-op kernels; returns the libraries (destroy to undo)."""
    fallthrough = Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, _KEY)
    kernels = Library("aten", "IMPL")
    for names, make in ((LOWER_PRECISION_OPS, _lower), (FP32_OPS, _fp32), (PROMOTE_OPS, _promote)):
        for name in names:
            packet = getattr(torch.ops.aten, name, None)
            if packet is None:
                continue
            for overload in packet.overloads():
                op = getattr(packet, overload)
                tags = getattr(op, "tags", ())
                if torch.Tag.inplace_view in tags or "out" in overload:
                    continue
                qual = name if overload == "default" else f"{name}.{overload}"
                try:
                    kernels.impl(qual, make(op), _KEY)
                except RuntimeError:
                    continue
    return [kernels, fallthrough]
