"""``torch_npu.contrib.function.bbox_coder`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.function import npu_bbox_coder_decode_xywh2xyxy, npu_bbox_coder_encode_xyxy2xywh, npu_bbox_coder_encode_yolo  # noqa: F401

__torchport_emulated__ = True
__all__ = ["npu_bbox_coder_decode_xywh2xyxy", "npu_bbox_coder_encode_xyxy2xywh", "npu_bbox_coder_encode_yolo"]
