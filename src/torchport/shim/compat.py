"""``torchport.compat``: what ``torchport run`` does for a CUDA-only call, as a call a fixed file can make.

``torchport fix`` rewrites most CUDA-only lines into portable code (``torchport.device()``,
``torch.amp.autocast(torchport.current().type)`` ...). Some lines have no portable spelling that keeps
what the line does -- ``with torch.cuda.device(i):``, ``torch.cuda.memory_summary()``,
``torch.cuda.get_rng_state()``, ``nn.DataParallel(model)`` on a backend without DataParallel, a
``torch.load`` of a checkpoint saved on a GPU. For those the fix writes a call into this module, which
reaches the **very implementation** the shim installs under ``torchport run``; so the fixed file and the
original under ``run`` agree by construction, and on a CUDA machine each name *is* torch's own (the shim
redirects nothing there), so the rewrite is safe where the code was written::

    with torchport.compat.device(gpu):          # was: with torch.cuda.device(gpu):
        ...
    print(torchport.compat.memory_summary())    # was: print(torch.cuda.memory_summary())
    model = torchport.compat.DataParallel(model)                   # was: nn.DataParallel(model)
    state = torch.load(path, map_location=torchport.compat.restore_location)   # was: torch.load(path)

What each name is:

* ``torchport.compat.<name>`` for every name in :data:`CUDA_NAMES` -- ``torch.cuda.<name>`` as ``run``
  answers *user code* (:func:`torchport.shim._cuda_api.user_functions`): on the selected backend's device
  module (``torch.npu.memory_summary`` ...), with the shim's host stand-ins on the CPU (memory statistics 0,
  the CPU generator, no-op streams, events timed by the host clock). Device indices follow torchport's
  selection: ``torchport.compat.set_device(1)`` and ``with torchport.compat.device(1):`` move
  ``torchport.device()`` as well (what ``"cuda"`` means under ``run``).
* :func:`DataParallel` -- ``torch.nn.DataParallel`` where the backend runs it (CUDA); elsewhere the
  one-device DataParallel the shim builds: the same object type, ``.module``, ``module.``-prefixed
  ``state_dict`` keys (a checkpoint of the original loads strictly, and the other way round).
* :func:`restore_location` -- a ``map_location`` that restores storages saved on ``cuda[:N]`` where
  ``run`` does (device ``N`` of the selected backend; the CPU on a CPU host) and every other storage where
  torch would (CPU-saved tensors stay on the CPU).

The seam: :func:`implementations` is the one lookup from a name to its implementation. The set of names
(:data:`CUDA_NAMES`) is static and torch-free, because ``torchport scan`` / ``fix`` read it without
importing torch (a test keeps it equal to what the shim implements); a registry of ``torch.cuda`` names in
the shim replaces both by plugging in here. Nothing here patches anything: calling
``torchport.compat.memory_summary()`` does not install the shim.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Mapping

__all__ = ["CUDA_NAMES", "implementations", "DataParallel", "restore_location", "served"]

#: ``torch.cuda`` names this module serves (``torchport.compat.<name>``): the shim's user-code implementations.
CUDA_NAMES: frozenset[str] = frozenset({
    # queries and the current device
    "is_available", "device_count", "is_bf16_supported", "current_device", "set_device", "device",
    # synchronisation, memory, device properties
    "synchronize", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
    "reset_accumulated_memory_stats", "memory_stats", "memory_summary", "mem_get_info", "empty_cache",
    "ipc_collect", "get_device_name", "get_device_capability", "get_device_properties",
    # random generators
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "get_rng_state_all",
    "set_rng_state", "set_rng_state_all",
    # streams and events
    "Stream", "Event", "stream", "current_stream", "default_stream",
    # legacy typed constructors
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
    "CharTensor", "ByteTensor", "BoolTensor",
})
#: what else ``torchport.compat`` has (not ``torch.cuda`` names)
EXTRAS = ("DataParallel", "restore_location")

_lock = threading.Lock()
#: (backend name, its record, its device module) -> (the host shim, its implementations)
_built: dict[tuple[str, int, int], tuple[Any, Mapping[str, Any]]] = {}


def served(name: str) -> bool:
    """True when ``torchport.compat.<name>`` exists (``name``: a ``torch.cuda`` attribute or one of the extras)."""
    return name in CUDA_NAMES or name in EXTRAS


def _following_map(target: Any, dist_backend: str) -> Any:
    """The shim's :class:`~torchport.shim._mapping.DeviceMap` whose current index is torchport's selection:
    ``set_device(i)`` here selects device ``i`` (``torchport.select_device(index=i)``, what the TP112 fix
    writes), so ``torchport.device()`` and ``"cuda"`` under ``run`` keep meaning the same device."""
    from torchport.shim._mapping import DeviceMap

    class FollowingMap(DeviceMap):
        @property
        def current(self) -> int:  # type: ignore[override]
            from torchport.runtime.device import current

            t = current()
            return int(t.index) if self.accelerator and t.type == self.type else 0

        @current.setter
        def current(self, value: int) -> None:
            """DeviceMap.__init__ assigns the start index: torchport's selection already holds it."""

        def set_current(self, index: int | None) -> None:
            if index is None or index < 0 or not self.accelerator:
                return
            if index != self.current:
                from torchport.runtime.device import select_device

                select_device(self.type, index=index, warn=False)
            self._by_str.clear()

    return FollowingMap(target, dist_backend)


