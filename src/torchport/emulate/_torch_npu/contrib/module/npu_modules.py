"""``torch_npu.contrib.module.npu_modules`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import DropoutWithByteMask  # noqa: F401

__torchport_emulated__ = True
__all__ = ["DropoutWithByteMask"]
