"""The allocator, memory statistics, memory history and device monitoring under the shim.

Through the selected backend's device module where it has the function (``torch.npu.memory_allocated``,
``torch.npu.set_per_process_memory_fraction``, ``torch.npu.memory._snapshot`` ...); the documented
stand-ins of :data:`torchport.shim.surface.SURFACE` elsewhere. A memory fraction is enforced by the
target's allocator where it has one (the emulated npu's raises ``torch.OutOfMemoryError``, which
``except torch.cuda.OutOfMemoryError`` catches); on a CPU target it is checked, not enforced, and said so.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import platform
import time
import types
from typing import Any, Callable

from torchport.shim._cuda_api import C, _Api, _r

__all__ = ["SECTIONS", "host_memory"]

_STATS_INT = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
              "memory_cached", "max_memory_cached")
_STATS_RESET = ("reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
                "reset_accumulated_memory_stats")
_HOST_STATS = ("host_memory_stats", "host_memory_stats_as_nested_dict")
_HOST_RESET = ("reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats")
_NO_HISTORY = "the CPU allocator keeps no history: use torch.profiler.profile(profile_memory=True)"
_NVML = ("it reads NVIDIA's NVML, which no other target has: remove the call or guard it with "
         "`if torchport.current().type == \"cuda\":`")
_POOL = "memory pools plug into a device caching allocator, which this target lacks; drop the pool"
_ALLOCATOR = ("it installs a CUDA allocator library, which cannot serve another device; on an npu use "
              "torch.npu.NPUPluggableAllocator / change_current_allocator with an allocator built for it")


def host_memory() -> tuple[int, int]:
    """(free, total) bytes of host RAM, for ``mem_get_info`` on a CPU target."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):  # non-POSIX
        return 0, 0


def _const(value: Any) -> Callable:
    return lambda *args, **kwargs: value


def _statistics(api: _Api) -> dict[str, Any]:
    """``synchronize``, the allocator statistics and device properties (host stand-ins on CPU)."""
    dm, hit, fn_of, dev_arg, target, via = api.dm, api.hit, api.fn_of, api.dev_arg, api.target, api.via
    out: dict[str, Any] = {}

    def synchronize(device: Any = None) -> None:
        """Under the torchport shim: synchronize the selected device (no-op on CPU)."""
        hit(C + "synchronize", f"synchronize({_r(device)})", dm.device(dm.index_of(device)))
        fn = fn_of("synchronize")
        if fn is not None:
            fn(dev_arg(device)) if device is not None else fn()

    out["synchronize"] = synchronize
    for name in _STATS_INT:
        out[name] = via(C + name, _const(0))
    for name in (*_STATS_RESET, *_HOST_RESET):
        out[name] = via(C + name, _const(None))
    for name in ("memory_stats", "memory_stats_as_nested_dict", *_HOST_STATS):
        out[name] = via(C + name, lambda *a, **k: {}, device_pos=None if name in _HOST_STATS else 0)
    out["memory_summary"] = via(C + "memory_summary", _const(f"(no device memory statistics on {target})"))
    out["memory_snapshot"] = via(C + "memory_snapshot", lambda *a, **k: [], device_pos=None)
    out["mem_get_info"] = via(C + "mem_get_info", lambda *a, **k: host_memory())
    out["empty_cache"] = via(C + "empty_cache", _const(None), device_pos=None)
    out["ipc_collect"] = via(C + "ipc_collect", _const(None), device_pos=None)
    out["get_device_name"] = via(C + "get_device_name", _const(platform.processor() or platform.machine() or "cpu"))
    capability = via(C + "get_device_capability", _const((0, 0)))

    def get_device_capability(*args: Any, **kwargs: Any) -> tuple[int, int]:
        """Under the torchport shim: the backend's answer, (0, 0) where it has none (torch_npu answers None)."""
        answer = capability(*args, **kwargs)
        return (0, 0) if answer is None else answer

    out["get_device_capability"] = get_device_capability
    out["get_device_properties"] = via(C + "get_device_properties", lambda *a, **k: types.SimpleNamespace(
        name=platform.processor() or "cpu", total_memory=host_memory()[1], major=0, minor=0,
        multi_processor_count=os.cpu_count() or 1))
    out["get_allocator_backend"] = via(C + "get_allocator_backend", _const("native"), device_pos=None)
    return out


