"""``torch_npu.contrib.module.channel_shuffle`` (emulated): the names torch_npu defines there, from the package."""

from torch_npu.contrib.module import ChannelShuffle  # noqa: F401

__torchport_emulated__ = True
__all__ = ["ChannelShuffle"]
