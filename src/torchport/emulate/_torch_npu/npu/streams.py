"""``torch_npu.npu.streams`` (emulated): streams and events (synchronous on the emulator)."""

from torch.npu import Event, Stream, SyncLaunchStream  # noqa: F401

__torchport_emulated__ = True
__all__ = ["Stream", "Event", "SyncLaunchStream"]
