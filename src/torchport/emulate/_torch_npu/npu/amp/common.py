"""``torch_npu.npu.amp.common`` (emulated)."""

import torch

__torchport_emulated__ = True
__all__ = ["amp_definitely_not_available"]


def amp_definitely_not_available() -> bool:
    """False while the (emulated) npu is available, as torch_npu answers."""
    return not torch.npu.is_available()
