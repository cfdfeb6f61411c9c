"""``torch_npu.contrib.module.linear_a8w8_quant`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import LinearA8W8Quant  # noqa: F401

__torchport_emulated__ = True
__all__ = ["LinearA8W8Quant"]
