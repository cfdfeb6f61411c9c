"""``apex.fp16_utils``: the helpers training scripts call (``from apex.fp16_utils import *``).

Provided: ``to_python_float``, ``network_to_half``, ``BN_convert_float``. apex's ``FP16_Optimizer``
(deprecated in apex itself in favour of ``apex.amp``) is not; ``apex.amp`` here is the stand-in.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["to_python_float", "network_to_half", "BN_convert_float"]


def to_python_float(t: Any) -> float:
    """A one-element tensor (or a number) as a Python float, like ``t.item()``."""
    return t.item() if hasattr(t, "item") else t[0]


def BN_convert_float(module: torch.nn.Module) -> torch.nn.Module:  # noqa: N802 (apex's name)
    """Batch-norm layers back to float32 (after ``module.half()``), recursively."""
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.affine:
        module.float()
    for child in module.children():
        BN_convert_float(child)
    return module


class _ToHalf(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.half()


def network_to_half(network: torch.nn.Module) -> torch.nn.Module:
    """``network`` in float16 (batch norm kept in float32), its input cast to float16 first."""
    return torch.nn.Sequential(_ToHalf(), BN_convert_float(network.half()))
