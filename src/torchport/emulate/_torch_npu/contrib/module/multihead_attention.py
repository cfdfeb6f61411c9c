"""``torch_npu.contrib.module.multihead_attention`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import Matmul_transpose, MultiheadAttention, _MHAConfig, _NpuLinear  # noqa: F401

__torchport_emulated__ = True
__all__ = ["Matmul_transpose", "MultiheadAttention"]
