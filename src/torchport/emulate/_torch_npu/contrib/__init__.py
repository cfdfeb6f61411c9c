"""``torch_npu.contrib`` (emulated): ``function`` and ``module`` (their names re-exported here, as torch_npu's
own ``contrib/__init__.py`` does); ``transfer_to_npu`` is imported explicitly, as with torch_npu."""

from .function import (npu_iou, npu_ptiou, npu_giou, npu_diou, npu_ciou, npu_multiclass_nms,  # noqa: F401
                       npu_batched_multiclass_nms, npu_single_level_responsible_flags, npu_fast_condition_index_put,
                       npu_bbox_coder_encode_yolo, npu_bbox_coder_encode_xyxy2xywh, npu_bbox_coder_decode_xywh2xyxy,
                       roll, matmul_transpose, npu_fused_attention_with_layernorm, npu_fused_attention,
                       fuse_add_softmax_dropout)
from .module import (ChannelShuffle, Prefetcher, LabelSmoothingCrossEntropy, ROIAlign, DCNv2,  # noqa: F401
                     ModulatedDeformConv, Mish, BiLSTM, PSROIPool, SiLU, Swish, NpuFairseqDropout, NpuCachedDropout,
                     MultiheadAttention, FusedColorJitter, NpuDropPath, Focus, FastBatchNorm1d, FastBatchNorm2d,
                     FastBatchNorm3d, FastSyncBatchNorm, LinearA8W8Quant, LinearQuant, LinearWeightQuant)

__torchport_emulated__ = True
__all__ = ["npu_multiclass_nms", "npu_batched_multiclass_nms", "npu_single_level_responsible_flags",
           "npu_fast_condition_index_put", "npu_bbox_coder_encode_yolo", "npu_bbox_coder_encode_xyxy2xywh",
           "npu_bbox_coder_decode_xywh2xyxy", "fuse_add_softmax_dropout", "roll", "matmul_transpose",
           "npu_fused_attention_with_layernorm", "npu_fused_attention", "ChannelShuffle", "Prefetcher",
           "LabelSmoothingCrossEntropy", "ROIAlign", "ModulatedDeformConv", "PSROIPool", "NpuFairseqDropout",
           "NpuCachedDropout", "MultiheadAttention", "NpuDropPath", "Focus", "LinearA8W8Quant", "LinearQuant",
           "LinearWeightQuant"]
