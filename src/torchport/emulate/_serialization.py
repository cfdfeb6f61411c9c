"""npu tensors between processes (``torch.multiprocessing``, e.g. Hogwild training on a ``share_memory()`` model).

Checkpoints need nothing here: npu tensors are plain tensors of the PrivateUse1 device, so
``torch.save`` tags their storages ``npu:N`` and ``torch.load`` (``weights_only`` included, with or
without ``map_location``) restores them through torch's own privateuse1 serialization path, exactly
as with torch_npu. Without the emulator, ``torch.load`` of such a file fails as it does for a real
NPU checkpoint without torch_npu, unless a ``map_location`` is given.

The legacy (non-zip) format is refused for npu storages, as on the card: ``torch.save(npu_tensor, f,
_use_new_zipfile_serialization=False)`` writes each storage with ``UntypedStorage._write_file``, which
torch_npu runs over a plain ``from_blob`` storage and rejects ("The npu storage desc is unavailable: the
tensor's storage is not an NPUStorageImpl."). Plain ``pickle.dumps`` of an npu tensor takes that path too
(``TypedStorage.__reduce__``) and is refused alike. Legacy files of CPU tensors still load onto the npu.

Between processes an npu tensor travels as its host bytes -- moved into shared memory the first
time, as torch does for CPU tensors, and adopted back by the npu storage, so both processes see one
buffer -- plus its device index; the receiving process (emulator installed, e.g. by
``TORCHPORT_EMULATE``) adopts the buffer onto the same emulated device (no copy), so in-place updates
in either process are seen by both.
"""

from __future__ import annotations

import collections
from typing import Any

import torch

from torchport.emulate import _tensor as T
from torchport.emulate._state import STATE

__all__ = ["install", "uninstall"]

_saved: dict[Any, Any] = {}


def _reduce(t: torch.Tensor) -> tuple:
    """``ForkingPickler`` reducer: npu tensors as shared host bytes + device index; others as torch does."""
    if t.device.type != "npu" or not STATE.installed:
        return _saved[type(t) if type(t) in _saved else torch.Tensor](t)
    host = T.host(t)
    if not host.untyped_storage().is_shared():
        host.untyped_storage().share_memory_()
        STATE.native.adopt_into(t, host)  # the npu storage now owns the shared buffer
        host = T.host(t)
    host = host.detach()
    return (_rebuild_from_ipc, (host, t.device.index, t.requires_grad, isinstance(t, torch.nn.Parameter)))


def _rebuild_from_ipc(host: torch.Tensor, idx: int, requires_grad: bool, is_param: bool) -> torch.Tensor:
    if not STATE.installed:
        raise RuntimeError("received a tensor on an emulated NPU in a process without the emulator; "
                           "set TORCHPORT_EMULATE=npu for the child processes too")
    t = T.adopt(host, idx)
    if is_param:
        return torch._utils._rebuild_parameter(t, requires_grad, collections.OrderedDict())
    return t.requires_grad_(requires_grad) if requires_grad else t


#: torch_npu's message (NPUBridge::GetNpuStorageImplDesc) for a legacy save of an npu storage
LEGACY_SAVE_MESSAGE = "The npu storage desc is unavailable: the tensor's storage is not an NPUStorageImpl."


def _write_file(self: torch.UntypedStorage, *args: Any, **kwargs: Any) -> Any:
    """``UntypedStorage._write_file`` (legacy ``torch.save``): refused for npu storages, as on the card."""
    if self.device.type == "npu":
        raise RuntimeError(LEGACY_SAVE_MESSAGE)
    return torch._C.StorageBase._write_file(self, *args, **kwargs)


def install() -> None:
    """Route npu tensors through :func:`_reduce` in multiprocessing pickling; refuse legacy saves of npu storages."""
    if _saved:
        return
    import torch.multiprocessing  # noqa: F401  (registers torch's own reducers first)

    _saved["_write_file"] = True
    torch.UntypedStorage._write_file = _write_file
    from multiprocessing.reduction import ForkingPickler

    for cls in (torch.Tensor, torch.nn.Parameter):
        _saved[cls] = ForkingPickler._extra_reducers[cls]
        ForkingPickler.register(cls, _reduce)


def uninstall() -> None:
    """Put torch's reducers back."""
    from multiprocessing.reduction import ForkingPickler

    if _saved.pop("_write_file", None) and vars(torch.UntypedStorage).get("_write_file") is _write_file:
        del torch.UntypedStorage._write_file
    for cls, reducer in list(_saved.items()):
        ForkingPickler.register(cls, reducer)
        del _saved[cls]
