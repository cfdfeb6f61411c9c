"""``torch_npu.contrib.module.linear_quant`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import LinearQuant  # noqa: F401

__torchport_emulated__ = True
__all__ = ["LinearQuant"]
