"""``apex.parallel`` on ``torch.nn.parallel``: ``DistributedDataParallel``, ``convert_syncbn_model``,
``SyncBatchNorm``.

apex's DDP reduces gradients in its own buckets (``message_size``, ``delay_allreduce``, its own
streams); the arithmetic is torch DDP's (gradients averaged over ranks), so this is torch's DDP
with apex's constructor: the device is the module's (apex passes no ``device_ids``) and apex's
tuning options are accepted with no further effect. ``gradient_predivide_factor`` other than 1 is
refused rather than ignored: it changes the result's rounding, not only the speed.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["DistributedDataParallel", "convert_syncbn_model", "SyncBatchNorm"]

SyncBatchNorm = torch.nn.SyncBatchNorm


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    """apex's ``DistributedDataParallel(module, message_size=..., delay_allreduce=...)`` as torch's DDP."""

    def __init__(self, module: torch.nn.Module, message_size: int = 10000000, delay_allreduce: bool = False,
                 shared_param: Any = None, allreduce_trigger_params: Any = None,
                 retain_allreduce_buffers: bool = False, allreduce_always_fp32: bool = False,
                 num_allreduce_streams: int = 1, allreduce_communicators: Any = None,
                 gradient_average: bool = True, gradient_predivide_factor: float = 1.0,
                 gradient_average_split_factor: Any = None, prof: bool = False) -> None:
        if not gradient_average or gradient_predivide_factor != 1.0:
            raise ValueError("apex.parallel.DistributedDataParallel (torchport's apex stand-in): "
                             "gradient_average=False / gradient_predivide_factor are not emulated; "
                             "use torch.nn.parallel.DistributedDataParallel and scale the loss instead")
        super().__init__(module)


def convert_syncbn_model(module: torch.nn.Module, process_group: Any = None,
                         channel_last: bool = False) -> torch.nn.Module:
    """Every ``BatchNorm*d`` of ``module`` becomes a ``SyncBatchNorm`` (torch's conversion)."""
    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(module, process_group)
