"""``torch_npu.contrib.function.npu_functional`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.function import dropout_with_byte_mask  # noqa: F401

__torchport_emulated__ = True
__all__ = ["dropout_with_byte_mask"]
