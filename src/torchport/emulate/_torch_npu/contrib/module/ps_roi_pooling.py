"""``torch_npu.contrib.module.ps_roi_pooling`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import PSROIPool  # noqa: F401

__torchport_emulated__ = True
__all__ = ["PSROIPool"]
