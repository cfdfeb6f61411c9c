"""``torch.accelerator`` on the emulated NPU.

While the emulator is installed torch reports ``npu`` as the current accelerator. Devices,
streams and events go through torch's own functions to the emulator's C++ device guard, and
the memory functions to its C++ ``DeviceAllocator`` (the same statistics ``torch.npu.memory_stats``
shows). Device capabilities need a guard method and ``empty_host_cache`` a registered host
allocator, so those two are routed to ``torch.npu`` while installed; uninstall puts torch's own
functions back.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["install", "uninstall"]

_saved: list[tuple[Any, str, Any]] = []


def _npu() -> Any:
    return torch.npu


def get_device_capability(device: Any = None, /) -> dict[str, Any]:
    return {"supported_dtypes": set(_npu().get_amp_supported_dtype()) | {torch.int8, torch.int32, torch.int64}}


def empty_host_cache() -> None:
    """torch's version asks for a registered host allocator; the emulator's pinned cache is in its module."""
    _npu().host_empty_cache()


_ROUTED = {
    "": ["get_device_capability", "empty_host_cache"],
    "memory": ["empty_host_cache"],
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
