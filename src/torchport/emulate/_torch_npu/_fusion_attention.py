"""``torch_npu.npu_fusion_attention`` on the emulated NPU: the same arguments and outputs, computed
with torch ops (autograd works through it), so ``transformers``' NPU flash-attention path runs.

Layouts ``BSND``, ``BNSD``, ``BSH``, ``SBH``; grouped-query attention (fewer key/value heads);
``atten_mask`` in torch_npu's sense (``True`` = masked out); ``sparse_mode`` 0 (the mask as given),
1 (all), 2 (top-left causal), 3 (bottom-right causal); ``pse`` added to the scores; dropout
with ``keep_prob``. The varlen layout ``TND`` and band modes 4-8 raise torch_npu-worded errors.
"""

from __future__ import annotations

import torch

__torchport_emulated__ = True
__all__ = ["npu_fusion_attention"]

_LAYOUTS = ("BSND", "BNSD", "BSH", "SBH")


def _to_bnsd(x: torch.Tensor, layout: str, heads: int) -> torch.Tensor:
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(1, 2)
    if layout == "BSH":
        b, s, h = x.shape
        return x.view(b, s, heads, h // heads).transpose(1, 2)
    s, b, h = x.shape  # SBH
    return x.view(s, b, heads, h // heads).permute(1, 2, 0, 3)


def _from_bnsd(x: torch.Tensor, layout: str) -> torch.Tensor:
    b, n, s, d = x.shape
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(1, 2)
    if layout == "BSH":
        return x.transpose(1, 2).reshape(b, s, n * d)
    return x.permute(2, 0, 1, 3).reshape(s, b, n * d)  # SBH


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                         atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=2147483647,
                         next_tockens=2147483647, inner_precise=0, prefix=None, actual_seq_qlen=None,
                         actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True, sync=False):
    """Fused attention; returns ``(attention_out, softmax_max, softmax_sum, softmax_out, seed, offset, numels)``
    like torch_npu (``softmax_out`` is empty, as on the card)."""
    if input_layout not in _LAYOUTS:
        raise RuntimeError(f"npu_fusion_attention: input_layout {input_layout!r} is not supported on the emulated "
                           f"NPU (supported: {', '.join(_LAYOUTS)}; the varlen layout TND needs the CANN kernel)")
    if sparse_mode not in (0, 1, 2, 3):
        raise RuntimeError(f"npu_fusion_attention: sparse_mode {sparse_mode} (band/prefix modes) is not supported on "
                           "the emulated NPU; use 0-3")
    q = _to_bnsd(query, input_layout, head_num)
    kv_heads = key.shape[-1] // q.shape[-1] if input_layout in ("BSH", "SBH") else 0  # packed layouts only
    k, v = _to_bnsd(key, input_layout, kv_heads), _to_bnsd(value, input_layout, kv_heads)
    if q.shape[1] != head_num:
        raise RuntimeError(f"npu_fusion_attention: head_num {head_num} does not match the query's {q.shape[1]} heads")
    if k.shape[1] != q.shape[1]:
        if q.shape[1] % k.shape[1]:
            raise RuntimeError("npu_fusion_attention: the query's head count must be a multiple of the key's")
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    sq, skv = q.shape[2], k.shape[2]
    # Q.K^T in the inputs' dtype (as the cube unit does), softmax in float32
    scores = torch.matmul(q, k.transpose(-1, -2)).float() * scale
    if pse is not None:
        scores = scores + pse.float()
    masked = None
    if sparse_mode == 0 and atten_mask is not None:
        masked = atten_mask.bool()
    elif sparse_mode in (2, 3):
        shift = 0 if sparse_mode == 2 else skv - sq
        rows = torch.arange(sq, device=scores.device).unsqueeze(1)
        cols = torch.arange(skv, device=scores.device).unsqueeze(0)
        masked = cols > rows + shift
    if masked is not None:
        scores = scores.masked_fill(masked, float("-inf"))
    smax = scores.amax(dim=-1, keepdim=True)
    smax = torch.where(torch.isinf(smax), torch.zeros_like(smax), smax)
    exp = torch.exp(scores - smax)
    ssum = exp.sum(dim=-1, keepdim=True)
    probs = exp / ssum.clamp_min(torch.finfo(exp.dtype).tiny)
    if keep_prob < 1.0:
        probs = torch.nn.functional.dropout(probs, p=1.0 - keep_prob)
    out = torch.matmul(probs.to(v.dtype), v)
    out = _from_bnsd(out, input_layout).contiguous()
    n = q.shape[0] * q.shape[1] * sq * skv
    return (out, smax.expand(*smax.shape[:-1], 8).contiguous(), ssum.expand(*ssum.shape[:-1], 8).contiguous(),
            torch.empty(0, dtype=query.dtype, device=query.device), 0, 0, n if keep_prob < 1.0 else 0)
