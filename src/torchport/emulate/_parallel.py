"""``torch.nn.DataParallel`` across emulated npus: the five ``torch.nn.parallel.comm`` primitives.

torch implements them in C++ for CUDA only (``torch._C._broadcast_coalesced``, ``_scatter``,
``_gather``); DataParallel on another device type reaches them and fails with a CUDA driver error.
torch_npu replaces those C++ entry points with NPU ones (``initCommMethods`` in its ``Module.cpp``),
so on the card a CPU tensor scatters to npus too (DataParallel's input, and the backward of a gather
to the CPU). While the emulator is installed, ``comm``'s functions take npu tensors -- and host
tensors bound for npus -- through plain device copies (host memory: a copy is a memcpy) and hand
anything else to torch's own implementation.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.parallel.comm as comm

__all__ = ["install", "uninstall"]

_NAMES = ("broadcast_coalesced", "scatter", "gather", "reduce_add", "reduce_add_coalesced")
_saved: dict[str, Any] = {}


def _npu(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "npu"


def _to_npus(devices: Any, streams: Any) -> bool:
    """True when a host tensor's targets are npus: named so, given npu streams (DataParallel's
    ``Scatter`` passes the accelerator's streams), or bare indices on a host whose DataParallel
    device type is npu (what torch_npu's ``_scatter`` assumes of every index)."""
    if any(getattr(getattr(s, "device", None), "type", None) == "npu" for s in streams or ()):
        return True
    if any(not isinstance(d, int) for d in devices or ()):
        return all(not isinstance(d, int) and torch.device(d).type == "npu" for d in devices)
    from torch._utils import _get_available_device_type

    return bool(devices) and _get_available_device_type() == "npu"


def _device(d: Any) -> torch.device:
    if isinstance(d, torch.device):
        return d
    if isinstance(d, int):
        return torch.device("npu", d)
    return torch.device(d)


def broadcast_coalesced(tensors: Any, devices: Any, buffer_size: int = 10485760) -> Any:
    if not tensors or not all(_npu(t) for t in tensors):
        return _saved["broadcast_coalesced"](tensors, devices, buffer_size)
    return [[t.to(_device(d)) for t in tensors] for d in devices]


def scatter(tensor: Any, devices: Any = None, chunk_sizes: Any = None, dim: int = 0, streams: Any = None,
            *, out: Any = None) -> Any:
    if out is not None or not (_npu(tensor) or (isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu"
                                                 and _to_npus(devices, streams))):
        return _saved["scatter"](tensor, devices, chunk_sizes, dim, streams, out=out)
    chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes is not None else tensor.chunk(len(devices), dim)
    return tuple(c.to(_device(d)).contiguous() for c, d in zip(chunks, devices))


def gather(tensors: Any, dim: int = 0, destination: Any = None, *, out: Any = None) -> Any:
    if not tensors or not all(_npu(t) for t in tensors) or out is not None:
        return _saved["gather"](tensors, dim, destination, out=out)
    if destination is None:  # torch: the current device
        dest = torch.device("npu", torch.npu.current_device())
    else:
        dest = torch.device("cpu") if destination == -1 else _device(destination)
    return torch.cat([t.to(dest) for t in tensors], dim)


def reduce_add(inputs: Any, destination: Any = None) -> Any:
    if not inputs or not all(_npu(t) for t in inputs):
        return _saved["reduce_add"](inputs, destination)
    dest = _device(destination) if destination is not None else inputs[0].device
    out = inputs[0].to(dest, copy=True)
    for t in inputs[1:]:
        out.add_(t.to(dest))
    return out


def reduce_add_coalesced(inputs: Any, destination: Any = None, buffer_size: int = 10485760) -> Any:
    flat = [t for ts in inputs for t in ts]
    if not flat or not all(_npu(t) for t in flat):
        return _saved["reduce_add_coalesced"](inputs, destination, buffer_size)
    return [reduce_add(list(ts), destination) for ts in zip(*inputs)]


def install() -> None:
    """Route ``torch.nn.parallel.comm``'s primitives through this module (npu tensors only)."""
    if _saved:
        return
    for name in _NAMES:
        _saved[name] = getattr(comm, name)
        setattr(comm, name, globals()[name])


def uninstall() -> None:
    """Put torch's own primitives back."""
    for name, fn in list(_saved.items()):
        setattr(comm, name, fn)
        del _saved[name]
