"""``torch_npu.npu.aclnn`` (emulated): ``version()`` answers as torch_npu does on a card (None, warned);
``allow_hf32`` is torch_npu's alias of ``torch.npu.conv.allow_hf32`` (ALLOW_CONV_HF32, default True)."""

import sys
import types
import warnings

from torchport.emulate import _numerics

__torchport_emulated__ = True
__all__ = ["version", "allow_hf32"]


def version() -> None:
    """None, with torch_npu's warning: torch_npu does not report the aclnn version (on a card either)."""
    warnings.warn("torch.npu.aclnn.version isn't implemented!")
    return None


class _AclnnModule(types.ModuleType):
    """torch_npu's ``AclnnModule``: ``allow_hf32`` reads and sets the conv HF32 switch."""

    @property
    def allow_hf32(self) -> bool:
        return _numerics.ConvFlags().allow_hf32

    @allow_hf32.setter
    def allow_hf32(self, value: bool) -> None:
        _numerics.ConvFlags().allow_hf32 = value


sys.modules[__name__].__class__ = _AclnnModule
