"""``torch_npu.contrib.function.iou`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.function import npu_ciou, npu_diou, npu_giou, npu_iou, npu_ptiou  # noqa: F401

__torchport_emulated__ = True
__all__ = ["npu_ciou", "npu_diou", "npu_giou", "npu_iou", "npu_ptiou"]
