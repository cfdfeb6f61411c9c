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


@op(note="rows batch-major ([bsz * len, embed]); weights as nn.Linear's; attn_mask additive, broadcast to "
         "[bsz, heads, tgt, src]; dropout only through a given dropout_mask (npu_dropout_gen_mask's), dropout_prob "
         "taken as the drop probability, as contrib's MultiheadAttention passes it")
def npu_multi_head_attention(query, key, value, query_weight, key_weight, value_weight, attn_mask, out_proj_weight,
                             query_bias, key_bias, value_bias, out_proj_bias, dropout_mask, attn_head_num,
                             attn_dim_per_head, src_len, tgt_len, dropout_prob, softmax_use_float):
    """Fairseq-style multi-head attention: ``(y, dropout_mask, query_res, key_res, value_res, attn_scores,
    attn_res, context)`` (y ``[bsz * tgt_len, embed]``; the rest the intermediate results, heads split)."""
    import torch.nn.functional as F

    h, d, s, t = int(attn_head_num), int(attn_dim_per_head), int(src_len), int(tgt_len)
    bsz = query.shape[0] // t

    def heads(x, n):
        return x.view(bsz, n, h, d).transpose(1, 2)                 # [bsz, heads, len, dim]

    q = heads(F.linear(query, query_weight, query_bias), t)
    k = heads(F.linear(key, key_weight, key_bias), s)
    v = heads(F.linear(value, value_weight, value_bias), s)
    scores = torch.matmul(q * d ** -0.5, k.transpose(-1, -2))
    if attn_mask is not None:
        scores = scores + attn_mask.to(scores.dtype)
    probs = torch.softmax(scores.float() if softmax_use_float else scores, dim=-1).to(scores.dtype)
    if dropout_mask is not None and float(dropout_prob) > 0:
        from .dropout import npu_dropout_do_mask

        probs = npu_dropout_do_mask(probs, dropout_mask, float(dropout_prob))[0]
    context = torch.matmul(probs, v).transpose(1, 2).reshape(bsz * t, h * d)
    y = F.linear(context, out_proj_weight, out_proj_bias)
    return y, dropout_mask, q, k, v, scores, probs, context
