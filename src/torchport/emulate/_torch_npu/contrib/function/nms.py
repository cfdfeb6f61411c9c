"""``torch_npu.contrib.function.nms`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.function import npu_batched_multiclass_nms, npu_multiclass_nms  # noqa: F401

__torchport_emulated__ = True
__all__ = ["npu_batched_multiclass_nms", "npu_multiclass_nms"]
