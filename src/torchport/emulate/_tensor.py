"""Emulated npu tensors: a wrapper subclass around a CPU tensor, ops forwarded in ``__torch_dispatch__``.

How one operator runs on the emulated device::

    autocast (AutocastPrivateUse1 kernels, see _autocast.py)
      -> autograd (AutogradPrivateUse1: torch's own, unchanged)
        -> NpuTensor.__torch_dispatch__: unwrap to CPU tensors, check placement,
           inject the device RNG, run the CPU kernel, apply fault injection, re-wrap

Every tensor reports its real device (``npu:k``) to C++ too: the compiled device guard
(``_native.py``) gives torch real device indices, a per-thread current device and a
device count, so the autograd engine, DDP's reducer and ``foreach`` grouping see the
same device as Python.
"""

from __future__ import annotations

import collections
import copy
import warnings
from typing import Any

import torch

from torchport.emulate import _coverage
from torchport.emulate._state import SATURATE, STATE

__all__ = ["NpuTensor", "wrap", "unwrap", "logical_index", "EmulatorNotInstalled", "set_cxx_device"]

_make = torch.Tensor._make_wrapper_subclass
_TensorBase = torch._C.TensorBase
_CXX: list = [None]  # torch.device("npu", 0) once the backend is renamed
_DEVICES: list[torch.device] = []  # device objects, by index
_FP16_MAX = 65504.0
_CPU = torch.device("cpu")


class EmulatorNotInstalled(RuntimeError):
    """An emulated npu tensor was used after ``torchport.emulate.uninstall()``."""


def set_cxx_device(device: torch.device, count: int) -> None:
    """Record the device type and build the device objects ``npu:0..count-1`` (install time)."""
    _CXX[0] = device
    # never shrink: tensors created before a reconfiguration keep a valid .device
    _DEVICES[:] = [torch.device(device.type, i) for i in range(max(count, 1, len(_DEVICES)))]


def logical_index(device: Any) -> int:
    """Map a requested ``npu`` device (None, index-less or ``npu:k``) to a device index
    (index-less means the calling thread's current device, as in CUDA and torch_npu)."""
    if device is None:
        return STATE.current
    if not isinstance(device, torch.device):
        device = torch.device(device)
    index = device.index
    if index is None:
        return STATE.current
    if index >= STATE.devices or index < 0:
        raise RuntimeError(f"Invalid device ordinal: {index}, device count: {STATE.devices}")
    return index


def wrap(elem: torch.Tensor, index: int) -> "NpuTensor":
    """Wrap the CPU tensor ``elem`` as a tensor on emulated device ``npu:index`` (no copy)."""
    storage = elem.untyped_storage()
    if getattr(storage, "_torchport_npu", None) is None:
        STATE.memory.track(storage, index)
    if _inference_enabled() and not elem.is_inference():
        # a view of a normal tensor taken inside inference_mode is a normal tensor, as on any device
        with _no_inference():
            out = _new_wrapper(elem, index)
    else:
        out = _new_wrapper(elem, index)
    out._elem = elem
    out._idx = index
    return out


_inference_enabled = torch.is_inference_mode_enabled


def _no_inference():
    return torch.inference_mode(False)


def _new_wrapper(elem: torch.Tensor, index: int) -> "NpuTensor":
    return _make(NpuTensor, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(),
                 dtype=elem.dtype, layout=elem.layout, device=_DEVICES[index], requires_grad=False)


def unwrap(t: Any) -> Any:
    """The CPU tensor behind an emulated npu tensor (anything else is returned unchanged)."""
    return t._elem if type(t) is NpuTensor else t


def _placement_error(func: Any, a: str, b: str) -> RuntimeError:
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, {a} and {b}! "
        f"(when checking arguments for {func})"
    )


class _Ctx:
    """Per-call unwrap bookkeeping: device index, inner->wrapper map, CPU tensors seen."""

    __slots__ = ("idx", "seen", "cpu")

    def __init__(self) -> None:
        self.idx = -1
        self.seen: dict[int, NpuTensor] = {}
        self.cpu = None


