"""``torch_npu.testing.common_distributed`` (emulated): multi-card skips and process-group set-up."""

from __future__ import annotations

import functools
import unittest

import torch
import torch.distributed as dist

__torchport_emulated__ = True
__all__ = ["skipIfUnsupportMultiNPU", "with_comms", "init_pg"]


def skipIfUnsupportMultiNPU(npu_number_needed):  # noqa: N802 - torch_npu's name
    """Skip unless at least ``npu_number_needed`` (emulated) cards exist."""
    def deco(func):
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            if not torch.npu.is_available() or torch.npu.device_count() < npu_number_needed:
                raise unittest.SkipTest(f"Multi-NPU {npu_number_needed} condition not satisfied")
            return func(self, *args, **kwargs)

        return wrapper

    return deco


def init_pg(backend: str = "hccl", world_size: int = 1, rank: int = 0, file_name: str = "file://") -> None:
    """``init_process_group`` over a file store (hccl when enough cards exist)."""
    if backend == "hccl" and torch.npu.device_count() < world_size:
        raise unittest.SkipTest(f"Need at least {world_size} ASCEND devices")
    dist.init_process_group(backend=backend, world_size=world_size, rank=rank, init_method=f"file://{file_name}")
    if backend == "hccl":
        torch.npu.set_device(rank)


def with_comms(func):
    """Run a ``MultiProcessTestCase`` method inside a process group (hccl on npu, gloo otherwise)."""
    if func is None:
        raise RuntimeError("Test function is None.")

    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        npu = torch.npu.is_available() and torch.npu.device_count() >= self.world_size
        init_pg(backend="hccl" if npu else "gloo", world_size=self.world_size, rank=self.rank,
                file_name=self.file_name)
        torch.npu.manual_seed(0)
        func(self, *args, **kwargs)
        self.destroy_pg()

    return wrapper
