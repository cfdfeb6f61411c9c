"""``torch.accelerator`` on the emulated NPU.

While the emulator is installed torch reports ``npu`` as the current accelerator, but
several ``torch.accelerator`` functions need C++ pieces a Python backend cannot
register (a device guard that really switches devices, a host allocator). The memory
functions need nothing here: they read the emulator's C++ ``DeviceAllocator`` (the same
statistics ``torch.npu.memory_stats`` shows). Device-agnostic code -- including what
``torchport fix`` writes -- calls the others, so while installed they are routed to
``torch.npu``; uninstall puts torch's own functions back.
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


def current_device_index() -> int:
    return _npu().current_device()


def set_device_index(device: Any, /) -> None:
    idx = _index(device)
    if idx is not None and idx >= 0:
        _npu().set_device(idx)


def synchronize(device: Any = None, /) -> None:
    _npu().synchronize(_index(device))


def get_device_capability(device: Any = None, /) -> dict[str, Any]:
    return {"supported_dtypes": set(_npu().get_amp_supported_dtype()) | {torch.int8, torch.int32, torch.int64}}


class device_index:
    """``with torch.accelerator.device_index(i):`` -- select emulated device ``i`` inside the block."""

    def __init__(self, device: int | None, /) -> None:
        self.idx = device
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx is not None:
            self.prev_idx = _npu().current_device()
            _npu().set_device(self.idx)

    def __exit__(self, *exc_info: object) -> None:
        if self.idx is not None:
            _npu().set_device(self.prev_idx)


def empty_host_cache() -> None:
    """torch's version asks for a registered host allocator; the emulator's pinned cache is in its module."""
    _npu().host_empty_cache()


_ROUTED = {
    "": ["current_device_index", "set_device_index", "synchronize", "get_device_capability", "device_index",
         "empty_host_cache"],
    "memory": ["empty_host_cache"],
}
_ALIASES = {"current_device_idx": "current_device_index", "set_device_idx": "set_device_index"}


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
    for alias, target in _ALIASES.items():
        if hasattr(acc, alias):
            _saved.append((acc, alias, getattr(acc, alias)))
            setattr(acc, alias, ours[target])


def uninstall() -> None:
    """Put torch's own functions back."""
    while _saved:
        owner, name, original = _saved.pop()
        setattr(owner, name, original)
