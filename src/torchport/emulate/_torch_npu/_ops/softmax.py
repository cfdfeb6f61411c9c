"""Softmax and attention ops of torch_npu (API reference: ``_op_plugin_docs.py`` of the 2.14.0 wheel)."""

from __future__ import annotations

import torch

from .._fusion_attention import npu_fusion_attention as _fusion_attention
from .._custom_ops import npu_prompt_flash_attention as _prompt_flash_attention
from ._registry import op

#: the value masked positions get before the softmax (torch_npu's own tests use -1e4 as the reference)
MASKED = -1e4


@op()
def npu_scaled_masked_softmax(x, mask, scale=1.0, fixed_triu_mask=False):
    """``softmax(masked_fill(x * scale, mask, -1e4), -1)``; ``mask`` True = masked out (broadcast to ``x``);
    ``fixed_triu_mask`` masks the strict upper triangle of the last two dimensions instead."""
    if fixed_triu_mask:
        s_q, s_k = x.shape[-2], x.shape[-1]
        mask = torch.ones(s_q, s_k, dtype=torch.bool, device=x.device).triu(1)
    y = (x.float() * float(scale)).masked_fill(mask.bool(), MASKED)
    return torch.softmax(y, dim=-1).to(x.dtype)


op("npu_fusion_attention")(_fusion_attention)
op("npu_prompt_flash_attention", backward=False)(_prompt_flash_attention)
