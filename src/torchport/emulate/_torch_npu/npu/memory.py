"""``torch_npu.npu.memory`` (emulated): the memory functions of ``torch.npu``."""

import torch

__torchport_emulated__ = True
__all__ = ["empty_cache", "memory_stats", "memory_stats_as_nested_dict", "reset_accumulated_memory_stats",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_cached",
           "max_memory_cached", "memory_snapshot", "memory_summary", "mem_get_info",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction",
           "caching_allocator_alloc", "caching_allocator_delete", "_record_memory_history", "_snapshot",
           "_dump_snapshot"]


def __getattr__(name):
    if name in __all__:
        return getattr(torch.npu, name)
    raise AttributeError(f"module 'torch_npu.npu.memory' has no attribute {name!r}")
