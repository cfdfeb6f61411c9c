"""The device part of the ``torch.cuda`` stand-ins: queries, the current device, RNG, legacy typed constructors.

Each section returns ``{torch.cuda name: implementation for user code}`` (see :mod:`torchport.shim._cuda_api`).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from torchport.shim._cuda_api import C, _Api, _r

__all__ = ["SECTIONS", "legacy_cuda_dtype"]


def _queries(api: _Api) -> dict[str, Any]:
    """``is_available`` / ``device_count`` / ``is_bf16_supported`` (user code only: libraries get the real answers)."""
    hit, accel, target = api.hit, api.accel, api.target
    # 1 on the CPU fallback, as the fixed code's `torchport.current().backend.device_count()`: a DDP
    # script's `mp.spawn(nprocs=torch.cuda.device_count())` then trains on one rank instead of none.
    count = max(1, target.backend.device_count())
    bf16 = bool(accel and target.backend.bf16_supported())   # computed before torch.cuda is patched

    def is_available() -> bool:
        hit("torch.cuda.is_available", "is_available()", accel)
        return accel

    def device_count() -> int:
        hit("torch.cuda.device_count", "device_count()", count)
        return count

    def is_bf16_supported(*args: Any, **kwargs: Any) -> bool:
        hit("torch.cuda.is_bf16_supported", "is_bf16_supported()", bf16)
        return bf16

    return dict(is_available=is_available, device_count=device_count, is_bf16_supported=is_bf16_supported)


def _current_device(api: _Api) -> dict[str, Any]:
    """``current_device`` / ``set_device`` / ``with torch.cuda.device(i)`` on the selected backend."""
    dm, hit, fn_of = api.dm, api.hit, api.fn_of

    def current_device() -> int:
        """Under the torchport shim: the current index on the selected backend."""
        hit("torch.cuda.current_device", "current_device()", dm.current)
        return dm.current

    def set_dev(idx: int) -> None:
        dm.set_current(idx)
        fn = fn_of("set_device")
        if fn is not None:
            fn(idx)

    def set_device(device: Any) -> None:
        """Under the torchport shim: set the current device of the selected backend."""
        idx = dm.index_of(device)
        hit("torch.cuda.set_device", f"set_device({_r(device)})", dm.device(idx))
        dm.set_current(idx)
        fn = fn_of("set_device")
        if fn is not None and idx is not None and idx >= 0:
            fn(idx)

    class DeviceContext:
        """``with torch.cuda.device(i):`` under the shim: index ``i`` of the selected backend."""

        def __init__(self, device: Any, _api: str = "device") -> None:
            self.idx = dm.index_of(device)
            self.prev = dm.current
            negative = self.idx is not None and self.idx < 0  # torch.cuda.device(-1) is a no-op
            hit(C + _api, f"{_api}({_r(device)})", "(no-op)" if negative else dm.device(self.idx))

        def __enter__(self) -> None:
            self.prev = dm.current
            if self.idx is not None and self.idx >= 0 and self.idx != self.prev:
                set_dev(self.idx)

        def __exit__(self, *exc: Any) -> bool:
            if self.prev != dm.current:
                set_dev(self.prev)
            return False

    class DeviceOf(DeviceContext):
        """``with torch.cuda.device_of(t):`` under the shim: the device of ``t`` when it is on the selected type."""

        def __init__(self, obj: Any) -> None:
            on_target = getattr(getattr(obj, "device", None), "type", None) == dm.type and dm.accelerator
            super().__init__(obj.get_device() if on_target else -1, "device_of")

    api.produces[C + "device"] = (DeviceContext,)
    api.produces[C + "device_of"] = (DeviceOf,)
    return dict(current_device=current_device, set_device=set_device, device=DeviceContext, device_of=DeviceOf)


def _rng(api: _Api) -> dict[str, Any]:
    """Seeding and RNG state on the selected device's generator (the CPU generator on CPU)."""
    import torch

    dm, hit, fn_of, dev_arg = api.dm, api.hit, api.fn_of, api.dev_arg

    def seeded(name: str, cpu: Callable) -> Callable:
        api_name = f"torch.cuda.{name}"

        def replacement(*args: Any, **kwargs: Any) -> Any:
            fn = fn_of(name)
            hit(api_name, f"{name}()", dm.device() if fn else "cpu generator")
            return (fn or cpu)(*args, **kwargs)

        replacement.__name__ = replacement.__qualname__ = name
        replacement.__doc__ = f"Under the torchport shim: ``{name}`` on the selected device's generator."
        return replacement

    out: dict[str, Any] = {
        "manual_seed": seeded("manual_seed", torch.manual_seed),
        "manual_seed_all": seeded("manual_seed_all", torch.manual_seed),
        "seed": seeded("seed", torch.seed),
        "seed_all": seeded("seed_all", torch.seed),
        "initial_seed": seeded("initial_seed", torch.initial_seed),
        "get_rng_state_all": seeded("get_rng_state_all", lambda: [torch.get_rng_state()]),
        "set_rng_state_all": seeded("set_rng_state_all", lambda states: torch.set_rng_state(list(states)[0])),
    }

    def get_rng_state(device: Any = "cuda") -> Any:
        """Under the torchport shim: RNG state of the selected device (CPU generator on CPU)."""
        fn = fn_of("get_rng_state")
        hit("torch.cuda.get_rng_state", f"get_rng_state({_r(device)})", dm.device(dm.index_of(device)))
        return fn(dev_arg(device)) if fn is not None else torch.get_rng_state()

    def set_rng_state(new_state: Any, device: Any = "cuda") -> None:
        """Under the torchport shim: set the RNG state of the selected device."""
        fn = fn_of("set_rng_state")
        hit("torch.cuda.set_rng_state", f"set_rng_state({_r(device)})", dm.device(dm.index_of(device)))
        fn(new_state, dev_arg(device)) if fn is not None else torch.set_rng_state(new_state)

    out.update(get_rng_state=get_rng_state, set_rng_state=set_rng_state)
    return out


