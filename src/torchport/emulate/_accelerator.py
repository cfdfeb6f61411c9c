"""``torch.accelerator`` on the emulated NPU.

While the emulator is installed torch reports ``npu`` as the current accelerator. Devices,
streams and events go through torch's own functions to the emulator's C++ device guard;
the memory functions need a ``DeviceAllocator`` the emulator does not register, and device
capabilities a guard method, so those are routed to ``torch.npu`` while installed;
uninstall puts torch's own functions back.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["install", "uninstall"]

_saved: list[tuple[Any, str, Any]] = []


def _index(device: Any) -> int | None:
    if device is None:
        return None
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return device.index


def _npu() -> Any:
    return torch.npu


def get_device_capability(device: Any = None, /) -> dict[str, Any]:
    return {"supported_dtypes": set(_npu().get_amp_supported_dtype()) | {torch.int8, torch.int32, torch.int64}}


def empty_cache() -> None:
    _npu().empty_cache()


def empty_host_cache() -> None:
    pass


def memory_stats(device_index: Any = None, /) -> Any:
    return _npu().memory_stats(_index(device_index))


def memory_allocated(device_index: Any = None, /) -> int:
    return _npu().memory_allocated(_index(device_index))


def max_memory_allocated(device_index: Any = None, /) -> int:
    return _npu().max_memory_allocated(_index(device_index))


def memory_reserved(device_index: Any = None, /) -> int:
    return _npu().memory_reserved(_index(device_index))


def max_memory_reserved(device_index: Any = None, /) -> int:
    return _npu().max_memory_reserved(_index(device_index))


def reset_accumulated_memory_stats(device_index: Any = None, /) -> None:
    _npu().reset_accumulated_memory_stats(_index(device_index))


def reset_peak_memory_stats(device_index: Any = None, /) -> None:
    _npu().reset_peak_memory_stats(_index(device_index))


def get_memory_info(device_index: Any = None, /) -> tuple[int, int]:
    return _npu().mem_get_info(_index(device_index))


_ROUTED = {
    "": ["get_device_capability", "empty_cache", "empty_host_cache", "memory_stats", "memory_allocated", "max_memory_allocated",
         "memory_reserved", "max_memory_reserved", "reset_accumulated_memory_stats", "reset_peak_memory_stats",
         "get_memory_info"],
    "memory": ["empty_cache", "empty_host_cache", "memory_stats", "memory_allocated", "max_memory_allocated",
               "memory_reserved", "max_memory_reserved", "reset_accumulated_memory_stats",
               "reset_peak_memory_stats", "get_memory_info"],
}


def install() -> None:
    """Route the ``torch.accelerator`` functions listed in ``_ROUTED`` to ``torch.npu``."""
    if _saved:
        return
    import torch.accelerator as acc
    import torch.accelerator.memory as mem

    ours = globals()
    for sub, names in _ROUTED.items():
        owner = mem if sub == "memory" else acc
        for name in names:
            if hasattr(owner, name):
                _saved.append((owner, name, getattr(owner, name)))
                setattr(owner, name, ours[name])


def uninstall() -> None:
    """Put torch's own functions back."""
    while _saved:
        owner, name, original = _saved.pop()
        setattr(owner, name, original)
