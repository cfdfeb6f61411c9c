"""``torch_npu.contrib.module.quant_conv2d`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import QuantConv2d  # noqa: F401

__torchport_emulated__ = True
__all__ = ["QuantConv2d"]