def _unwrap(a: Any, ctx: _Ctx) -> Any:
    t = type(a)
    if t is NpuTensor:
        i = a._idx
        if i != ctx.idx:
            if ctx.idx >= 0:
                ctx.cpu = ("npu", ctx.idx, i)
            else:
                ctx.idx = i
        e = a._elem
        ctx.seen[id(e)] = a
        return e
    if t is list or t is tuple:
        return t([_unwrap(x, ctx) for x in a])
    if isinstance(a, torch.Tensor) and a.dim() != 0 and ctx.cpu is None:
        ctx.cpu = ("cpu", a.device)
    return a


def _rewrap(o: Any, idx: int, seen: dict) -> Any:
    if isinstance(o, torch.Tensor):
        w = seen.get(id(o))
        if w is None:
            return wrap(o, idx)
        if w.shape != o.shape or w.stride() != o.stride() or w.storage_offset() != o.storage_offset():
            _sync_metadata(w, o)
        return w
    t = type(o)
    if t is tuple or t is list:
        return t([_rewrap(x, idx, seen) for x in o])
    return o


def _sync_metadata(w: "NpuTensor", o: torch.Tensor) -> None:
    """Make the wrapper's sizes/strides follow its CPU tensor after resize_/set_/out=."""
    meta_keys = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
    try:
        with torch._C._DisableTorchDispatch():
            torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
                meta_keys, w, _TensorBase.untyped_storage(w), o.storage_offset(), o.size(), o.stride()
            )
    except Exception as exc:  # pragma: no cover - depends on torch internals
        raise NotImplementedError(
            f"emulated NPU: cannot change the shape of an existing npu tensor in place "
            f"({tuple(w.shape)} -> {tuple(o.shape)}): {exc}. Allocate the output with the final shape."
        ) from exc


class NpuTensor(torch.Tensor):
    """A tensor on an emulated Ascend NPU; its data is a CPU tensor (``_elem``).

    You never build one directly: ``x.to("npu")``, ``torch.zeros(..., device="npu")``
    and ``model.npu()`` create them once the emulator is installed.
    """

    __slots__ = ("_elem", "_idx")
    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def data(self):  # type: ignore[override]
        return _TensorBase.data.__get__(self)

    @data.setter
    def data(self, new) -> None:
        _TensorBase.data.__set__(self, new)
        self._elem = new._elem
        self._idx = new._idx

    def __format__(self, format_spec: str) -> str:
        """Format like a plain tensor: a 0-dim tensor formats as its Python number (``f"{loss:.3f}"``)."""
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def tolist(self):  # type: ignore[override]
        """Copy to the host and convert, as ``tolist()`` does for any device tensor."""
        return self.cpu().tolist()

    def numpy(self, *, force: bool = False):  # type: ignore[override]
        if force:
            return self.detach().cpu().numpy()
        raise TypeError(
            f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
            "to host memory first."
        )

    def data_ptr(self) -> int:  # type: ignore[override]
        """Address of the emulated device memory (the CPU buffer); unique per storage."""
        return self._elem.data_ptr()

    def untyped_storage(self):  # type: ignore[override]
        """The backing storage (lives in host memory; ``nbytes()`` and ``data_ptr()`` are real)."""
        return self._elem.untyped_storage()

    def __repr__(self, *, tensor_contents=None) -> str:
        if getattr(self, "_is_param", False):  # nn.Parameter of a tensor subclass is the subclass, flagged
            return "Parameter containing:\n" + self._repr_body()
        return self._repr_body()

    def _repr_body(self) -> str:
        inner = repr(self._elem)
        if inner.endswith(")"):
            body = inner[:-1]
            extra = f", device='{self.device}'"
            if self.requires_grad and "grad_fn" not in body and "requires_grad" not in body:
                extra += (f", grad_fn=<{type(self.grad_fn).__name__}>" if self.grad_fn is not None
                          else ", requires_grad=True")
            return body + extra + ")"
        return inner

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            new = wrap(self._elem.clone(memory_format=torch.preserve_format), self._idx)
        if self.requires_grad:
            new.requires_grad_(True)
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        for key, value in self.__dict__.items():
            setattr(new, key, copy.deepcopy(value, memo))
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, proto):
        # Pickle exactly like a real NPU tensor: a storage whose location tag is "npu:N"
        # (see _serialization.py) rebuilt by torch._utils._rebuild_tensor_v2.
        e = self._elem
        storage = e.untyped_storage()
        storage._torchport_npu = self._idx
        typed = torch.storage.TypedStorage(wrap_storage=storage, dtype=e.dtype, _internal=True)
        hooks = collections.OrderedDict()
        args = (typed, e.storage_offset(), tuple(e.size()), e.stride(), self.requires_grad, hooks)
        if getattr(self, "_is_param", False):
            return (torch._utils._rebuild_parameter, (self.detach(), self.requires_grad, hooks))
        return (torch._utils._rebuild_tensor_v2, args)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if not STATE.installed:
            raise EmulatorNotInstalled(
                f"{func}: this tensor lives on the emulated NPU, which was uninstalled "
                "(torchport.emulate.uninstall()); move tensors to cpu before uninstalling"
            )
        info = _OPS.get(func)
        if info is None:
            info = _opinfo(func)
        if info.handler is not None:
            return info.handler(func, args, kwargs or {})
        return run(func, info, args, kwargs or {})


