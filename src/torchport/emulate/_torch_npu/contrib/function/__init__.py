"""``torch_npu.contrib.function`` (emulated): torch_npu's Python helpers over its custom ops.

Each is composed from the emulated ops of ``torch_npu._ops`` (one copy of each idea: the box, NMS, dropout
and softmax logic lives there) or from plain torch ops, with the semantics of torch_npu 2.14.0's
``contrib/function`` (read from the wheel; argument names and defaults as there). The two fused-attention
helpers compose the card's fused BERT kernels (``npu_fused_attention_score_fwd`` ...) from plain torch ops.

The wheel's submodules (``iou``, ``nms``, ``bbox_coder`` ...) re-export their names from here; ``roll``,
``matmul_transpose`` and ``fuse_add_softmax_dropout`` are not submodules here (their names are the functions).
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

import torch_npu


__torchport_emulated__ = True
__all__ = ["npu_iou", "npu_ptiou", "npu_giou", "npu_diou", "npu_ciou", "npu_multiclass_nms",
           "npu_batched_multiclass_nms", "npu_single_level_responsible_flags", "npu_fast_condition_index_put",
           "npu_bbox_coder_encode_yolo", "npu_bbox_coder_encode_xyxy2xywh", "npu_bbox_coder_decode_xywh2xyxy",
           "fuse_add_softmax_dropout", "roll", "matmul_transpose", "npu_fused_attention",
           "npu_fused_attention_with_layernorm", "dropout_with_byte_mask"]


def _float_boxes(b: torch.Tensor) -> torch.Tensor:
    return b if b.dtype in (torch.float32, torch.float16) else b.float()


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(f"torch_npu.contrib.{name} is deprecated. Please use {instead} as a replacement.", FutureWarning)


def npu_iou(boxes1, boxes2, mode="ptiou", is_normalized=False, normalized_scale=100.0):
    """IoU of every (boxes1[i], boxes2[j]) pair, ``[N, M]``: ``mode`` ``"iou"`` (npu_iou) or ``"ptiou"``."""
    _deprecated("npu_iou", "torch_npu.npu_iou or torch_npu.npu_ptiou")
    if mode not in ("iou", "ptiou"):
        raise ValueError(f"torch_npu.contrib.function.npu_iou: mode must be 'iou' or 'ptiou', got {mode!r}")
    boxes1, boxes2 = _float_boxes(boxes1), _float_boxes(boxes2)
    if is_normalized:
        boxes1, boxes2 = boxes1 * normalized_scale, boxes2 * normalized_scale
    op = torch_npu.npu_iou if mode == "iou" else torch_npu.npu_ptiou
    return op(boxes2, boxes1)


npu_ptiou = npu_iou


def npu_giou(boxes1, boxes2, is_permuted=True):
    """GIoU of aligned (n, 4) boxes given as (cx, cy, w, h): ``[n, 1]``."""
    _deprecated("npu_giou", "torch_npu.npu_giou")
    if boxes1.shape != boxes2.shape:
        raise ValueError(f"torch_npu.contrib.function.npu_giou: boxes1 {tuple(boxes1.shape)} and boxes2 "
                         f"{tuple(boxes2.shape)} must have the same shape")
    boxes1, boxes2 = _float_boxes(boxes1), _float_boxes(boxes2)
    if is_permuted:
        boxes1, boxes2 = boxes1.permute(1, 0), boxes2.permute(1, 0)
    return torch_npu.npu_giou(boxes1, boxes2, trans=True, is_cross=False)


def npu_diou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """torch_npu.npu_diou with contrib's defaults (trans=True)."""
    _deprecated("function.npu_diou", "torch_npu.npu_diou")
    return torch_npu.npu_diou(boxes1, boxes2, trans, is_cross, mode)


def npu_ciou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """torch_npu.npu_ciou with contrib's defaults (trans=True, is_cross=False, atan_sub_flag=True)."""
    _deprecated("function.npu_ciou", "torch_npu.npu_ciou")
    return torch_npu.npu_ciou(boxes1, boxes2, trans, is_cross, mode, True)


