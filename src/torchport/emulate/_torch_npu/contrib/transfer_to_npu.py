"""``from torch_npu.contrib import transfer_to_npu`` on the emulated NPU.

torch_npu's module rewrites a CUDA script onto the NPU at import time. Here the same
import installs torchport's CUDA shim aimed at ``npu`` (device arguments of factories,
``Tensor.to``/``.cuda()``, ``Module.to``/``.cuda()``, ``torch.load(map_location=...)``,
AMP, ``init_process_group("nccl")``, DDP ``device_ids``, ``torch.cuda.*`` -- each counted
in the shim's redirect report, ``torchport.shim.report()``) and adds what torch_npu's
version does on top of that:

* ``torch.Tensor.is_cuda`` is ``torch.Tensor.is_npu`` (and ``TypedStorage.is_cuda``);
* ``torch.distributed.is_nccl_available`` is ``is_hccl_available``;
* ``torch.cuda.DoubleTensor`` is ``torch.npu.FloatTensor``;
* ``torch.jit.script`` / ``script_method`` return their argument (with torch_npu's
  RuntimeWarning), unless ``TORCHPORT_TRANSFER_JIT=1``;
* ``torch.Generator("cuda")`` makes an npu generator.

Like torch_npu's, it is not undone at exit; ``torchport.shim.uninstall()`` undoes all of it.
"""

import warnings

import torch

import torch_npu  # noqa: F401  (as torch_npu's module does)
import torchport.shim as _shim

__torchport_emulated__ = True
__all__ = []

_JIT_MESSAGE = ("torch.jit.script and torch.jit.script_method will be disabled by transfer_to_npu, "
                "which currently does not support them. If you need to enable them, "
                "please do not use transfer_to_npu.")


def _jit_script(obj, *args, **kwargs):
    return obj


def _jit_script_method(fn):
    return fn


def _is_hccl_available() -> bool:
    return torch.npu.is_available()


class _GeneratorMeta(type(torch.Generator)):
    def __instancecheck__(cls, instance):
        return isinstance(instance, cls.__mro__[1])


_RealGenerator = torch.Generator


class _GeneratorProxy(_RealGenerator, metaclass=_GeneratorMeta):
    def __new__(cls, device="cpu"):
        if isinstance(device, str) and "cuda" in device:
            device = device.replace("cuda", "npu")
        elif isinstance(device, torch.device) and device.type == "cuda":
            device = torch.device("npu", device.index) if device.index is not None else torch.device("npu")
        return _RealGenerator(device)


def _init() -> None:
    shim = _shim.install(device="npu")
    table = shim._table
    already = {(id(p.owner), p.name) for p in table}

    def patch(owner, name, value, api):
        if (id(owner), name) not in already:
            table.apply(owner, name, value, api=api)

    patch(torch.Tensor, "is_cuda", torch.Tensor.is_npu, "torch.Tensor.is_cuda")
    if hasattr(torch.storage.TypedStorage, "is_npu"):
        patch(torch.storage.TypedStorage, "is_cuda", torch.storage.TypedStorage.is_npu,
              "torch.storage.TypedStorage.is_cuda")
    import torch.distributed as dist

    if not hasattr(dist, "is_hccl_available"):
        patch(dist, "is_hccl_available", _is_hccl_available, "torch.distributed.is_hccl_available")
    patch(dist, "is_nccl_available", dist.is_hccl_available, "torch.distributed.is_nccl_available")
    if hasattr(torch.npu, "FloatTensor"):
        patch(torch.cuda, "DoubleTensor", torch.npu.FloatTensor, "torch.cuda.DoubleTensor")
    patch(torch, "Generator", _GeneratorProxy, "torch.Generator")
    import os

    if os.environ.get("TORCHPORT_TRANSFER_JIT") != "1":
        warnings.warn(_JIT_MESSAGE, RuntimeWarning)
        patch(torch.jit, "script", _jit_script, "torch.jit.script")
        patch(torch.jit, "script_method", _jit_script_method, "torch.jit.script_method")
    shim.report.note("installed by `from torch_npu.contrib import transfer_to_npu` (torchport emulated NPU)")


_init()