class _OpInfo:
    __slots__ = ("name", "handler", "has_generator", "has_device", "allow_cpu", "upcast", "is_view", "falls_back")

    def __init__(self, func: Any) -> None:
        schema = func._schema
        self.name = schema.name  # "aten::convolution"
        self.handler = _HANDLERS.get(func) or _HANDLERS.get(func.overloadpacket)
        if self.handler is None and self.name.startswith("c10d::"):
            self.handler = _collective
        self.has_generator = any(a.name == "generator" and a.kwarg_only for a in schema.arguments)
        self.has_device = any(a.name == "device" and a.kwarg_only for a in schema.arguments)
        self.allow_cpu = func.overloadpacket in _ALLOW_CPU
        self.upcast = func.overloadpacket in _UPCAST
        self.is_view = bool(getattr(func, "is_view", False))
        #: injected (set_fallback_ops) or, with coverage on, not implemented by torch_npu 2.14.0 for the NPU
        self.falls_back = self.name in STATE.fallback_ops or (STATE.coverage and _coverage.would_fall_back(func))


_OPS: dict = {}
_HANDLERS: dict = {}  # OpOverload or OpOverloadPacket -> handler(func, args, kwargs)
_a = torch.ops.aten
# ops whose index arguments may live on the host (as with CUDA / torch_npu)
_ALLOW_CPU = {_a.copy_, _a._to_copy, _a.index, _a.index_put_, _a._index_put_impl_, _a.index_put}
# float16/bfloat16 matmuls and convolutions: the host has no fast kernels (fp16 conv falls to
# _slow_conv2d, fp16 mm is ~60x slower than fp32); the NPU's cube unit accumulates in fp32
# anyway, so run in fp32 and round the results to the low precision
_UPCAST = {_a.mm, _a.bmm, _a.addmm, _a.baddbmm, _a.addmv, _a.mv, _a.addbmm, _a.dot, _a.vdot,
           _a.convolution, _a.convolution_backward}
_LOW = (torch.float16, torch.bfloat16)


def _opinfo(func: Any) -> _OpInfo:
    info = _OpInfo(func)
    _OPS[func] = info
    return info


_PU1 = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)


def _collective(func: Any, args: tuple, kwargs: dict) -> Any:
    """c10d ops keep the npu tensors: their PrivateUse1 kernel hands them to the process group's
    npu backend (the emulated hccl), which works on the host tensors behind them."""
    return func.redispatch(_PU1, *args, **kwargs)


def reset_op_cache() -> None:
    """Forget cached per-op facts (after handlers or fault-injection settings change)."""
    _OPS.clear()


