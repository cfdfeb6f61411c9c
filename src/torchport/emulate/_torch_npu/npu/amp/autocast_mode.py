"""``torch_npu.npu.amp.autocast_mode`` (emulated)."""

from torch.npu.amp import autocast, custom_bwd, custom_fwd  # noqa: F401

__torchport_emulated__ = True
__all__ = ["autocast", "custom_fwd", "custom_bwd"]
