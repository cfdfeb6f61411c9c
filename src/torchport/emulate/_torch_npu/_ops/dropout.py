"""Dropout ops of torch_npu: masks are bit-packed uint8 (one bit a kept element, length a multiple of 16 bytes),
as the card's ``npu_dropout_gen_mask`` writes them (API reference: ``_op_plugin_docs.py`` of the 2.14.0 wheel).
Random draws use the device generator (``torch.npu.manual_seed`` makes them repeatable)."""

from __future__ import annotations

import math

import torch

from ._registry import op

_BITS = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)


def _mask_bytes(numel: int) -> int:
    return math.ceil(numel / 128) * 16  # the card aligns masks to 128 elements


def pack(keep: torch.Tensor) -> torch.Tensor:
    """Bool keep-mask -> the card's bit-packed uint8 mask (bit ``i % 8`` of byte ``i // 8``)."""
    flat = keep.reshape(-1).to(torch.uint8)
    n = _mask_bytes(flat.numel()) * 8
    flat = torch.cat([flat, flat.new_zeros(n - flat.numel())]).view(-1, 8)
    return (flat * _BITS.to(flat.device)).sum(1, dtype=torch.int32).to(torch.uint8)


def unpack(mask: torch.Tensor, shape) -> torch.Tensor:
    """The bit-packed mask back to a bool tensor of ``shape``."""
    numel = math.prod(shape)
    bits = (mask.reshape(-1, 1) & _BITS.to(mask.device)) != 0
    return bits.reshape(-1)[:numel].reshape(shape)


def _keep(shape, p: float, device) -> torch.Tensor:
    return torch.rand(shape, device=device) >= p


@op(backward=False)
def npu_dropout_gen_mask(size, p, *, dtype=None, layout=None, device=None, pin_memory=None):
    """A random bit-packed keep-mask for ``size`` elements, each kept with probability ``1 - p``."""
    return pack(_keep(tuple(size), float(p), device if device is not None else "npu"))


@op()
def npu_dropout_do_mask(self, mask, p):
    """``(self * keep / (1 - p), mask)`` with ``keep`` unpacked from ``mask``."""
    p = float(p)
    keep = unpack(mask, self.shape)
    scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
    return self * keep.to(self.dtype) * scale, mask


@op("_npu_dropout")
def _npu_dropout(self, p):
    """Dropout drawing its own mask: ``(output, bit-packed mask)``."""
    mask = pack(_keep(self.shape, float(p), self.device))
    return npu_dropout_do_mask(self, mask, p)


@op()
def npu_dropout_with_add_softmax(self, x1, alpha, prob, dim):
    """``y = x1 + self * alpha``; ``s = softmax(y, dim)``; ``out = dropout(s, prob)``: returns ``(mask, s, out)``."""
    y = x1 + self * alpha
    s = torch.softmax(y.float(), dim=dim).to(y.dtype)
    mask = pack(_keep(s.shape, float(prob), s.device))
    out, _ = npu_dropout_do_mask(s, mask, prob)
    return mask, s, out


@op(backward=True, note="the card's byte mask is internal here: a plain inverted dropout")
def dropout_with_byte_mask(self, p=0.5, train=True):
    """Inverted dropout (kept elements scaled by ``1 / (1 - p)``); identity when not training or ``p == 0``."""
    if not train or p == 0:
        return self.clone()
    if p == 1:
        return self * 0
    return self * _keep(self.shape, p, self.device).to(self.dtype) / (1 - p)
