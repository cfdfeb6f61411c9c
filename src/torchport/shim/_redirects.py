"""Wrappers that rewrite CUDA device arguments outside ``torch.cuda``.

Every function here returns ``[(owner, attribute, replacement, api), ...]`` for the
patch table. Wrappers look at their arguments, rewrite only CUDA ones
(:class:`~torchport.shim._mapping.DeviceMap`), count the rewrite in the report, and
call the original. Arguments that are not CUDA pass through untouched, so a library
that runs on the CPU keeps running on the CPU.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

__all__ = ["FACTORIES", "TENSOR_NEW", "factory_patches", "tensor_patches", "module_patches", "amp_patches",
           "load_patches", "restore_cuda_storage", "distributed_patches", "data_patches"]

#: ``torch.<name>`` tensor factories whose ``device=`` keyword is rewritten.
FACTORIES = (
    "tensor", "as_tensor", "asarray", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm",
    "arange", "range", "linspace", "logspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like",
    "rand_like", "randn_like", "randint_like", "empty_strided", "empty_permuted", "normal", "scalar_tensor",
    "tril_indices", "triu_indices", "sparse_coo_tensor", "sparse_csr_tensor", "bartlett_window",
    "blackman_window", "hamming_window", "hann_window", "kaiser_window",
)
#: ``torch.Tensor.<name>`` methods whose ``device=`` keyword is rewritten.
TENSOR_NEW = ("new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "new_empty_strided")

Patches = list  # of (owner, name, replacement, api)


def _named(wrapper: Callable, original: Callable, doc_note: str) -> Callable:
    """Copy name and docstring from ``original`` (``__wrapped__`` points at it) and add a note."""
    functools.update_wrapper(wrapper, original)
    wrapper.__doc__ = f"[torchport shim] {doc_note}\n\n{original.__doc__ or ''}"
    wrapper.__module__ = __name__
    return wrapper


def factory_patches(shim: Any) -> Patches:
    """``torch.zeros(..., device="cuda")`` and friends, plus ``torch.set_default_device``."""
    import torch
    from torch.utils import _device

    # `with torch.device(...)` recognises factories by identity in a set torch caches on first use;
    # fill it with torch's own functions before they are wrapped, or the context is silently ignored
    _device._device_constructors()
    dm, hit = shim.map, shim.hit
    out: Patches = []

    records, dmap = shim.report.records, dm.map

    def make(original: Callable, api: str) -> Callable:
        def factory(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                dev = kwargs.get("device")
                if dev is not None:
                    new = dmap(dev, True)
                    if new is not dev:
                        kwargs["device"] = new
                        rec = records.get(api)
                        if rec is None:
                            hit(api, dev, new)
                        else:
                            rec.count += 1
            return original(*args, **kwargs)

        return _named(factory, original, "device='cuda...' is redirected to the selected device.")

    for name in FACTORIES:
        original = vars(torch).get(name)
        if original is not None:
            out.append((torch, name, make(original, f"torch.{name}"), f"torch.{name}"))

    ctx_init = _device.DeviceContext.__init__

    def device_context_init(self: Any, device: Any) -> None:  # `with torch.device("cuda"):`
        new = dm.map(device, True)
        if new is not device:
            hit("torch.device.__enter__", device, new)
        ctx_init(self, new)

    out.append((_device.DeviceContext, "__init__", _named(device_context_init, ctx_init, "CUDA -> selected device."),
                "torch.device.__enter__"))

    set_default = vars(torch).get("set_default_device")
    if set_default is not None:
        def set_default_device(device: Any) -> None:
            new = dm.map(device, True)
            if new is not device:
                hit("torch.set_default_device", device, new)
            return set_default(new)

        out.append((torch, "set_default_device", _named(set_default_device, set_default, "CUDA -> selected device."),
                    "torch.set_default_device"))
    return out


def _subclasses(cls: type) -> list[type]:
    """Every subclass of ``cls`` defined so far, depth first, each once."""
    seen: list[type] = []
    stack = list(cls.__subclasses__())
    while stack:
        sub = stack.pop()
        if sub not in seen:
            seen.append(sub)
            stack.extend(sub.__subclasses__())
    return seen


def is_cuda_property(shim: Any, real: Any) -> property:
    """``Tensor.is_cuda`` under the shim: for user code, "on the device CUDA code is redirected to".

    The one meaning torchport gives ``is_cuda`` (the fixer writes the same test,
    ``x.device.type == torchport.current().type``): True for tensors on the selected
    device's type, so ``assert images.is_cuda`` after ``images.cuda()`` holds on an NPU
    and on the CPU fallback. Installed libraries and torch itself read the real
    attribute (a library branching on ``is_cuda`` must not launch CUDA kernels).
    torch_npu's ``transfer_to_npu`` sets ``Tensor.is_cuda = Tensor.is_npu`` for everyone.
    """
    device_type = shim.target.type
    is_user = shim.classifier.is_user_file
    getter = real.__get__
    hit = shim.hit

    def is_cuda(self: Any) -> bool:
        real_answer = getter(self)
        if is_user(sys._getframe(1).f_code.co_filename):
            answer = self.device.type == device_type
            if answer != real_answer:
                hit("torch.Tensor.is_cuda", "is_cuda", f"{answer} ({self.device.type} tensor)")
            return answer
        return real_answer

    return property(is_cuda, doc="[torchport shim] True for user code when the tensor is on the selected device "
                                 "type; the real attribute for libraries (see docs/shim.md).")


def tensor_patches(shim: Any) -> Patches:
    """``Tensor.to``, ``Tensor.cuda``, ``Tensor.new_*`` and (per pin policy) ``Tensor.pin_memory``."""
    import torch

    dm, hit = shim.map, shim.hit
    T = torch.Tensor
    orig_to = T.to
    out: Patches = []

    records, dmap, Device = shim.report.records, dm.map, torch.device
    api_to, api_cuda = "torch.Tensor.to", "torch.Tensor.cuda"

    def make_to(orig_to: Callable) -> Callable:
        # Hot path (called every step): no work unless an argument can name a device, and the
        # report is counted inline; the first redirect per API goes through hit() for its call site.
        def to(self: Any, *args: Any, **kwargs: Any) -> Any:
            if args:
                a0 = args[0]
                cls = a0.__class__
                if cls is str or cls is Device or cls is int:
                    new = dmap(a0, True)
                    if new is not a0:
                        args = (new, *args[1:])
                        rec = records.get(api_to)
                        if rec is None:
                            hit(api_to, a0, new)
                        else:
                            rec.count += 1
            if kwargs:
                dev = kwargs.get("device")
                if dev is not None:
                    new = dmap(dev, True)
                    if new is not dev:
                        kwargs["device"] = new
                        hit(api_to, dev, new)
            return orig_to(self, *args, **kwargs)

        return _named(to, orig_to, "CUDA devices are redirected to the selected device.")

    def cuda(self: Any, device: Any = None, non_blocking: bool = False, memory_format: Any = torch.preserve_format) -> Any:
        new = dm.device(None if device is None else dm.index_of(device))
        rec = records.get(api_cuda)
        if rec is None:
            hit(api_cuda, f"cuda({'' if device is None else repr(device)})", new)
        else:
            rec.count += 1
        if self.__class__ is T:
            return orig_to(self, new, non_blocking=non_blocking, memory_format=memory_format)
        return self.to(new, non_blocking=non_blocking, memory_format=memory_format)  # a subclass's own .to

    out.append((T, "to", make_to(orig_to), api_to))
    out.append((T, "cuda", _named(cuda, T.cuda, "moves to the selected device instead of CUDA."), api_cuda))
    # Tensor subclasses that define their own .to (torch's FunctionalTensor, wrapper subclasses
    # such as the emulated npu's) would bypass the patch above: wrap theirs too.
    for sub in _subclasses(T):
        own = vars(sub).get("to")
        if own is not None and callable(own):
            out.append((sub, "to", make_to(own), api_to))

    out.append((T, "is_cuda", is_cuda_property(shim, T.is_cuda), "torch.Tensor.is_cuda"))

    from torchport.shim._cuda_device import legacy_cuda_dtype

    orig_type = T.type

    def type_(self: Any, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        legacy = legacy_cuda_dtype(dtype) if dtype is not None else None
        if legacy is None:
            return orig_type(self, dtype, non_blocking, **kwargs) if dtype is not None else orig_type(self)
        new = dm.device()
        hit("torch.Tensor.type", f"type({getattr(dtype, '__name__', dtype)})", new)
        return orig_to(self, device=new, dtype=legacy, non_blocking=non_blocking)

    out.append((T, "type", _named(type_, orig_type, "legacy CUDA types (torch.cuda.FloatTensor) convert on the "
                                                    "selected device."), "torch.Tensor.type"))

    def make_new(original: Callable, api: str) -> Callable:
        def new_method(self: Any, *args: Any, **kwargs: Any) -> Any:
            dev = kwargs.get("device")
            if dev is not None:
                new = dm.map(dev, True)
                if new is not dev:
                    kwargs["device"] = new
                    hit(api, dev, new)
            return original(self, *args, **kwargs)

        return _named(new_method, original, "device='cuda...' is redirected to the selected device.")

    for name in TENSOR_NEW:
        original = getattr(T, name, None)
        if original is not None:
            out.append((T, name, make_new(original, f"torch.Tensor.{name}"), f"torch.Tensor.{name}"))

    if not shim.target.backend.pin_memory:
        orig_pin = T.pin_memory

        def pin_memory(self: Any, *args: Any, **kwargs: Any) -> Any:
            hit("torch.Tensor.pin_memory", "pin_memory()", f"not pinned ({shim.target.backend.label} pin policy)")
            return self

        out.append((T, "pin_memory", _named(pin_memory, orig_pin, "a no-op where the backend does not pin."),
                    "torch.Tensor.pin_memory"))
    return out


def module_patches(shim: Any) -> Patches:
    """``Module.to``, ``Module.cuda`` and ``Module.to_empty``."""
    import torch

    dm, hit = shim.map, shim.hit
    M = torch.nn.Module
    orig_to, orig_to_empty = M.to, M.to_empty

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args:
            a0 = args[0]
            new = dm.map(a0, True)
            if new is not a0:
                args = (new, *args[1:])
                hit("torch.nn.Module.to", a0, new)
        if kwargs:
            dev = kwargs.get("device")
            if dev is not None:
                new = dm.map(dev, True)
                if new is not dev:
                    kwargs["device"] = new
                    hit("torch.nn.Module.to", dev, new)
        return orig_to(self, *args, **kwargs)

    def cuda(self: Any, device: Any = None) -> Any:
        new = dm.device(dm.index_of(device))
        hit("torch.nn.Module.cuda", f"cuda({'' if device is None else repr(device)})", new)
        return orig_to(self, new)

    def to_empty(self: Any, *, device: Any, recurse: bool = True) -> Any:
        new = dm.map(device, True)
        if new is not device:
            hit("torch.nn.Module.to_empty", device, new)
        return orig_to_empty(self, device=new, recurse=recurse)

    return [
        (M, "to", _named(to, orig_to, "CUDA devices are redirected to the selected device."), "torch.nn.Module.to"),
        (M, "cuda", _named(cuda, M.cuda, "moves to the selected device instead of CUDA."), "torch.nn.Module.cuda"),
        (M, "to_empty", _named(to_empty, orig_to_empty, "CUDA -> selected device."), "torch.nn.Module.to_empty"),
    ]


def amp_patches(shim: Any) -> Patches:
    """``torch.autocast("cuda")`` / ``torch.cuda.amp.autocast`` and ``torch.amp.GradScaler("cuda")``.

    Both CUDA spellings end in the device-generic base class ``__init__``, so that is
    where the device type is rewritten. The autocast dtype follows the backend's AMP
    policy: a precision the backend does not run fast becomes its fallback (noted in
    the report), fp32 meaning autocast disabled.
    """
    import torch

    from torchport.runtime.amp import policy_dtype, policy_fp32_region, precision_of as _dtype_name

    dm, hit, report = shim.map, shim.hit, shim.report
    policy = shim.target.backend.amp
    Autocast = torch.amp.autocast_mode.autocast
    Scaler = torch.amp.grad_scaler.GradScaler
    orig_ac_init, orig_sc_init = vars(Autocast)["__init__"], vars(Scaler)["__init__"]
    slow_warned: set[str] = set()

    def autocast_init(self: Any, device_type: str, dtype: Any = None, enabled: bool = True,
                      cache_enabled: bool | None = None) -> None:
        new = dm.map_type(device_type)
        if new is not device_type:
            cuda_spelling = type(self).__module__.startswith("torch.cuda")
            api = "torch.cuda.amp.autocast" if cuda_spelling else "torch.autocast"
            # the one AMP policy (backends/spec.py, cpu_precision.py), as torchport.autocast applies it
            got, note = policy_dtype(new, dtype if dtype is not None else torch.float16, shim.target.backend)
            if note is not None:
                report.note(note)
                if got is None:
                    enabled = False
                    self._torchport_policy_fp32 = True
                else:
                    dtype = got
            if not enabled:
                how = "disabled"
            else:
                how = _dtype_name(dtype) if dtype is not None else "default dtype"
            hit(api, device_type, f"{new} ({how})")
            device_type = new
        elif enabled and device_type == shim.target.type:   # the script's own autocast on the selected device
            want = _dtype_name(dtype if dtype is not None else torch.get_autocast_dtype(device_type))
            if want != "fp32" and not policy.usable(want) and policy.runs(want) and want not in slow_warned:
                slow_warned.add(want)   # before the note: measuring the cost opens autocasts of its own
                from torchport.runtime.amp import SlowPrecisionWarning, warn_once

                warn_once(policy.cost_note(want, shim.target.backend.label, f"torch.autocast({device_type!r}, {want})"),
                          SlowPrecisionWarning, stacklevel=2)
        return orig_ac_init(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    def scaler_init(self: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
        new = dm.map_type(device)
        if new is not device:
            api = "torch.cuda.amp.GradScaler" if type(self).__module__.startswith("torch.cuda") else "torch.amp.GradScaler"
            hit(api, device, new)
            device = new
        return orig_sc_init(self, device, *args, **kwargs)

    orig_ac_enter, orig_ac_exit = vars(Autocast)["__enter__"], vars(Autocast)["__exit__"]

    def autocast_enter(self: Any) -> Any:
        if getattr(self, "_torchport_policy_fp32", False):
            policy_fp32_region(+1)
        return orig_ac_enter(self)

    def autocast_exit(self: Any, *exc: Any) -> Any:
        if getattr(self, "_torchport_policy_fp32", False):
            policy_fp32_region(-1)
        return orig_ac_exit(self, *exc)

    return [
        (Autocast, "__init__", _named(autocast_init, orig_ac_init, "device_type='cuda' -> the selected device type."),
         "torch.autocast"),
        (Autocast, "__enter__", _named(autocast_enter, orig_ac_enter, "counts regions the AMP policy runs in fp32."),
         "torch.autocast"),
        (Autocast, "__exit__", _named(autocast_exit, orig_ac_exit, "counts regions the AMP policy runs in fp32."),
         "torch.autocast"),
        (Scaler, "__init__", _named(scaler_init, orig_sc_init, "device='cuda' -> the selected device type."),
         "torch.amp.GradScaler"),
    ]


def restore_cuda_storage(dm: Any, storage: Any, location: str) -> Any:
    """``torch.load``'s restore step without a ``map_location``: a storage saved on ``cuda[:N]`` is restored
    where ``dm`` maps that device (index ``N`` of the selected backend, the CPU on a CPU target); any other
    returns None (torch's default restore: CPU storages stay on the CPU)."""
    if not location.startswith("cuda"):
        return None
    from torch.serialization import default_restore_location

    return default_restore_location(storage, str(dm.map(location)))


def load_patches(shim: Any) -> Patches:
    """``torch.load(map_location="cuda:0")``; without ``map_location``, CUDA-saved storages land on the target."""
    import torch

    dm, hit = shim.map, shim.hit
    orig_load = vars(torch)["load"]

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        if map_location is None:
            seen: list[str] = []  # count the load once, however many CUDA storages it holds

            def restore(storage: Any, location: str) -> Any:
                new = restore_cuda_storage(dm, storage, location)
                if new is not None and not seen:
                    seen.append(location)
                    hit("torch.load", f"storage saved on {location!r}", dm.map(location))
                return new

            map_location = restore
        elif not callable(map_location):
            new = dm.map_location(map_location)
            if new is not map_location:
                hit("torch.load", f"map_location={map_location!r}", new)
                map_location = new
        return orig_load(f, map_location, *args, **kwargs)

    return [(torch, "load", _named(load, orig_load, "CUDA map_location / CUDA-saved storages -> selected device."),
             "torch.load")]


def distributed_patches(shim: Any) -> Patches:
    """``init_process_group("nccl")`` / ``new_group(backend="nccl")`` and DDP ``device_ids``."""
    import torch

    if not torch.distributed.is_available():
        return []
    import torch.distributed.distributed_c10d as c10d
    from torch.nn.parallel import DistributedDataParallel as DDP

    dm, hit = shim.map, shim.hit
    orig_init, orig_new_group = c10d.init_process_group, c10d.new_group
    orig_ddp_init = vars(DDP)["__init__"]

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        new = dm.map_backend(backend)
        if new is not backend:
            hit("torch.distributed.init_process_group", backend, new)
        dev = kwargs.get("device_id")
        if dev is not None:
            mapped = dm.map(dev, True)
            if not dm.accelerator:
                kwargs.pop("device_id")  # no device to bind on a CPU target
                hit("torch.distributed.init_process_group", f"device_id={dev!r}", "(dropped: cpu)")
            elif mapped is not dev:
                kwargs["device_id"] = mapped
                hit("torch.distributed.init_process_group", f"device_id={dev!r}", mapped)
        return orig_init(new, *args, **kwargs)

    def new_group(*args: Any, **kwargs: Any) -> Any:
        if "backend" in kwargs:
            be = kwargs["backend"]
            kwargs["backend"] = dm.map_backend(be)
            if kwargs["backend"] is not be:
                hit("torch.distributed.new_group", be, kwargs["backend"])
        elif len(args) >= 3:
            be = args[2]
            new = dm.map_backend(be)
            if new is not be:
                args = (*args[:2], new, *args[3:])
                hit("torch.distributed.new_group", be, new)
        return orig_new_group(*args, **kwargs)

    def ddp_init(self: Any, module: Any, device_ids: Any = None, output_device: Any = None, *args: Any, **kwargs: Any) -> None:
        if device_ids is not None or output_device is not None:
            if not dm.accelerator:
                hit("torch.nn.parallel.DistributedDataParallel", f"device_ids={device_ids!r}", "None (cpu module)")
                device_ids, output_device = None, None
            else:
                new_ids = None if device_ids is None else [dm.map(d, True) for d in device_ids]
                new_out = None if output_device is None else dm.map(output_device, True)
                if new_ids != list(device_ids or []) or new_out is not output_device:
                    hit("torch.nn.parallel.DistributedDataParallel", f"device_ids={device_ids!r}", new_ids)
                device_ids, output_device = new_ids, new_out
        return orig_ddp_init(self, module, device_ids, output_device, *args, **kwargs)

    init = _named(init_process_group, orig_init, "backend 'nccl' -> the selected device's backend.")
    group = _named(new_group, orig_new_group, "backend 'nccl' -> the selected device's backend.")
    out: Patches = []
    for owner in (torch.distributed, c10d):
        if vars(owner).get("init_process_group") is orig_init:
            out.append((owner, "init_process_group", init, "torch.distributed.init_process_group"))
        if vars(owner).get("new_group") is orig_new_group:
            out.append((owner, "new_group", group, "torch.distributed.new_group"))
    out.append((DDP, "__init__", _named(ddp_init, orig_ddp_init, "device_ids follow the selected device."),
                "torch.nn.parallel.DistributedDataParallel"))
    return out


def data_patches(shim: Any) -> Patches:
    """DataLoader ``pin_memory`` per the backend's pin policy; DataParallel where unsupported."""
    import torch
    from torch.utils.data import DataLoader

    hit, backend = shim.hit, shim.target.backend
    out: Patches = []
    if not backend.pin_memory:
        orig_dl_init = vars(DataLoader)["__init__"]

        def dl_init(self: Any, *args: Any, **kwargs: Any) -> None:
            if kwargs.get("pin_memory"):
                kwargs["pin_memory"] = False
                hit("torch.utils.data.DataLoader", "pin_memory=True", f"pin_memory=False ({backend.label} pin policy)")
            elif len(args) > 7 and args[7] is True:
                args = (*args[:7], False, *args[8:])
                hit("torch.utils.data.DataLoader", "pin_memory=True", f"pin_memory=False ({backend.label} pin policy)")
            kwargs.pop("pin_memory_device", None)  # only meaningful with pinning, which is off here
            return orig_dl_init(self, *args, **kwargs)

        out.append((DataLoader, "__init__", _named(dl_init, orig_dl_init, "pin_memory follows the backend policy."),
                    "torch.utils.data.DataLoader"))

    if not backend.data_parallel:
        DP = torch.nn.DataParallel
        orig_dp_init = vars(DP)["__init__"]

        def dp_init(self: Any, module: Any, device_ids: Any = None, output_device: Any = None, dim: int = 0) -> None:
            # The same state DataParallel itself builds when no GPU is present: forward calls the module.
            torch.nn.Module.__init__(self)
            self.module = module
            self.device_ids = []
            self.dim = dim
            hit("torch.nn.DataParallel", "DataParallel(model)", f"single device ({backend.label} has no DataParallel)")
            shim.report.note(f"nn.DataParallel is not supported on {backend.label}: the model runs on one device; "
                             "use DistributedDataParallel (torchrun) to use several")

        out.append((DP, "__init__", _named(dp_init, orig_dp_init, "one device where DataParallel is unsupported."),
                    "torch.nn.DataParallel"))
    return out
