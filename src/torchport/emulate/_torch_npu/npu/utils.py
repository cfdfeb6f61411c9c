"""``torch_npu.npu.utils`` (emulated)."""

import torch

from torch_npu import _C

__torchport_emulated__ = True
__all__ = ["get_soc_version", "get_device_name", "get_device_properties", "device_count", "current_device",
           "set_device", "synchronize", "is_available", "is_bf16_supported", "get_device_capability", "StreamContext",
           "stream"]


def get_soc_version() -> int:
    """The SoC version number (Ascend910B3 = 223)."""
    return _C._npu_get_soc_version()


get_device_name = torch.npu.get_device_name
get_device_properties = torch.npu.get_device_properties
get_device_capability = torch.npu.get_device_capability
device_count = torch.npu.device_count
current_device = torch.npu.current_device
set_device = torch.npu.set_device
synchronize = torch.npu.synchronize
is_available = torch.npu.is_available
is_bf16_supported = torch.npu.is_bf16_supported
StreamContext = torch.npu.StreamContext
stream = torch.npu.stream
