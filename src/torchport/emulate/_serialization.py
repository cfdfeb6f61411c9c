"""Checkpoints like hardware: npu tensors are saved with storage location ``npu:N``.

Saving: :meth:`NpuTensor.__reduce_ex__` pickles a tensor exactly like a real NPU
tensor (``torch._utils._rebuild_tensor_v2`` over a storage); the location tagger
registered here names that storage ``npu:N``.

Loading (emulator installed): the deserializer registered here accepts ``npu`` /
``npu:N`` locations and marks the host storage, and the rebuilt tensor is wrapped
onto the emulated device. This works with ``weights_only=True`` because only
torch's own allow-listed rebuild functions appear in the pickle.

Without the emulator, torch has no deserializer for ``npu:N`` and ``torch.load``
fails exactly as it does for a real NPU checkpoint without torch_npu, unless a
``map_location`` is given.

Between processes (``torch.multiprocessing``, e.g. Hogwild training on a ``share_memory()`` model):
an npu tensor travels as its host tensor -- shared memory, as torch shares CPU tensors -- plus its
device index, and the receiving process (emulator installed, e.g. by ``TORCHPORT_EMULATE``) wraps
it back onto the same emulated device, so in-place updates in either process are seen by both.
"""

from __future__ import annotations

import collections
import re
from typing import Any

import torch
import torch.serialization as _ser

from torchport.emulate import _tensor as T
from torchport.emulate._state import STATE

__all__ = ["install", "uninstall"]

_PRIORITY = 5  # before the CPU tagger (10): our storages live in host memory
_LOCATION = re.compile(r"^npu(:(\d+))?$")
_saved: dict[str, Any] = {}


def _tag(storage: Any) -> str | None:
    idx = getattr(storage, "_torchport_npu", None)
    if idx is None or not STATE.installed:
        return None
    return f"npu:{idx}"


def _restore(storage: Any, location: str) -> Any:
    m = _LOCATION.match(location)
    if m is None or not STATE.installed:
        return None
    idx = int(m.group(2) or STATE.current)
    if idx >= STATE.devices:
        raise RuntimeError(
            f"Attempting to deserialize object on NPU device {idx} but torch.npu.device_count() is "
            f"{STATE.devices}. Please use torch.load with map_location to map your storages to an existing device."
        )
    storage._torchport_restore = idx
    return storage


def _rebuild_tensor(storage: Any, storage_offset: int, size: Any, stride: Any) -> torch.Tensor:
    t = _saved["_rebuild_tensor"](storage, storage_offset, size, stride)
    untyped = getattr(storage, "_untyped_storage", storage)
    idx = getattr(untyped, "_torchport_restore", None)
    if idx is not None and STATE.installed:
        return T.wrap(t, idx)
    return t


def _reduce_for_ipc(t: "T.NpuTensor") -> tuple:
    """``ForkingPickler`` reducer: the host tensor (shared by torch's own reducer) and the device index."""
    return (_rebuild_from_ipc, (t._elem, t._idx, t.requires_grad, bool(getattr(t, "_is_param", False))))


def _rebuild_from_ipc(elem: torch.Tensor, idx: int, requires_grad: bool, is_param: bool) -> torch.Tensor:
    if not STATE.installed:
        raise RuntimeError("received a tensor on an emulated NPU in a process without the emulator; "
                           "set TORCHPORT_EMULATE=npu for the child processes too")
    t = T.wrap(elem, idx)
    if is_param:
        return torch._utils._rebuild_parameter(t, requires_grad, collections.OrderedDict())
    return t.requires_grad_(requires_grad) if requires_grad else t


def install() -> None:
    """Register the ``npu`` location tagger/deserializer, the rebuild hook and the IPC reducer."""
    if _saved:
        return
    from multiprocessing.reduction import ForkingPickler

    _saved["_rebuild_tensor"] = torch._utils._rebuild_tensor
    torch._utils._rebuild_tensor = _rebuild_tensor
    _ser.register_package(_PRIORITY, _tag, _restore)
    ForkingPickler.register(T.NpuTensor, _reduce_for_ipc)


def uninstall() -> None:
    """Undo :func:`install` (the registry entry and the rebuild hook)."""
    if not _saved:
        return
    from multiprocessing.reduction import ForkingPickler

    torch._utils._rebuild_tensor = _saved.pop("_rebuild_tensor")
    _ser._package_registry[:] = [e for e in _ser._package_registry if e[1] is not _tag]
    ForkingPickler._extra_reducers.pop(T.NpuTensor, None)
