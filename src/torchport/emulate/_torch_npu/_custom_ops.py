"""torch_npu's custom tensor functions on the emulated NPU (``torch_npu.<name>``), over torch ops."""

from __future__ import annotations

import torch

from torchport.emulate import _formats

from ._fusion_attention import npu_fusion_attention

__torchport_emulated__ = True
__all__ = ["empty_with_format", "get_storage_size", "npu_prompt_flash_attention"]


def empty_with_format(size, dtype=None, layout=None, device=None, pin_memory=False, acl_format=2):
    """``torch.empty`` on the npu, tagged with ``acl_format`` (default ND)."""
    out = torch.empty(size, dtype=dtype, layout=layout, device=device if device is not None else "npu",
                      pin_memory=pin_memory)
    return _formats.npu_format_cast(out, acl_format) if acl_format not in (-1, 2) else out


def get_storage_size(tensor: torch.Tensor) -> int:
    """Elements of the tensor's storage (torch_npu counts storage elements, not bytes)."""
    return tensor.untyped_storage().nbytes() // tensor.element_size()


def npu_prompt_flash_attention(query, key, value, *, pse_shift=None, padding_mask=None, atten_mask=None,
                               actual_seq_lengths=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
                               quant_scale2=None, quant_offset2=None, num_heads=1, scale_value=1.0,
                               pre_tokens=2147473647, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
                               actual_seq_lengths_kv=None, sparse_mode=0):
    """Prompt-phase (prefill) attention: :func:`npu_fusion_attention`'s output, without dropout.
    Quantisation scales and per-batch sequence lengths are CANN-kernel features: passing them raises."""
    if any(x is not None for x in (deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2,
                                   actual_seq_lengths, actual_seq_lengths_kv)):
        raise RuntimeError("npu_prompt_flash_attention: quantisation scales and actual_seq_lengths are not "
                           "supported on the emulated NPU")
    return npu_fusion_attention(query, key, value, num_heads, input_layout, pse=pse_shift, atten_mask=atten_mask,
                                scale=scale_value, sparse_mode=sparse_mode)[0]
