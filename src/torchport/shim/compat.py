"""``torchport.compat``: what ``torchport run`` does for a CUDA-only call, as a call a fixed file can make.

``torchport fix`` rewrites most CUDA-only lines into portable code (``torchport.device()``,
``torchport.autocast()`` ...). Some lines have no portable spelling that keeps
what the line does -- ``with torch.cuda.device(i):``, ``torch.cuda.memory_summary()``,
``torch.cuda.set_per_process_memory_fraction(f)``, ``nn.DataParallel(model)`` on a backend without
DataParallel, a ``torch.load`` of a checkpoint saved on a GPU. For those the fix writes a call into this
module, which reaches the **very implementation** the shim installs under ``torchport run``; so the fixed
file and the original under ``run`` agree by construction, and on a CUDA machine each name *is* torch's own
(the shim redirects nothing there), so the rewrite is safe where the code was written::

    with torchport.compat.device(gpu):          # was: with torch.cuda.device(gpu):
        ...
    print(torchport.compat.memory_summary())    # was: print(torch.cuda.memory_summary())
    torchport.compat.memory._record_memory_history()      # was: torch.cuda.memory._record_memory_history()
    torchport.compat.backends.cuda.cublas_workspace_size()  # was: torch.backends.cuda.cublas_workspace_size()
    model = torchport.compat.DataParallel(model)                   # was: nn.DataParallel(model)
    state = torch.load(path, map_location=torchport.compat.restore_location)   # was: torch.load(path)

What each name is:

* ``torchport.compat.<path>`` for every name the CUDA-surface registry serves
  (:func:`torchport.shim.surface.served`, at :func:`~torchport.shim.surface.compat_path`): ``torch.cuda.<name>``
  -- and ``torch.cuda.memory.*``, ``torch.cuda.nvtx.*``, ``torch.cuda.amp.*``, ``torch.backends.cuda.*`` -- as
  ``run`` answers *user code* (:func:`torchport.shim.surface.standin`): on the selected backend's device
  module (``torch.npu.memory_summary`` ...), with the shim's documented stand-ins elsewhere, refused in the
  same one line where ``run`` refuses. Device indices follow torchport's selection:
  ``torchport.compat.set_device(1)`` and ``with torchport.compat.device(1):`` move ``torchport.device()`` as
  well (what ``"cuda"`` means under ``run``).
* :func:`DataParallel` -- ``torch.nn.DataParallel`` where the backend runs it (CUDA); elsewhere the
  one-device DataParallel the shim builds: the same object type, ``.module``, ``module.``-prefixed
  ``state_dict`` keys (a checkpoint of the original loads strictly, and the other way round).
* :func:`restore_location` -- a ``map_location`` that restores storages saved on ``cuda[:N]`` where
  ``run`` does (device ``N`` of the selected backend; the CPU on a CPU host) and every other storage where
  torch would (CPU-saved tensors stay on the CPU).

The set of names (:data:`CUDA_NAMES`, :func:`served`) is torch-free, because ``torchport scan`` / ``fix`` read
it without importing torch. Nothing here patches anything: calling ``torchport.compat.memory_summary()`` does
not install the shim.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Mapping

from torchport.shim import surface

__all__ = ["CUDA_NAMES", "implementations", "DataParallel", "restore_location", "served"]

#: ``torch.cuda`` names this module serves at its top level (``torchport.compat.<name>``)
CUDA_NAMES: frozenset[str] = frozenset(surface.compat_path(q) for q in surface.served()
                                       if "." not in surface.compat_path(q))
#: what else ``torchport.compat`` has (not ``torch.cuda`` names)
EXTRAS = ("DataParallel", "restore_location")

_lock = threading.Lock()
#: (backend name, its record, its device module) -> the (not installed) shim DataParallel / restore_location use
_built: dict[tuple[str, int, int], Any] = {}


def served(path: str) -> bool:
    """True when ``torchport.compat.<path>`` exists: ``path`` is a ``torch.cuda`` attribute (``"memory_summary"``,
    ``"memory._snapshot"``, ``"nvtx.range_push"``), ``"backends.cuda.<name>"``, or one of the extras."""
    return path in EXTRAS or surface.qualname_of(path) in surface.served()


def _host() -> Any:
    """The (not installed) shim for the selected backend, built once per backend: its device map follows
    torchport's selection."""
    from torchport.runtime.device import current

    target = current()
    key = (target.backend.name, id(target.backend), id(target.module))  # an emulator installed anew: built anew
    with _lock:
        shim = _built.get(key)
        if shim is None:
            from torchport.shim._mapping import FollowingMap
            from torchport.shim.core import Shim, _dist_backend

            shim = Shim(target)
            shim.map = FollowingMap(target, _dist_backend(target))
            _built[key] = shim
        return shim


def implementations() -> Mapping[str, Callable[..., Any]]:
    """``{torch.cuda name: implementation}`` for the selected backend (the names of :data:`CUDA_NAMES`)."""
    from torchport.shim._cuda_api import implementations as by_qualname

    impls = by_qualname()
    return {surface.compat_path(q): fn for q, fn in impls.items() if surface.compat_path(q) in CUDA_NAMES}


class _Namespace:
    """``torchport.compat.memory`` / ``.nvtx`` / ``.amp`` / ``.backends.cuda``: served names below a prefix."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> Any:
        return _lookup(f"{self._path}.{name}")

    def __dir__(self) -> list[str]:
        prefix = self._path + "."
        return sorted({surface.compat_path(q)[len(prefix):].split(".")[0] for q in surface.served()
                       if surface.compat_path(q).startswith(prefix)})

    def __repr__(self) -> str:
        return f"<torchport.compat.{self._path}>"


def _lookup(path: str) -> Any:
    qual = surface.qualname_of(path)
    if qual in surface.served():
        return surface.standin(qual)
    prefix = path + "."
    if any(surface.compat_path(q).startswith(prefix) for q in surface.served()):
        return _Namespace(path)
    raise AttributeError(f"torchport.compat has no {path!r}: it serves the torch.cuda names that "
                         "torchport.shim.surface.served() lists (at compat_path), DataParallel and restore_location")


def __getattr__(name: str) -> Any:
    return _lookup(name)


def __dir__() -> list[str]:
    return sorted({*globals(), *(surface.compat_path(q).split(".")[0] for q in surface.served())})


def DataParallel(module: Any, device_ids: Any = None, output_device: Any = None, dim: int = 0) -> Any:  # noqa: N802
    """``torch.nn.DataParallel(module, ...)`` where the selected backend runs it; elsewhere the one-device
    DataParallel ``torchport run`` builds (forward calls ``module``; ``.module``, ``device_ids == []`` and the
    ``module.``-prefixed ``state_dict`` keys are DataParallel's own).

    Example::

        model = torchport.compat.DataParallel(model)       # was: nn.DataParallel(model)
        torch.save(model.state_dict(), "model.pt")         # keys "module.*", as the original wrote them
    """
    import torch

    shim = _host()
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

    return restore_cuda_storage(_host().map, storage, location)


#: ``torchport.compat`` (the package façade's lazy export) is this module
compat = sys.modules[__name__]
