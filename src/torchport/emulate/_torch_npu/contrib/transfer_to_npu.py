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
* ``torch.Generator("cuda")`` makes an npu generator, and so ``torch.Event("cuda")`` an npu event;
* ``torch.get_device_module("cuda")`` is ``torch.npu``; ``torch.fft.fftfreq``/``rfftfreq`` and
  ``torch.sparse_compressed_tensor`` take ``device="cuda"``;
* ``torch.cuda.amp`` is ``torch.npu.amp`` (with ``autocast_mode``, ``grad_scaler``, ``common``);
  ``torch.cuda.default_generators``, ``utilization``, ``set_per_process_memory_fraction``,
  ``caching_allocator_alloc``/``_delete`` and ``torch.cuda.memory._record_memory_history``/``_snapshot``
  are the npu ones (a ``"cuda"`` device argument names the npu);
* ``torch._C._host_emptyCache`` is ``torch_npu._C._npu_hostEmptyCache``; profiler ``Kernel`` rows say
  ``npu`` where they said ``cuda``.

Like torch_npu's, it is not undone at exit; ``torchport.shim.uninstall()`` undoes all of it.
"""

import functools
import json
import logging
import os
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
_RealEvent = torch.Event


class _GeneratorProxy(_RealGenerator, metaclass=_GeneratorMeta):
    def __new__(cls, device="cpu"):
        if isinstance(device, str) and "cuda" in device:
            device = device.replace("cuda", "npu")
        elif isinstance(device, torch.device) and device.type == "cuda":
            device = torch.device("npu", device.index) if device.index is not None else torch.device("npu")
        return _RealGenerator(device)


class _EventProxy(_RealEvent, metaclass=_GeneratorMeta):
    def __new__(cls, device=None, *args, **kwargs):
        return _RealEvent(_to_npu(device), *args, **kwargs)


def _to_npu(device):
    """A ``"cuda"``/``"cuda:N"``/``torch.device("cuda", N)`` argument names the npu; anything else as given."""
    if isinstance(device, str) and device.startswith("cuda"):
        return device.replace("cuda", "npu", 1)
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("npu", device.index) if device.index is not None else torch.device("npu")
    return device


def _device_args(fn, positions=(), keyword="device"):
    """``fn`` with its device argument (at ``positions`` or ``keyword=``) mapped by :func:`_to_npu`."""
    def wrapper(*args, **kwargs):
        if keyword in kwargs:
            kwargs[keyword] = _to_npu(kwargs[keyword])
        args = tuple(_to_npu(a) if i in positions else a for i, a in enumerate(args))
        return fn(*args, **kwargs)

    wrapper.__wrapped__ = fn
    wrapper.__name__ = getattr(fn, "__name__", "wrapper")
    wrapper.__doc__ = f"[torch_npu transfer_to_npu] device 'cuda' means npu.\n\n{fn.__doc__ or ''}"
    return wrapper


# -- torch_npu's module-level helpers (private there; its own tests call them, so they behave alike here)
def _del_nccl_device_backend_map() -> None:
    """Drop ``"cuda"`` from ``torch.distributed.Backend.default_device_backend_map`` (the npu entry serves)."""
    import torch.distributed as dist

    backend_map = getattr(dist.Backend, "default_device_backend_map", None)
    if isinstance(backend_map, dict):
        backend_map.pop("cuda", None)


def _check_input_file_valid(path: str, max_size: int = 10 * 1024 ** 2) -> bool:
    """An existing, readable, not symlinked file with a name under 200 characters and at most 10 MiB."""
    if os.path.islink(path):
        return False
    path = os.path.realpath(path)
    if not os.path.exists(path) or not os.access(path, os.R_OK):
        return False
    return len(os.path.basename(path)) <= 200 and os.path.getsize(path) <= max_size


def _load_json_file(path: str) -> dict:
    """The JSON object at ``path``; {} when the file is not valid or does not hold an object."""
    if not _check_input_file_valid(path):
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _replace_cuda_to_npu_in_dict(data: dict) -> dict:
    """Keys and string values with ``cuda`` spelled ``npu``."""
    return {k.replace("cuda", "npu") if isinstance(k, str) else k:
            v.replace("cuda", "npu") if isinstance(v, str) else v for k, v in data.items()}


def _map_cuda_value(value):
    if isinstance(value, (list, tuple)):
        return type(value)(_map_cuda_value(v) for v in value)
    return _to_npu(value)


def _wrapper_cuda(fn):
    """``fn`` with every ``cuda`` device argument (also in ``device_ids`` lists) naming the npu."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = tuple(_map_cuda_value(a) for a in args)
        kwargs = {k: _map_cuda_value(v) for k, v in kwargs.items()}
        return fn(*args, **kwargs)

    return wrapper


