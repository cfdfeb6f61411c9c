"""``torch_npu.npu.memory`` (emulated): the memory functions of ``torch.npu``."""

import torch
from torch.npu import (caching_allocator_alloc, caching_allocator_delete, empty_cache,  # noqa: F401
                       get_per_process_memory_fraction, max_memory_allocated, max_memory_cached,
                       max_memory_reserved, mem_get_info, memory_allocated, memory_cached, memory_reserved,
                       memory_snapshot, memory_stats, memory_stats_as_nested_dict, memory_summary,
                       reset_accumulated_memory_stats, reset_max_memory_allocated, reset_max_memory_cached,
                       reset_peak_memory_stats, set_per_process_memory_fraction)

__torchport_emulated__ = True
__all__ = ["empty_cache", "memory_stats", "memory_stats_as_nested_dict", "reset_accumulated_memory_stats",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_cached",
           "max_memory_cached", "memory_snapshot", "memory_summary", "mem_get_info",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction",
           "caching_allocator_alloc", "caching_allocator_delete", "_record_memory_history", "_snapshot"]


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=2**31 - 1, device=None,
                           **kwargs):
    """Accepted; the emulator keeps no allocation history (``_snapshot()`` has no ``device_traces`` entries)."""
    if device is not None:
        torch.npu._get_device_index(device, optional=True)  # an invalid device raises, as on the card


def _snapshot(device=None):
    """``{"segments": memory_snapshot(), "device_traces": [[]...]}`` as torch_npu returns."""
    return {"segments": memory_snapshot(), "device_traces": [[] for _ in range(torch.npu.device_count())],
            "allocator_settings": {}}
