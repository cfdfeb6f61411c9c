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


def _erase_stream(tensor, stream):
    """``torch_npu.erase_stream``: drop the tag ``tensor.record_stream(stream)`` put on the tensor's memory.

    The emulated device runs work synchronously and returns memory to the host the moment the last
    reference goes (no caching allocator), so no tag ever delays a free: this checks the arguments as the
    card does and has nothing else to do."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor should be torch.Tensor, could not be {type(tensor)}" + _C._card_error(0, 2))
    if not isinstance(stream, torch.npu.Stream):
        raise TypeError(f"stream should be torch_npu.npu.Stream, could not be {type(stream)}" + _C._card_error(0, 2))
    _C._npu_eraseStream(tensor=tensor, stream_id=stream.stream_id, device_index=stream.device_index,
                        device_type=stream.device_type)

get_npu_overflow_flag = torch.npu.get_npu_overflow_flag
clear_npu_overflow_flag = torch.npu.clear_npu_overflow_flag


def is_support_inf_nan() -> bool:
    """True unless the emulator saturates fp16 like the first-generation card (then overflow is a flag)."""
    from torchport.emulate._state import SATURATE, STATE

    return STATE.overflow_mode != SATURATE


def npu_check_overflow(grad) -> bool:
    """torch_npu's overflow check: inf/NaN in ``grad`` (a float or tensor) in INF_NAN mode, else the device flag
    (read and cleared)."""
    if is_support_inf_nan():
        if isinstance(grad, float):
            total = grad
        elif isinstance(grad, torch.Tensor):
            total = float(grad.float().sum())
        else:
            raise RuntimeError("Unsupported type.")
        return total in (float("inf"), -float("inf")) or total != total
    flag = get_npu_overflow_flag()
    if flag:
        clear_npu_overflow_flag()
    return flag


__all__ += ["get_npu_overflow_flag", "clear_npu_overflow_flag", "is_support_inf_nan", "npu_check_overflow"]