def _wrapper_hccl(fn):
    """``fn`` with ``"nccl"`` arguments (and ``backend=``) naming ``"hccl"``."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = tuple("hccl" if a == "nccl" else a for a in args)
        if kwargs.get("backend") == "nccl":
            kwargs["backend"] = "hccl"
        return fn(*args, **kwargs)

    return wrapper


def _wrapper_libraries_func(fn):
    """Run ``fn`` (a third-party library's function) seeing no CUDA: ``torch.cuda.is_available()`` is False."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        saved = torch.cuda.is_available
        torch.cuda.is_available = lambda: False
        try:
            return fn(*args, **kwargs)
        finally:
            torch.cuda.is_available = saved

    return wrapper


def _wrapper_profiler(fn):
    """Drop an ``experimental_config`` that is not ``torch_npu.profiler._ExperimentalConfig`` (with a warning)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        config = kwargs.get("experimental_config")
        if config is not None and not isinstance(config, torch_npu.profiler._ExperimentalConfig):
            logging.warning("The parameter experimental_config of torch.profiler.profile has been deleted by "
                            "transfer_to_npu: it must be torch_npu.profiler._ExperimentalConfig.")
            del kwargs["experimental_config"]
        return fn(*args, **kwargs)

    return wrapper


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
    patch(torch, "Event", _EventProxy, "torch.Event")
    patch(torch, "get_device_module", _device_args(torch.get_device_module, (0,)), "torch.get_device_module")
    for name in ("fftfreq", "rfftfreq"):
        patch(torch.fft, name, _device_args(getattr(torch.fft, name)), f"torch.fft.{name}")
    patch(torch, "sparse_compressed_tensor", _device_args(torch.sparse_compressed_tensor),
          "torch.sparse_compressed_tensor")
    import torch_npu.npu.amp.autocast_mode  # noqa: F401  (torch.cuda.amp.<submodule> names them)
    import torch_npu.npu.amp.common  # noqa: F401
    import torch_npu.npu.amp.grad_scaler  # noqa: F401

    patch(torch.cuda, "amp", torch.npu.amp, "torch.cuda.amp")
    patch(torch.cuda, "default_generators", torch.npu.default_generators, "torch.cuda.default_generators")
    patch(torch.cuda, "utilization", _device_args(torch.npu.utilization, (0,)), "torch.cuda.utilization")
    patch(torch.cuda, "set_per_process_memory_fraction",
          _device_args(torch.npu.set_per_process_memory_fraction, (1,)), "torch.cuda.set_per_process_memory_fraction")
    patch(torch.cuda, "caching_allocator_alloc", _device_args(torch.npu.caching_allocator_alloc, (1,)),
          "torch.cuda.caching_allocator_alloc")
    patch(torch.cuda, "caching_allocator_delete", torch.npu.caching_allocator_delete,
          "torch.cuda.caching_allocator_delete")
    from torch_npu.npu import memory as npu_memory

    patch(torch.cuda.memory, "_record_memory_history", _device_args(npu_memory._record_memory_history),
          "torch.cuda.memory._record_memory_history")
    patch(torch.cuda.memory, "_snapshot", _device_args(npu_memory._snapshot), "torch.cuda.memory._snapshot")
    from torch.autograd import profiler_util

    kernel = profiler_util.Kernel

    class Kernel(kernel):  # profiler rows name the device the kernel ran on
        __slots__ = ()

        def __new__(cls, name, device, duration):
            return kernel.__new__(cls, name, "npu" if device == "cuda" else device, duration)

    patch(profiler_util, "Kernel", Kernel, "torch.autograd.profiler_util.Kernel")
    from torch_npu import _C

    patch(torch._C, "_host_emptyCache", _C._npu_hostEmptyCache, "torch._C._host_emptyCache")
    if os.environ.get("TORCHPORT_TRANSFER_JIT") != "1":
        warnings.warn(_JIT_MESSAGE, RuntimeWarning)
        patch(torch.jit, "script", _jit_script, "torch.jit.script")
        patch(torch.jit, "script_method", _jit_script_method, "torch.jit.script_method")
    shim.report.note("installed by `from torch_npu.contrib import transfer_to_npu` (torchport emulated NPU)")


_init()