def _host() -> tuple[Any, Mapping[str, Any]]:
    """The (not installed) shim for the selected backend and its implementations, built once per backend."""
    from torchport.runtime.device import current

    target = current()
    key = (target.backend.name, id(target.backend), id(target.module))  # an emulator installed anew: built anew
    with _lock:
        hit = _built.get(key)
        if hit is not None:
            return hit
        from torchport.shim.core import Shim, _dist_backend

        shim = Shim(target)
        shim.map = _following_map(target, _dist_backend(target))
        if target.type == "cuda":  # the shim redirects nothing on CUDA: torch's own functions
            import torch

            impls: Mapping[str, Any] = {n: getattr(torch.cuda, n) for n in CUDA_NAMES if hasattr(torch.cuda, n)}
        else:
            from torchport.shim._cuda_api import user_functions

            impls = user_functions(shim)
        _built[key] = (shim, impls)
        return shim, impls


def implementations() -> Mapping[str, Callable[..., Any]]:
    """``{torch.cuda name: implementation}`` for the selected backend (the names of :data:`CUDA_NAMES`)."""
    return _host()[1]


def __getattr__(name: str) -> Any:
    if name in CUDA_NAMES:
        impl = implementations().get(name)
        if impl is not None:
            return impl
        raise AttributeError(f"torchport.compat.{name}: this torch build has no torch.cuda.{name}")
    raise AttributeError(f"module 'torchport.compat' has no attribute {name!r} (it serves the torch.cuda names in "
                         "torchport.shim.compat.CUDA_NAMES, DataParallel and restore_location)")


def __dir__() -> list[str]:
    return sorted({*globals(), *CUDA_NAMES})


def DataParallel(module: Any, device_ids: Any = None, output_device: Any = None, dim: int = 0) -> Any:  # noqa: N802
    """``torch.nn.DataParallel(module, ...)`` where the selected backend runs it; elsewhere the one-device
    DataParallel ``torchport run`` builds (forward calls ``module``; ``.module``, ``device_ids == []`` and the
    ``module.``-prefixed ``state_dict`` keys are DataParallel's own).

    Example::

        model = torchport.compat.DataParallel(model)       # was: nn.DataParallel(model)
        torch.save(model.state_dict(), "model.pt")         # keys "module.*", as the original wrote them
    """
    import torch

    shim, _ = _host()
    dp_cls = torch.nn.DataParallel
    if shim.target.backend.data_parallel:
        return dp_cls(module, device_ids, output_device, dim)  # noqa: TP303 (the backend runs DataParallel)
    from torchport.shim._redirects import data_patches

    init = next(fn for owner, name, fn, _ in data_patches(shim) if owner is dp_cls and name == "__init__")
    wrapper = dp_cls.__new__(dp_cls)
    init(wrapper, module, device_ids, output_device, dim)
    return wrapper


def restore_location(storage: Any, location: str) -> Any:
    """A ``torch.load`` ``map_location`` that loads like ``torchport run``: a storage saved on ``cuda[:N]`` lands
    on device ``N`` of the selected backend (the CPU on a CPU host); any other is restored where torch restores
    it (returns None). On a CUDA machine that is where the checkpoint was saved, as without ``map_location``.

    Example::

        state = torch.load("ckpt.pt", map_location=torchport.compat.restore_location)
    """
    from torchport.shim._redirects import restore_cuda_storage

    return restore_cuda_storage(_host()[0].map, storage, location)


#: ``torchport.compat`` (the package façade's lazy export) is this module
compat = sys.modules[__name__]
