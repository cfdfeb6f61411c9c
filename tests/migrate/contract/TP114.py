"""The caching-allocator API: counters, resets, stats, the summary, free memory, and a device argument."""
import torch

_base = torch.cuda.memory_allocated()   # the process's allocations so far: the counters below are relative to it
torch.cuda.reset_peak_memory_stats()
x = torch.randn(256, 256).cuda()
allocated = torch.cuda.memory_allocated() - _base
peak = torch.cuda.max_memory_allocated() - _base
reserved_grew = torch.cuda.memory_reserved() >= allocated
on_dev = torch.cuda.memory_allocated(0) - _base
max_reserved_ok = torch.cuda.max_memory_reserved() >= 0
stats = type(torch.cuda.memory_stats()).__name__
torch.cuda.empty_cache()


def report():
    summary = torch.cuda.memory_summary()
    free, total = torch.cuda.mem_get_info()
    torch.cuda.reset_accumulated_memory_stats()
    return type(summary).__name__, free >= 0, total > 0


print(allocated, peak, reserved_grew, on_dev, max_reserved_ok, stats, report())
