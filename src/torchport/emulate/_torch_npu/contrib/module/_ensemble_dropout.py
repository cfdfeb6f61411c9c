"""``torch_npu.contrib.module._ensemble_dropout`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import NpuPreGenDropout  # noqa: F401

__torchport_emulated__ = True
__all__ = ["NpuPreGenDropout"]
