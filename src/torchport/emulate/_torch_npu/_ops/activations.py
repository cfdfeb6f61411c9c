"""Activations and normalisations of torch_npu (API reference: ``_op_plugin_docs.py`` of the 2.14.0 wheel)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._registry import op


@op()
def npu_mish(self):
    """``x * tanh(softplus(x))``."""
    return self * torch.tanh(F.softplus(self))


@op()
def npu_silu(self):
    """``x * sigmoid(x)``."""
    return self * torch.sigmoid(self)


@op()
def npu_fast_gelu(self):
    """``x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))`` (the training-series formula)."""
    a = self.abs()
    return self / (1 + torch.exp(-1.702 * a)) * torch.exp(0.851 * (self - a))


op("fast_gelu")(npu_fast_gelu)


@op()
def npu_gelu(self, *, approximate="none"):
    """``torch.nn.functional.gelu``."""
    return F.gelu(self, approximate=approximate)


@op()
def npu_geglu(self, dim=-1, approximate=1, activate_left=False):
    """Split ``self`` in two along ``dim``; ``(a * gelu(b), gelu(b))`` (``approximate`` 1 = tanh;
    ``activate_left`` applies gelu to the first half instead)."""
    a, b = self.chunk(2, dim=dim)
    if activate_left:
        a, b = b, a
    g = F.gelu(b, approximate="tanh" if int(approximate) == 1 else "none")
    return a * g, g


@op()
def npu_swiglu(self, dim=-1):
    """Split in two along ``dim``: ``silu(a) * b``."""
    a, b = self.chunk(2, dim=dim)
    return F.silu(a) * b


@op()
def npu_rms_norm(self, gamma, epsilon=1e-6):
    """``(x * rstd * gamma, rstd)``, ``rstd = 1/sqrt(mean(x^2 over gamma's dims) + eps)`` in float32."""
    dims = tuple(range(self.dim() - gamma.dim(), self.dim()))
    rstd = torch.rsqrt(self.float().pow(2).mean(dim=dims, keepdim=True) + float(epsilon))
    return (self.float() * rstd * gamma.float()).to(self.dtype), rstd


@op()
def npu_layer_norm_eval(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """``torch.nn.functional.layer_norm``."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


@op()
def npu_rotary_mul(self, r1, r2, rotary_mode="half", rotate=None):
    """Rotary embedding ``r1 * x + r2 * rot(x)``; ``rot`` = ``cat(-x2, x1)`` (half), the interleaved pairs
    (interleave), or ``x @ rotate`` when ``rotate`` is given."""
    if rotate is not None:
        x_new = self @ rotate
    elif rotary_mode == "interleave":
        x1, x2 = self[..., ::2], self[..., 1::2]
        x_new = torch.stack((-x2, x1), dim=-1).flatten(-2)
    else:
        x1, x2 = torch.chunk(self, 2, -1)
        x_new = torch.cat((-x2, x1), dim=-1)
    return r1 * self + r2 * x_new
