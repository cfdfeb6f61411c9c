"""torchport: one PyTorch training codebase on CUDA, Ascend NPU, XPU, MPS and CPU.

``import torchport`` probes no device and patches nothing; names below are
loaded lazily on first use. Start with :func:`select_device` and :class:`Amp`.
"""

from __future__ import annotations

from torchport._lazy import lazy_exports


__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "Target": "torchport.runtime.device",
    "select_device": "torchport.runtime.device",
    "current": "torchport.runtime.device",
    "device": "torchport.runtime.device",
    "NoAcceleratorError": "torchport.runtime.device",
    "CPUFallbackWarning": "torchport.runtime.device",
    "ConfigError": "torchport.runtime.device",
    "to_device": "torchport.runtime.batch",
    "Amp": "torchport.runtime.amp",
    "ScaleEvent": "torchport.runtime.amp",
    "autocast_forward": "torchport.runtime.amp",
    "loader_kwargs": "torchport.runtime.loader",
    "seed_everything": "torchport.runtime.seed",
    "synchronize": "torchport.runtime.memory",
    "memory_stats": "torchport.runtime.memory",
    "reset_peak_memory": "torchport.runtime.memory",
    "empty_cache": "torchport.runtime.memory",
    "init_distributed": "torchport.runtime.distributed",
    "wrap_ddp": "torchport.runtime.distributed",
    "data_parallel": "torchport.runtime.distributed",
    "shard_model": "torchport.runtime.fsdp",
    "rank": "torchport.runtime.distributed",
    "world_size": "torchport.runtime.distributed",
    "local_rank": "torchport.runtime.distributed",
    "is_main_process": "torchport.runtime.distributed",
    "barrier": "torchport.runtime.distributed",
    "all_reduce_mean": "torchport.runtime.distributed",
    "redirect_cuda": "torchport.shim",
    "compat": "torchport.shim.compat",
    "tune": "torchport.runtime.tuning",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
__all__ = [*__all__, "__version__"]
