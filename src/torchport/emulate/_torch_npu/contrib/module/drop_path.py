"""``torch_npu.contrib.module.drop_path`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import NpuDropPath  # noqa: F401

__torchport_emulated__ = True
__all__ = ["NpuDropPath"]