def npu_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50, score_factors=None):
    """mmdet's multiclass_nms through npu_batch_nms (fp16, as on the card): ``(dets [max_num, 5], labels)``.

    ``multi_scores`` is ``[n, classes + 1]`` with the background last (dropped)."""
    n, classes = multi_scores.size(0), multi_scores.size(1) - 1
    scores = multi_scores[:, :-1]
    if score_factors is not None:
        scores = scores * score_factors[:, None]
    boxes = multi_bboxes.reshape(1, n, multi_bboxes.numel() // 4 // n, 4)
    b, s, c, _ = torch_npu.npu_batch_nms(boxes.half(), scores.reshape(1, n, classes).half(), score_thr, nms_thr,
                                         max_num, max_num)
    return torch.cat([b[0], s[0][:, None]], -1), c[0]


def npu_batched_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50,
                               score_factors=None):
    """npu_multiclass_nms over a batch: ``multi_scores`` ``[b, n, classes + 1]`` -> ``(dets [b, max_num, 5], labels)``."""
    bs, n, classes = multi_scores.size(0), multi_scores.size(1), multi_scores.size(2) - 1
    scores = multi_scores[..., :-1]
    if score_factors is not None:
        scores = scores * score_factors[..., None]
    boxes = multi_bboxes.reshape(bs, n, multi_bboxes.numel() // 4 // n // bs, 4)
    b, s, c, _ = torch_npu.npu_batch_nms(boxes.half(), scores.reshape(bs, n, classes).half(), score_thr, nms_thr,
                                         max_num, max_num)
    return torch.cat([b, s[..., None]], -1), c


def npu_single_level_responsible_flags(featmap_size, gt_bboxes, stride, num_base_anchors):
    """Which anchors of one feature level hold a gt box centre (npu_anchor_response_flags)."""
    return torch_npu.npu_anchor_response_flags(_float_boxes(gt_bboxes), featmap_size, stride, num_base_anchors)


def _check_pairs(name, a, b, bname):
    if a.size(0) != b.size(0) or not a.size(-1) == b.size(-1) == 4:
        raise ValueError(f"torch_npu.contrib.function.{name}: bboxes {tuple(a.shape)} and {bname} {tuple(b.shape)} "
                         "must both be [n, 4]")


def npu_bbox_coder_encode_yolo(bboxes, gt_bboxes, stride):
    """YOLO's box encoding (npu_yolo_boxes_encode)."""
    _check_pairs("npu_bbox_coder_encode_yolo", bboxes, gt_bboxes, "gt_bboxes")
    stride = stride if stride.dtype == torch.int32 else stride.int()
    return torch_npu.npu_yolo_boxes_encode(_float_boxes(bboxes), _float_boxes(gt_bboxes), stride,
                                           performance_mode=False)


def npu_bbox_coder_encode_xyxy2xywh(bboxes, gt_bboxes, means=None, stds=None, is_normalized=False,
                                    normalized_scale=10000.0):
    """mmdet's DeltaXYWHBBoxCoder.encode (npu_bounding_box_encode)."""
    means, stds = means or [0.0] * 4, stds or [1.0] * 4
    _check_pairs("npu_bbox_coder_encode_xyxy2xywh", bboxes, gt_bboxes, "gt_bboxes")
    bboxes, gt_bboxes = _float_boxes(bboxes), _float_boxes(gt_bboxes)
    if is_normalized:
        bboxes, gt_bboxes = bboxes * normalized_scale, gt_bboxes * normalized_scale
    return torch_npu.npu_bounding_box_encode(bboxes, gt_bboxes, *means, *stds)


def npu_bbox_coder_decode_xywh2xyxy(bboxes, pred_bboxes, means=None, stds=None, max_shape=None,
                                    wh_ratio_clip=16 / 1000):
    """mmdet's DeltaXYWHBBoxCoder.decode (npu_bounding_box_decode)."""
    means, stds, max_shape = means or [0.0] * 4, stds or [1.0] * 4, max_shape or [9999, 9999]
    _check_pairs("npu_bbox_coder_decode_xywh2xyxy", bboxes, pred_bboxes, "pred_bboxes")
    return torch_npu.npu_bounding_box_decode(_float_boxes(bboxes), _float_boxes(pred_bboxes), *means, *stds,
                                             max_shape, wh_ratio_clip)


def npu_fast_condition_index_put(x, condition, value):
    """``x[condition] = value`` without in-place indexing: ``torch.where(condition, value, x)``."""
    if condition.dtype != torch.bool:
        raise TypeError(f"torch_npu.contrib.function.npu_fast_condition_index_put: condition must be bool, "
                        f"got {condition.dtype}")
    return torch.where(condition, torch.zeros_like(x) + value, x)


def fuse_add_softmax_dropout(training, dropout, attn_mask, attn_scores, attn_head_size, p=0.5, dim=-1):
    """``dropout(softmax(attn_mask + attn_scores / sqrt(head_size)))``; the card's fused kernel (and ``p``) for
    the shapes it serves (last-but-one dim 128/256/384/512, n*c a multiple of 32), ``dropout`` otherwise."""
    n, c, h, _ = attn_scores.size()
    alpha = 1 / math.sqrt(attn_head_size)
    if h in (128, 256, 384, 512) and (n * c) % 32 == 0:
        return torch_npu.npu_dropout_with_add_softmax(attn_scores, attn_mask, alpha, p if training else 0.0, -1)[2]
    return dropout(F.softmax(torch.add(attn_mask, attn_scores, alpha=alpha), dim=-1))


def roll(x, shifts, dims):
    """torch_npu's roll of an NHWC tensor over H and W (``dims`` checked, as there, then H, W are rolled)."""
    if x.dim() != 4 or len(shifts) != 2 or len(dims) != 2:
        raise ValueError("torch_npu.contrib.function.roll: expects a 4-d (N, H, W, C) tensor and two shifts and "
                         f"two dims, got {x.dim()}-d, shifts={shifts}, dims={dims}")
    return torch.roll(x, shifts=tuple(shifts), dims=(1, 2))


def matmul_transpose(tensor1, tensor2):
    """``tensor1 @ tensor2.transpose(-2, -1)`` (the card's kernel saves the transpose), gradients to both."""
    return torch.matmul(tensor1, tensor2.transpose(-2, -1))


def dropout_with_byte_mask(input1, p=0.5, training=True, inplace=False):
    """Dropout through torch_npu.dropout_with_byte_mask (no in-place variant, as on the card)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if inplace:
        raise ValueError("torch_npu.contrib.function.dropout_with_byte_mask: inplace=True is not supported "
                         "(not on the card either)")
    return torch_npu.dropout_with_byte_mask(input1, p, training)


def _fused_attention_check(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel):
    """The shape checks of torch_npu's fused attention (its kernels' limits); the NZ-format check has no
    meaning on the emulated NPU and is not made."""
    where = "torch_npu.contrib.function.npu_fused_attention"
    if hidden_states.dim() != 2 or hidden_states.shape[0] % 32 != 0 or hidden_states.shape[1] not in (1024, 768):
        raise RuntimeError(f"{where}: hidden_states is {tuple(hidden_states.shape)}; expected [B * S, 768 or 1024] "
                           "with B * S a multiple of 32 (the card's kernel)")
    if attention_mask.dim() != 4 or attention_mask.shape[1] != 1 or attention_mask.shape[2] != attention_mask.shape[3]:
        raise RuntimeError(f"{where}: attention_mask is {tuple(attention_mask.shape)}; expected [B, 1, S, S]")
    if any(k.shape[0] not in (1024, 768) for k in (query_kernel, key_kernel, value_kernel)):
        raise RuntimeError(f"{where}: the query/key/value kernels must be [768 or 1024, hidden] (the card's kernel)")


def _fused_attention_score(hidden, attention_mask, query_kernel, key_kernel, value_kernel, query_bias, key_bias,
                           value_bias, scale, keep_prob):
    """Heads of 64: ``dropout(softmax(Q K^T * scale + mask), 1 - keep_prob) @ V`` back to ``[B * S, N * 64]``."""
    b = attention_mask.shape[0]
    s = hidden.shape[0] // b
    n = hidden.shape[1] // 64

    def heads(kernel, bias):                                   # [B*S, H] @ [H, H] + bias -> [B, N, S, 64]
        return (torch.matmul(hidden, kernel) + bias).reshape(b, s, n, 64).permute(0, 2, 1, 3)

    q, k, v = heads(query_kernel, query_bias), heads(key_kernel, key_bias), heads(value_kernel, value_bias)
    probs = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * scale + attention_mask, dim=-1)
    if 0 < keep_prob < 1:
        probs = F.dropout(probs, 1.0 - keep_prob, training=True)
    return torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b * s, n * 64)


def npu_fused_attention(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel, query_bias,
                        key_bias, value_bias, scale=1, keep_prob=0):
    """BERT self-attention over ``[B * S, H]`` hidden states (heads of 64, ``query_kernel`` ``[H, H]`` applied as
    ``hidden @ kernel + bias``); dropout of the probabilities with ``1 - keep_prob`` when ``0 < keep_prob < 1``
    (keep_prob 0, the default, or 1: none — an assumption); gradients through autograd."""
    _fused_attention_check(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel)
    return _fused_attention_score(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel,
                                  query_bias, key_bias, value_bias, scale, keep_prob)


def npu_fused_attention_with_layernorm(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel,
                                       query_bias, key_bias, value_bias, gamma, beta, scale=1, keep_prob=0):
    """``norm = layer_norm(hidden_states, gamma, beta, eps=1e-5)``, then :func:`npu_fused_attention` over ``norm``:
    ``(context, norm)``."""
    warnings.warn("torch_npu.contrib.npu_fused_attention_with_layernorm is deprecated and will be removed in a "
                  "future version. Use torch_npu.npu_fusion_attention and torch.nn.LayerNorm instead.", FutureWarning)
    _fused_attention_check(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel)
    norm = F.layer_norm(hidden_states, (hidden_states.shape[-1],), gamma, beta, 1e-5)
    return _fused_attention_score(norm, attention_mask, query_kernel, key_kernel, value_kernel, query_bias,
                                  key_bias, value_bias, scale, keep_prob), norm
