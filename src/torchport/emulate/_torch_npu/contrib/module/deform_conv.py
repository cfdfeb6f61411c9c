"""``torch_npu.contrib.module.deform_conv`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import DCNv2, ModulatedDeformConv  # noqa: F401

__torchport_emulated__ = True
__all__ = ["DCNv2", "ModulatedDeformConv"]
