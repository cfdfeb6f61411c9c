"""``torch_npu.contrib.function.anchor_generator`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.function import npu_single_level_responsible_flags  # noqa: F401

__torchport_emulated__ = True
__all__ = ["npu_single_level_responsible_flags"]