def run(func: Any, info: _OpInfo, args: tuple, kwargs: dict) -> Any:
    """Run ``func`` on the CPU tensors behind ``args`` and wrap the results on the same device."""
    ctx = _Ctx()
    uargs = _unwrap(args, ctx)
    ukwargs = {k: _unwrap(v, ctx) for k, v in kwargs.items()} if kwargs else {}
    if ctx.cpu is not None:
        _check_placement(func, info, ctx)
    idx = ctx.idx if ctx.idx >= 0 else STATE.current
    if info.has_device:
        device = ukwargs.get("device")
        if device is not None:
            device = torch.device(device)
            if device.type == "cpu":  # e.g. torch.empty_like(x, device="cpu"): a host result
                return func(*uargs, **ukwargs)
            if device.type == _CXX[0].type:
                if device.index is not None:
                    idx = logical_index(device)
                ukwargs["device"] = _CPU
    if info.has_generator:
        ukwargs["generator"] = host_generator(ukwargs.get("generator"), idx)
    if info.falls_back:
        _warn_fallback(info.name)
    if info.upcast:
        out = _run_upcast(func, uargs, ukwargs)
    else:
        out = func(*uargs, **ukwargs)
    if (STATE.overflow_mode == SATURATE or STATE.perturb) and not info.is_view:
        _post(info, out)
    return _rewrap(out, idx, ctx.seen)


def host_generator(gen: Any, idx: int) -> Any:
    """The host generator that draws for ``gen`` (an npu ``torch.Generator``, or None: device ``idx``'s default)."""
    if gen is None:
        return STATE.generators[idx]
    if gen.device.type == "cpu":
        return gen
    return STATE.native.host_generator(gen)


def _check_placement(func: Any, info: _OpInfo, ctx: _Ctx) -> None:
    kind = ctx.cpu
    if kind[0] == "npu":
        raise _placement_error(func, f"npu:{kind[1]}", f"npu:{kind[2]}")
    if info.allow_cpu or ctx.idx < 0:
        return
    raise _placement_error(func, f"npu:{ctx.idx}", str(kind[1]))


def _run_upcast(func: Any, uargs: tuple, ukwargs: dict) -> Any:
    low = None
    for a in uargs:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            if a.dtype not in _LOW or (low is not None and a.dtype != low):
                return func(*uargs, **ukwargs)  # fp32 or mixed: run as is (mixed raises as on hardware)
            low = a.dtype
    if low is None:
        return func(*uargs, **ukwargs)
    up = tuple(a.float() if isinstance(a, torch.Tensor) and a.dtype == low else a for a in uargs)
    out = func(*up, **ukwargs)
    if isinstance(out, torch.Tensor):
        return out.to(low)
    return type(out)(o.to(low) if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out)


def _warn_fallback(name: str) -> None:
    STATE.fallback_counts[name] = STATE.fallback_counts.get(name, 0) + 1
    if name in STATE.fallback_warned:
        return
    STATE.fallback_warned.add(name)
    warnings.warn(
        f"CAUTION: The operator '{name}' is not currently supported on the NPU backend and will fall back "
        "to run on the CPU. This may have performance implications.",
        UserWarning,
        stacklevel=4,
    )


def _post(info: _OpInfo, out: Any) -> None:
    """Fault injection after an op, in place on its (fresh or in-place-updated) results:
    fp16 saturation and numeric perturbation."""
    if isinstance(out, (tuple, list)):
        for o in out:
            _post(info, o)
        return
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return
    if STATE.overflow_mode == SATURATE and out.dtype == torch.float16 and bool(torch.isinf(out).any()):
        STATE.overflow_flag = True
        out.clamp_(-_FP16_MAX, _FP16_MAX)  # +-inf -> +-65504; NaN stays NaN
    eps = STATE.perturb.get(info.name) if STATE.perturb else None
    if eps:
        out.copy_(perturb_tensor(out, eps))


def perturb_tensor(t: torch.Tensor, eps: float) -> torch.Tensor:
    """Return ``t * (1 + eps * u)``, ``u`` uniform in [-1, 1] from the emulator's own RNG."""
    gen = STATE.perturb_generator
    noise = torch.empty(t.shape, dtype=torch.float32).uniform_(-1.0, 1.0, generator=gen)
    if type(t) is NpuTensor:
        noise = noise.to(t.device)  # module-level perturbation: stays differentiable on the device
    return (t.float() * (1.0 + eps * noise)).to(t.dtype)
