"""``torch_npu.contrib.function.fused_attention`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.function import npu_fused_attention, npu_fused_attention_with_layernorm  # noqa: F401

__torchport_emulated__ = True
__all__ = ["npu_fused_attention", "npu_fused_attention_with_layernorm"]
