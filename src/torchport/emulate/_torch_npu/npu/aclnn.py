"""``torch_npu.npu.aclnn`` (emulated): ``version()`` answers as torch_npu does on a card (None, warned)."""

import warnings

__torchport_emulated__ = True
__all__ = ["version"]


def version() -> None:
    """None, with torch_npu's warning: torch_npu does not report the aclnn version (on a card either)."""
    warnings.warn("torch.npu.aclnn.version isn't implemented!")
    return None
