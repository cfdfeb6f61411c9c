"""The rest of the CUDA surface under the shim: runtime state, RNG generators, NVTX, ``torch.cuda.amp`` helpers
and ``torch.backends.cuda`` calls that reach the CUDA runtime.

NVTX ranges become ``torch.profiler.record_function`` ranges (visible in the torch profiler on every
target, the rewrite ``torchport fix`` makes for ``nvtx.range``); ``custom_fwd`` / ``custom_bwd`` take
the selected device type, so ``cast_inputs`` follows the autocast the shim redirected.
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import Any

from torchport.shim._cuda_api import C, Value, _Api

__all__ = ["SECTIONS"]

_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}
_GUARD = "guard it with `if torchport.current().type == \"cuda\":`"


def _runtime(api: _Api) -> dict[str, Any]:
    """Initialisation, peer access, sync debug mode, library handles and green contexts."""
    import torch

    dm, via, accel = api.dm, api.via, api.accel
    settings = {"sync_debug_mode": 0}

    def peer_on_cpu(device: Any, peer_device: Any) -> bool:
        for value, what in ((device, "device"), (peer_device, "peer device")):
            idx = dm.index_of(value)
            if idx not in (None, 0):
                raise AssertionError(f"Invalid {what} id: {value!r} (the CPU target has one device)")
        return False

    def can_device_access_peer(device: Any, peer_device: Any) -> bool:
        """Under the torchport shim: the selected backend's answer for two of its device indices."""
        fn = api.fn_of("can_device_access_peer")
        api.hit(C + "can_device_access_peer", f"can_device_access_peer({device!r}, {peer_device!r})",
                dm.device() if fn is not None else "stand-in")
        if fn is None:
            return peer_on_cpu(device, peer_device)
        current = dm.current
        a, b = (current if dm.index_of(v) is None else dm.index_of(v) for v in (device, peer_device))
        return fn(a, b)

    def set_sync_on_cpu(debug_mode: Any) -> None:
        if isinstance(debug_mode, str):
            if debug_mode not in _SYNC_MODES:
                raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
            debug_mode = _SYNC_MODES[debug_mode]
        settings["sync_debug_mode"] = int(debug_mode)

    def is_tf32_supported() -> bool:
        """Under the torchport shim: False (TF32 is an NVIDIA format)."""
        api.hit(C + "is_tf32_supported", "is_tf32_supported()", False)
        return False

    out: dict[str, Any] = {
        "init": via(C + "init", lambda: None, device_pos=None),
        "is_initialized": via(C + "is_initialized", lambda: True, device_pos=None),
        "can_device_access_peer": can_device_access_peer,
        "get_sync_debug_mode": via(C + "get_sync_debug_mode", lambda: settings["sync_debug_mode"], device_pos=None),
        "set_sync_debug_mode": via(C + "set_sync_debug_mode", set_sync_on_cpu, device_pos=None),
        "is_tf32_supported": is_tf32_supported,
        "current_blas_handle": api.via_or_refuse(C + "current_blas_handle", "a cuBLAS handle feeds CUDA kernels "
                                                 "only; call the kernel's portable op instead"),
        "current_solver_handle": api.refuse(C + "current_solver_handle",
                                            "a cuSOLVER handle feeds CUDA kernels only; use torch.linalg"),
        "cudart": api.refuse(C + "cudart", f"the CUDA runtime bindings have no counterpart; {_GUARD}"),
        "check_error": api.refuse(C + "check_error", f"it checks a CUDA runtime error code; {_GUARD}"),
        "GreenContext": api.refuse(C + "GreenContext", "green contexts partition NVIDIA SMs; drop it, or on an npu "
                                                       "use torch.npu.set_device_limit / set_stream_limit"),
    }

    def default_generators() -> tuple:
        gens = api.fn_of("default_generators") if accel else None
        return tuple(gens) if gens is not None else (torch.default_generator,)

    out["default_generators"] = Value(default_generators)
    return out


