"""``apex.optimizers``: NVIDIA's fused optimizers and Ascend's ``NpuFused*`` with torch's update rules.

A fused optimizer computes the update of the torch optimizer of the same rule in fewer kernels, so
the stand-in runs that optimizer: ``FusedSGD`` is ``torch.optim.SGD``, ``FusedAdam`` is
``torch.optim.AdamW`` (``adam_w_mode=True``, apex's default) or ``torch.optim.Adam``. Ascend's apex
(``apex.optimizers.NpuFusedSGD`` ...) re-exports torch_npu's, served by the emulator's ``torch_npu``.
``FusedLAMB`` and ``FusedNovoGrad`` have no torch counterpart and are not provided.
"""

from __future__ import annotations

from typing import Any

import torch
from torch_npu.optim import (NpuFusedAdadelta, NpuFusedAdam, NpuFusedAdamP, NpuFusedAdamW,  # noqa: F401
                             NpuFusedBertAdam, NpuFusedLamb, NpuFusedRMSprop, NpuFusedRMSpropTF, NpuFusedSGD)

__all__ = ["FusedSGD", "FusedAdam", "NpuFusedSGD", "NpuFusedAdam", "NpuFusedAdamW", "NpuFusedRMSprop",
           "NpuFusedAdadelta", "NpuFusedAdamP", "NpuFusedLamb", "NpuFusedBertAdam", "NpuFusedRMSpropTF"]


class FusedSGD(torch.optim.SGD):
    """apex's ``FusedSGD(params, lr, momentum, dampening, weight_decay, nesterov, ...)``: torch's SGD."""

    def __init__(self, params: Any, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, wd_after_momentum: bool = False,
                 materialize_master_grads: bool = True, set_grad_none: bool = False) -> None:
        if wd_after_momentum:
            raise ValueError("apex.optimizers.FusedSGD (torchport's apex stand-in): wd_after_momentum=True is "
                             "not torch's SGD rule; use torch.optim.SGD")
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov)


class FusedAdam(torch.optim.Optimizer):
    """apex's ``FusedAdam``: ``torch.optim.AdamW`` when ``adam_w_mode`` (the default), else ``torch.optim.Adam``."""

    def __new__(cls, params: Any, lr: float = 1e-3, bias_correction: bool = True, betas: Any = (0.9, 0.999),
                eps: float = 1e-8, adam_w_mode: bool = True, weight_decay: float = 0.0, amsgrad: bool = False,
                set_grad_none: bool = True, capturable: bool = False, master_weights: bool = False) -> Any:
        if not bias_correction:
            raise ValueError("apex.optimizers.FusedAdam (torchport's apex stand-in): bias_correction=False has no "
                             "torch counterpart")
        kind = torch.optim.AdamW if adam_w_mode else torch.optim.Adam
        return kind(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
