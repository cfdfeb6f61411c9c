"""``torch_npu.contrib.module._batchnorm_with_int32_count`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import FastBatchNorm1d, FastBatchNorm2d, FastBatchNorm3d, FastSyncBatchNorm  # noqa: F401

__torchport_emulated__ = True
__all__ = ["FastBatchNorm1d", "FastBatchNorm2d", "FastBatchNorm3d", "FastSyncBatchNorm"]