def legacy_cuda_dtype(cls: Any) -> Any:
    """The dtype of a legacy CUDA tensor type (``torch.cuda.FloatTensor``, its shim stand-in or the string
    ``"torch.cuda.FloatTensor"``), else None."""
    import torch

    real = getattr(cls, "__wrapped__", cls)
    if isinstance(real, str):
        if not real.startswith("torch.cuda.") or not real.endswith("Tensor"):
            return None
        real = getattr(torch.cuda, real[len("torch.cuda."):], None)
        real = getattr(real, "__wrapped__", real)
    if isinstance(real, type) and real.__module__ == "torch.cuda" and isinstance(getattr(real, "dtype", None), torch.dtype):
        return real.dtype
    return None


def _legacy_types(api: _Api) -> dict[str, Any]:
    """``torch.cuda.FloatTensor(2, 3)`` / ``torch.cuda.FloatTensor(ndarray)`` (the legacy typed constructors,
    e.g. PyTorch-GAN's ``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``) on the selected device.
    ``x.type(torch.cuda.FloatTensor)`` is redirected with the other device arguments (``Tensor.type``)."""
    import torch

    dm, hit = api.dm, api.hit
    out: dict[str, Any] = {}
    for name in ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
                 "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"):
        dtype = legacy_cuda_dtype(getattr(torch.cuda, name, None))
        if dtype is None:
            continue

        def legacy(*args: Any, device: Any = None, _name: str = name, _dtype: Any = dtype) -> Any:
            dev = dm.device(None if device is None else dm.index_of(device))
            hit(f"torch.cuda.{_name}", f"{_name}(...)", dev)
            if len(args) == 1 and not isinstance(args[0], (int, torch.Size)):
                return torch.as_tensor(args[0], dtype=_dtype, device=dev)
            return torch.empty(*(args or (0,)), dtype=_dtype, device=dev)

        legacy.__name__ = name
        out[name] = legacy
    return out



_STORAGES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool", "ComplexFloat",
             "ComplexDouble")


@functools.lru_cache(maxsize=1)
def _storage_dtypes() -> dict[str, Any]:
    """``{"FloatStorage": torch.float32, ...}`` for the legacy storage classes this torch has (read once: the
    classes' dtype property warns that TypedStorage is deprecated)."""
    import torch

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for kind in _STORAGES:
            dtype = getattr(vars(torch.cuda).get(f"{kind}Storage"), "dtype", None)
            if isinstance(dtype, torch.dtype):
                out[f"{kind}Storage"] = dtype
    return out


def _legacy_storages(api: _Api) -> dict[str, Any]:
    """``torch.cuda.FloatStorage(n)`` / ``(sequence)``: a typed storage of that dtype on the selected device."""
    import torch

    dm, hit = api.dm, api.hit
    out: dict[str, Any] = {}
    for name, dtype in _storage_dtypes().items():

        def storage(*args: Any, device: Any = None, _name: str = name, _dtype: Any = dtype, **kwargs: Any) -> Any:
            dev = dm.device(None if device is None else dm.index_of(device))
            hit(C + _name, f"{_name}(...)", dev)
            with warnings.catch_warnings():   # TypedStorage's deprecation: the script asked for a typed storage
                warnings.simplefilter("ignore", UserWarning)
                return torch.TypedStorage(*args, dtype=_dtype, device=dev, **kwargs)

        storage.__name__ = name
        out[name] = storage
        api.produces[C + name] = (torch.TypedStorage,)
    return out


SECTIONS = (_queries, _current_device, _rng, _legacy_types, _legacy_storages)