class _Ranges:
    """NVTX's push/pop and start/end ranges as ``torch.profiler.record_function`` ranges."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._started: dict[int, Any] = {}
        self._ids = itertools.count(1)

    def _stack(self) -> list:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    @staticmethod
    def _enter(msg: str) -> Any:
        from torch.autograd.profiler import record_function

        rf = record_function(str(msg))
        rf.__enter__()
        return rf

    def push(self, msg: str) -> int:
        stack = self._stack()
        stack.append(self._enter(msg))
        return len(stack) - 1          # NVTX: the 0-based depth of the range started

    def pop(self) -> int:
        stack = self._stack()
        if not stack:
            return -1                  # NVTX: a negative value when no range is open
        stack.pop().__exit__(None, None, None)
        return len(stack)              # the depth of the range ended

    def start(self, msg: str) -> int:
        rid = next(self._ids)
        self._started[rid] = self._enter(msg)
        return rid

    def end(self, range_id: int) -> None:
        rf = self._started.pop(range_id, None)
        if rf is not None:
            rf.__exit__(None, None, None)

    def mark(self, msg: str) -> None:
        self._enter(msg).__exit__(None, None, None)


def _nvtx(api: _Api) -> dict[str, Any]:
    """``torch.cuda.nvtx.*`` as record_function ranges."""
    import contextlib

    ranges, hit = _Ranges(), api.hit
    N = C + "nvtx."

    def counted(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            hit(N + name, f"nvtx.{name}(...)", "torch.profiler.record_function")
            return fn(*args, **kwargs)

        call.__name__ = call.__qualname__ = name
        return call

    @contextlib.contextmanager
    def nvtx_range(msg: str, *args: Any, **kwargs: Any) -> Any:
        hit(N + "range", "nvtx.range(...)", "torch.profiler.record_function")
        ranges.push(msg.format(*args, **kwargs))
        try:
            yield
        finally:
            ranges.pop()

    return {N + "range_push": counted("range_push", ranges.push), N + "range_pop": counted("range_pop", ranges.pop),
            N + "range_start": counted("range_start", ranges.start), N + "range_end": counted("range_end", ranges.end),
            N + "mark": counted("mark", ranges.mark), N + "range": nvtx_range}


def _amp(api: _Api) -> dict[str, Any]:
    """``torch.cuda.amp``: custom_fwd / custom_bwd on the selected device type; autocast / GradScaler for fixed files
    (the shim redirects those in torch.amp's base classes, ``_redirects.amp_patches``)."""
    import torch

    dm, hit, accel = api.dm, api.hit, api.accel
    A = C + "amp."

    def custom_fwd(fwd: Any = None, *, cast_inputs: Any = None) -> Any:
        """Under the torchport shim: ``torch.amp.custom_fwd(device_type=<the selected type>)``; inside a script
        autocast region the backend's AMP policy runs in fp32, ``cast_inputs`` still casts (as on the GPU)."""
        if fwd is None:
            return functools.partial(custom_fwd, cast_inputs=cast_inputs)
        hit(A + "custom_fwd", "custom_fwd", f"device_type={dm.type!r}")
        decorated = torch.amp.custom_fwd(fwd, device_type=dm.type, cast_inputs=cast_inputs)
        if cast_inputs is None:
            return decorated
        from torch.amp.autocast_mode import _cast

        from torchport.runtime.amp import in_policy_fp32_autocast

        @functools.wraps(fwd)
        def forward(*args: Any, **kwargs: Any) -> Any:
            if not in_policy_fp32_autocast() or torch.is_autocast_enabled(dm.type):
                return decorated(*args, **kwargs)
            args[0]._dtype, args[0]._fwd_used_autocast = torch.get_autocast_dtype(dm.type), False
            return fwd(*_cast(args, dm.type, cast_inputs), **_cast(kwargs, dm.type, cast_inputs))

        return forward

    def custom_bwd(bwd: Any = None) -> Any:
        """Under the torchport shim: ``torch.amp.custom_bwd(device_type=<the selected type>)``."""
        hit(A + "custom_bwd", "custom_bwd", f"device_type={dm.type!r}")
        return torch.amp.custom_bwd(bwd, device_type=dm.type)

    def amp_definitely_not_available() -> bool:
        hit(A + "amp_definitely_not_available", "amp_definitely_not_available()", not accel)
        return not accel

    def autocast(enabled: bool = True, dtype: Any = torch.float16, cache_enabled: bool = True) -> Any:
        """``torch.cuda.amp.autocast()`` for a fixed file: :func:`torchport.autocast` on the selected device type
        (the backend's AMP policy decides, as under ``run``)."""
        from torchport.runtime.amp import autocast as policy_autocast

        return policy_autocast(dtype, enabled=enabled, cache_enabled=cache_enabled, device_type=dm.type)

    def grad_scaler(*args: Any, **kwargs: Any) -> Any:
        """``torch.cuda.amp.GradScaler()`` for a fixed file: torch.amp.GradScaler of the selected device type."""
        return torch.amp.GradScaler(dm.type, *args, **kwargs)

    return {A + "custom_fwd": custom_fwd, A + "custom_bwd": custom_bwd,
            A + "amp_definitely_not_available": amp_definitely_not_available, A + "autocast": autocast,
            A + "GradScaler": grad_scaler}


class _NoPlanCache:
    """``torch.backends.cuda.cufft_plan_cache`` off CUDA: torch's CPU FFT keeps no plan cache."""

    def __init__(self) -> None:
        object.__setattr__(self, "max_size", 0)

    size = 0

    def clear(self) -> None:
        """Nothing to clear."""

    def __getitem__(self, device: Any) -> "_NoPlanCache":
        return self


def _backends_cuda(api: _Api) -> dict[str, Any]:
    """``torch.backends.cuda`` calls that reach the CUDA runtime: workspace sizes, cuDNN attention, the FFT cache."""
    B = "torch.backends.cuda."
    hit = api.hit

    def workspace(name: str) -> Any:
        def size_fn(size: Any = None, backend: Any = None) -> int:
            if size is not None and (not isinstance(size, int) or size < 0):
                raise ValueError(f"{name}: size must be a non-negative int, got {size!r}")
            hit(B + name, f"{name}(...)", "0 (no cuBLAS on this target)")
            return 0

        size_fn.__name__ = size_fn.__qualname__ = name
        size_fn.__doc__ = "Under the torchport shim: 0 -- no cuBLAS workspace on this target."
        return size_fn

    def can_use_cudnn_attention(params: Any, debug: bool = False) -> bool:
        """Under the torchport shim: False -- no cuDNN attention kernel on this target."""
        hit(B + "can_use_cudnn_attention", "can_use_cudnn_attention(...)", False)
        return False

    cache = _NoPlanCache()
    return {**{B + n: workspace(n) for n in ("cublas_workspace_size", "cublaslt_workspace_size", "blas_workspace_size")},
            B + "can_use_cudnn_attention": can_use_cudnn_attention, B + "cufft_plan_cache": Value(lambda: cache)}


SECTIONS = (_runtime, _nvtx, _amp, _backends_cuda)
