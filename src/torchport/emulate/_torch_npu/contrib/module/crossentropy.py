"""``torch_npu.contrib.module.crossentropy`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import LabelSmoothingCrossEntropy  # noqa: F401

__torchport_emulated__ = True
__all__ = ["LabelSmoothingCrossEntropy"]
