"""Float-status ops of torch_npu: the card's overflow flag as an 8-float tensor (element 0 non-zero after an
overflow). The emulator's flag is ``torch.npu.get_npu_overflow_flag()`` (set by fp16 saturation, see
``torchport.emulate``'s overflow mode); the values are computed on the host."""

from __future__ import annotations

import torch

from ._registry import op


@op(backward=False)
def npu_alloc_float_status(self):
    """Eight zeros (float32), on the device of ``self``."""
    return torch.zeros(8, dtype=torch.float32, device=self.device)


@op(backward=False)
def npu_get_float_status(self, mode=0):
    """The status tensor: ``[1, 0, ...]`` when the overflow flag is set, else zeros."""
    out = torch.zeros(8, dtype=torch.float32, device=self.device)
    if torch.npu.get_npu_overflow_flag():
        out[0] = 1.0
    return out


@op(backward=False)
def npu_clear_float_status(self, mode=0):
    """Clear the overflow flag; returns eight zeros."""
    torch.npu.clear_npu_overflow_flag()
    return torch.zeros(8, dtype=torch.float32, device=self.device)