def _allocator(api: _Api) -> dict[str, Any]:
    """The per-process memory fraction, raw allocations, pools and pluggable allocators."""
    import torch

    via, target = api.via, api.target

    def check_fraction(fraction: Any) -> None:
        if not isinstance(fraction, float):   # torch.cuda's own checks and messages
            raise TypeError("Invalid type for fraction argument, must be `float`")
        if fraction < 0 or fraction > 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")

    def fraction_on_cpu(fraction: Any, device: Any = None) -> None:
        check_fraction(fraction)
        if fraction < 1.0:
            api.warn_once("fraction", f"torch.cuda.set_per_process_memory_fraction({fraction}) is not enforced on "
                                      f"{target.device}: the CPU allocator has no per-process limit")

    blocks: dict[int, Any] = {}

    def alloc_on_cpu(size: int, device: Any = None, stream: Any = None) -> int:
        block = torch.empty(int(size), dtype=torch.uint8)
        blocks[block.data_ptr()] = block
        return block.data_ptr()

    def delete_on_cpu(mem_ptr: int) -> None:
        blocks.pop(int(mem_ptr), None)

    def caching_allocator_enable(value: bool = True) -> None:
        """Under the torchport shim: a no-op (the target's allocator keeps its own caching policy)."""
        api.hit(C + "caching_allocator_enable", f"caching_allocator_enable({value!r})", "no-op")

    def caching_allocator_disabled() -> Any:
        """Under the torchport shim: a context that changes nothing (the target keeps its caching policy)."""
        api.hit(C + "caching_allocator_disabled", "caching_allocator_disabled()", "no-op")
        return contextlib.nullcontext()

    return {
        "set_per_process_memory_fraction": via(C + "set_per_process_memory_fraction", fraction_on_cpu, device_pos=1),
        "get_per_process_memory_fraction": via(C + "get_per_process_memory_fraction", _const(1.0)),
        "caching_allocator_alloc": via(C + "caching_allocator_alloc", alloc_on_cpu, device_pos=1),
        "caching_allocator_delete": via(C + "caching_allocator_delete", delete_on_cpu, device_pos=None),
        "caching_allocator_enable": caching_allocator_enable,
        "caching_allocator_disabled": caching_allocator_disabled,
        "MemPool": api.via_or_refuse(C + "MemPool", _POOL),
        "use_mem_pool": api.via_or_refuse(C + "use_mem_pool", _POOL, device_pos=1),
        "CUDAPluggableAllocator": api.refuse(C + "CUDAPluggableAllocator", _ALLOCATOR),
        "change_current_allocator": api.refuse(C + "change_current_allocator", _ALLOCATOR),
    }


def _history(api: _Api) -> dict[str, Any]:
    """``torch.cuda.memory._record_memory_history`` / ``_snapshot`` / ``_dump_snapshot``: the target allocator's."""
    fn_of, hit, dm = api.fn_of, api.hit, api.dm
    M = C + "memory."
    record = api.via_or_refuse(M + "_record_memory_history", _NO_HISTORY, path="memory._record_memory_history")
    snapshot = api.via_or_refuse(M + "_snapshot", _NO_HISTORY, path="memory._snapshot", device_pos=0)
    dump_refused = api.refuse(M + "_dump_snapshot", _NO_HISTORY)

    def _record_memory_history(enabled: Any = "all", *args: Any, **kwargs: Any) -> None:
        """Under the torchport shim: the target allocator's history (turning it off is always accepted)."""
        if enabled is None and fn_of("memory._record_memory_history") is None:
            hit(M + "_record_memory_history", "_record_memory_history(enabled=None)", "no-op: nothing recorded")
            return None
        return record(enabled, *args, **kwargs)

    def _dump_snapshot(filename: str = "dump_snapshot.pickle", *args: Any, **kwargs: Any) -> None:
        """Under the torchport shim: the target's ``_dump_snapshot``, else its ``_snapshot()`` pickled to ``filename``."""
        dump = fn_of("memory._dump_snapshot")
        if dump is not None:
            hit(M + "_dump_snapshot", "_dump_snapshot(...)", dm.device())
            return dump(filename, *args, **kwargs)
        if fn_of("memory._snapshot") is None:
            return dump_refused(filename, *args, **kwargs)
        snap = snapshot()
        with open(filename, "wb") as f:
            pickle.dump(snap, f)
        return None

    return {M + "_record_memory_history": _record_memory_history, M + "_snapshot": snapshot,
            M + "_dump_snapshot": _dump_snapshot}


def _monitoring(api: _Api) -> dict[str, Any]:
    """What NVML answers for CUDA: utilization, memory in use, the process list (temperature & co. refused)."""
    import torch

    dm, hit, fn_of, via = api.dm, api.hit, api.fn_of, api.via
    last = [time.monotonic(), time.process_time()]

    def cpu_utilization(*args: Any, **kwargs: Any) -> int:
        # the share of torch's CPU threads this process kept busy since the previous call (or the install)
        wall, cpu = time.monotonic(), time.process_time()
        d_wall, d_cpu = wall - last[0], cpu - last[1]
        last[:] = [wall, cpu]
        if d_wall <= 0:
            return 0
        return max(0, min(100, round(100.0 * d_cpu / (d_wall * max(1, torch.get_num_threads())))))

    def device_memory_used(device: Any = None) -> int:
        """Under the torchport shim: bytes in use on the device (total - free of its mem_get_info)."""
        info = fn_of("mem_get_info")
        hit(C + "device_memory_used", f"device_memory_used({_r(device)})", dm.device(dm.index_of(device)))
        free, total = info(api.dev_arg(device)) if info is not None and device is not None else (
            info() if info is not None else host_memory())
        return int(total - free)

    def list_gpu_processes(device: Any = None) -> str:
        """Under the torchport shim: this process's bytes on the device (other processes are not visible)."""
        dev = dm.device(dm.index_of(device))
        hit(C + "list_gpu_processes", f"list_gpu_processes({_r(device)})", dev)
        allocated = fn_of("memory_allocated")
        if allocated is None:
            return f"{dev}\nno device memory per process on the CPU target"
        mib = allocated(dev) / (1 << 20)
        return f"{dev}\nprocess {os.getpid():>10d} uses {mib:12.3f} MB {dev.type} memory (other processes: not visible)"

    out: dict[str, Any] = {
        "utilization": via(C + "utilization", cpu_utilization),
        "device_memory_used": device_memory_used,
        "list_gpu_processes": list_gpu_processes,
    }
    for name in ("temperature", "power_draw", "clock_rate", "memory_usage"):
        out[name] = api.refuse(C + name, _NVML)
    return out


SECTIONS = (_statistics, _allocator, _history, _monitoring)
