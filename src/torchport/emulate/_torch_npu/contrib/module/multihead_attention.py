"""``torch_npu.contrib.module.multihead_attention`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import MultiheadAttention  # noqa: F401

__torchport_emulated__ = True
__all__ = ["MultiheadAttention"]
