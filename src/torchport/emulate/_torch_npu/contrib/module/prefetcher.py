"""``torch_npu.contrib.module.prefetcher`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import Prefetcher  # noqa: F401

__torchport_emulated__ = True
__all__ = ["Prefetcher"]
