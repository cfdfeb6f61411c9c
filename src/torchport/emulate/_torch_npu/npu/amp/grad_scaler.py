"""``torch_npu.npu.amp.grad_scaler`` (emulated)."""

from torch.npu.amp import GradScaler  # noqa: F401

__torchport_emulated__ = True
__all__ = ["GradScaler"]
