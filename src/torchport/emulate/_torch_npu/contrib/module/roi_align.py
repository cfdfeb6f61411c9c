"""``torch_npu.contrib.module.roi_align`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import ROIAlign  # noqa: F401

__torchport_emulated__ = True
__all__ = ["ROIAlign"]
