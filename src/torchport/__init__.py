"""torchport: one PyTorch training codebase on CUDA, Ascend NPU, XPU, MPS and CPU.

``import torchport`` probes no device and patches nothing; names below are
loaded lazily on first use. Start with :func:`select_device` and :class:`Amp`.

Type checkers see every public name with its real signature (the ``TYPE_CHECKING`` block imports them
explicitly, and the lazy ``__getattr__`` exists only at run time), so ``torchport.Amp(precison=...)`` or
``torchport.no_such_function()`` fail ``mypy --strict``; ``tests/test_typing.py`` keeps the block and
``_EXPORTS`` equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    "autocast": "torchport.runtime.amp",
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

if TYPE_CHECKING:  # pragma: no cover - what type checkers see; at run time each name loads on first use
    from torchport.runtime.amp import Amp as Amp
    from torchport.runtime.amp import ScaleEvent as ScaleEvent
    from torchport.runtime.amp import autocast as autocast
    from torchport.runtime.amp import autocast_forward as autocast_forward
    from torchport.runtime.batch import to_device as to_device
    from torchport.runtime.device import ConfigError as ConfigError
    from torchport.runtime.device import CPUFallbackWarning as CPUFallbackWarning
    from torchport.runtime.device import NoAcceleratorError as NoAcceleratorError
    from torchport.runtime.device import Target as Target
    from torchport.runtime.device import current as current
    from torchport.runtime.device import device as device
    from torchport.runtime.device import select_device as select_device
    from torchport.runtime.distributed import all_reduce_mean as all_reduce_mean
    from torchport.runtime.distributed import barrier as barrier
    from torchport.runtime.distributed import data_parallel as data_parallel
    from torchport.runtime.distributed import init_distributed as init_distributed
    from torchport.runtime.distributed import is_main_process as is_main_process
    from torchport.runtime.distributed import local_rank as local_rank
    from torchport.runtime.distributed import rank as rank
    from torchport.runtime.distributed import world_size as world_size
    from torchport.runtime.distributed import wrap_ddp as wrap_ddp
    from torchport.runtime.fsdp import shard_model as shard_model
    from torchport.runtime.loader import loader_kwargs as loader_kwargs
    from torchport.runtime.memory import empty_cache as empty_cache
    from torchport.runtime.memory import memory_stats as memory_stats
    from torchport.runtime.memory import reset_peak_memory as reset_peak_memory
    from torchport.runtime.memory import synchronize as synchronize
    from torchport.runtime.seed import seed_everything as seed_everything
    from torchport.runtime.tuning import tune as tune
    import torchport.shim.compat as compat
    from torchport.shim import redirect_cuda as redirect_cuda

    __all__ = ["Amp", "CPUFallbackWarning", "ConfigError", "NoAcceleratorError", "ScaleEvent", "Target",
               "__version__", "all_reduce_mean", "autocast", "autocast_forward", "barrier", "compat", "current", "data_parallel",
               "device", "empty_cache", "init_distributed", "is_main_process", "loader_kwargs", "local_rank", "memory_stats",
               "rank", "redirect_cuda", "reset_peak_memory", "seed_everything", "select_device", "shard_model",
               "synchronize", "to_device", "tune", "world_size", "wrap_ddp"]
else:
    __getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
    __all__ = [*__all__, "__version__"]
