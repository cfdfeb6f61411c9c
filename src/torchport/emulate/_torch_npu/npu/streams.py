"""``torch_npu.npu.streams`` (emulated): streams and events (synchronous on the emulator)."""

import torch

__torchport_emulated__ = True
__all__ = ["Stream", "Event", "SyncLaunchStream", "ExternalStream", "ExternalEvent"]


def __getattr__(name):
    if name in __all__:
        return getattr(torch.npu, name)
    raise AttributeError(f"module 'torch_npu.npu.streams' has no attribute {name!r}")
