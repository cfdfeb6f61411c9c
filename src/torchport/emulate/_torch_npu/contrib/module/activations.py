"""``torch_npu.contrib.module.activations`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import Mish, SiLU, Swish  # noqa: F401

__torchport_emulated__ = True
__all__ = ["Mish", "SiLU", "Swish"]
