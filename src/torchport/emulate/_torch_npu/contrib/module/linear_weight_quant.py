"""``torch_npu.contrib.module.linear_weight_quant`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import LinearWeightQuant  # noqa: F401

__torchport_emulated__ = True
__all__ = ["LinearWeightQuant"]
