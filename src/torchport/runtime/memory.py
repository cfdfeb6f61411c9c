"""Synchronize and device-memory statistics, through ``torch.accelerator`` where it has them.

Example::

    torchport.reset_peak_memory()
    train_step()
    print(torchport.memory_stats()["peak_bytes"])
"""

from __future__ import annotations

from typing import Any

__all__ = ["synchronize", "memory_stats", "reset_peak_memory", "empty_cache"]


def _target(target: Any):
    from torchport.runtime.device import current

    return target or current()


def _accel(target) -> Any:
    """``torch.accelerator`` when present and it speaks for this target's device type."""
    import torch

    acc = getattr(torch, "accelerator", None)
    if acc is None or not target.is_accelerator:
        return None
    try:
        cur = acc.current_accelerator() if acc.is_available() else None
    except Exception:
        return None
    return acc if cur is not None and cur.type == target.type else None


def _call(target, name: str, *args: Any) -> Any:
    """Call ``name`` on torch.accelerator if it has it for this device, else on the device module."""
    acc = _accel(target)
    fn = getattr(acc, name, None) if acc is not None else None
    if fn is not None:
        try:
            return fn(*args)
        except (RuntimeError, NotImplementedError):
            pass  # torch.accelerator lacks it for this backend: use the device module
    fn = getattr(target.module, name, None)
    return None if fn is None else fn(*args)


def synchronize(target: Any = None) -> None:
    """Wait for all queued work on the device (no-op on CPU)."""
    t = _target(target)
    if t.is_accelerator:
        _call(t, "synchronize", t.device)


def memory_stats(target: Any = None) -> dict[str, int | None]:
    """``{"allocated_bytes", "peak_bytes", "reserved_bytes"}`` for the device (None where unknown, e.g. CPU)."""
    t = _target(target)
    if not t.is_accelerator:
        return {"allocated_bytes": None, "peak_bytes": None, "reserved_bytes": None}
    out: dict[str, int | None] = {}
    for key, name in (("allocated_bytes", "memory_allocated"), ("peak_bytes", "max_memory_allocated"),
                      ("reserved_bytes", "memory_reserved")):
        try:
            val = _call(t, name, t.device)
        except Exception:
            val = None
        out[key] = None if val is None else int(val)
    return out


def reset_peak_memory(target: Any = None) -> None:
    """Reset the peak-allocated counter (no-op on CPU)."""
    t = _target(target)
    if t.is_accelerator:
        _call(t, "reset_peak_memory_stats", t.device)


def empty_cache(target: Any = None) -> None:
    """Release cached, unused device memory (no-op on CPU)."""
    t = _target(target)
    if t.is_accelerator:
        _call(t, "empty_cache")
