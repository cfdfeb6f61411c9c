"""Replacements for ``torch.cuda.*`` functions under the shim.

Each replacement calls through the selected backend's device module (``torch.npu``,
``torch.xpu`` ...). Where that module lacks a function -- always the case on a CPU
target -- a documented stand-in answers: memory statistics are 0, seeding and RNG
state go to the CPU generator, streams are no-ops and events time with the host
clock, so a CUDA-only script keeps running.

Every stand-in is *caller-aware*: calls from user code act on / answer for the
selected device; calls from installed libraries and from torch itself reach the
original ``torch.cuda`` function. So ``"cuda" if torch.cuda.is_available() else "cpu"``
in a script lands on the accelerator, while a library deciding whether to launch a
CUDA-only kernel -- or torch's own ``torch.manual_seed`` calling
``torch.cuda.manual_seed_all`` -- still sees the real CUDA runtime (see ``docs/shim.md``).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
import time
import types
from typing import Any, Callable

__all__ = ["build_cuda_api", "user_functions", "CpuStream", "CpuEvent"]

_STATS_INT = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")
_STATS_RESET = ("reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached", "reset_accumulated_memory_stats")


class CpuStream:
    """Stand-in for ``torch.cuda.Stream`` on a CPU target: work is synchronous, waits are no-ops."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = device
        self.priority = priority

    def wait_stream(self, stream: Any) -> None:
        """No-op: CPU work is already ordered."""

    def wait_event(self, event: Any) -> None:
        """No-op."""

    def record_event(self, event: Any = None) -> "CpuEvent":
        """Record and return an event."""
        event = event or CpuEvent()
        event.record(self)
        return event

    def synchronize(self) -> None:
        """No-op."""

    def query(self) -> bool:
        """Always True (nothing is pending)."""
        return True

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CpuStream)

    def __hash__(self) -> int:
        return hash(CpuStream)


class CpuEvent:
    """Stand-in for ``torch.cuda.Event`` on a CPU target; ``elapsed_time`` uses the host clock (ms)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, **kw: Any) -> None:
        self.enable_timing = enable_timing
        self._t: float | None = None

    def record(self, stream: Any = None) -> None:
        """Remember the time now."""
        self._t = time.perf_counter()

    def wait(self, stream: Any = None) -> None:
        """No-op."""

    def query(self) -> bool:
        """Always True."""
        return True

    def synchronize(self) -> None:
        """No-op."""

    def elapsed_time(self, end_event: "CpuEvent") -> float:
        """Milliseconds between this event and ``end_event`` (both must be recorded)."""
        if self._t is None or end_event._t is None:
            raise RuntimeError("CpuEvent.elapsed_time: both events must be recorded first (call .record())")
        return (end_event._t - self._t) * 1000.0


class _StreamContext:
    """``with torch.cuda.stream(s):`` -- a no-op context on a CPU target."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def __enter__(self) -> Any:
        return self.stream

    def __exit__(self, *exc: Any) -> None:
        return None


class _ProxyMeta(type):
    """``isinstance`` against a caller-aware stand-in class checks the classes it can produce."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls._torchport_classes)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls._torchport_classes)


def _dispatch(name: str, user_fn: Callable, real: Any, classifier: Any,
              produces: tuple[type, ...] = (), acting_fn: Callable | None = None) -> Any:
    """A stand-in for ``torch.cuda.<name>``: ``user_fn`` for user code, ``real`` for everyone else --
    except a library acting on a CUDA device the user handed down (``CallerClassifier.acts_for_user``),
    which gets ``acting_fn`` (default ``user_fn``).

    Classes (``Stream``, ``Event``, ``device``) get a class stand-in -- not a function -- so
    annotations such as ``Optional[torch.cuda.Stream]`` and ``isinstance`` keep working in
    code imported while the shim is active.
    """
    doc = (f"[torchport shim] ``torch.cuda.{name}`` for user code acts on the selected device; installed "
           f"libraries and torch itself get the original (see docs/shim.md).\n\n{getattr(real, '__doc__', '') or ''}")
    is_user, acts_for_user = classifier.is_user_file, classifier.acts_for_user
    acting = acting_fn or user_fn
    if isinstance(real, type):
        def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
            frame = sys._getframe(1)
            if is_user(frame.f_code.co_filename):
                return user_fn(*args, **kwargs)
            if acts_for_user(frame):
                return acting(*args, **kwargs)
            return real(*args, **kwargs)

        classes = tuple(c for c in (real, *produces) if isinstance(c, type))
        return _ProxyMeta(name, (), {"__new__": __new__, "__doc__": doc, "__module__": __name__,
                                     "__wrapped__": real, "_torchport_classes": classes})

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        if is_user(frame.f_code.co_filename):
            return user_fn(*args, **kwargs)
        if acts_for_user(frame):
            return acting(*args, **kwargs)
        return real(*args, **kwargs)

    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__doc__ = doc
    stand_in.__wrapped__ = real  # type: ignore[attr-defined]
    return stand_in


def _r(device: Any) -> str:
    """A device argument as it appeared in the call (empty when omitted)."""
    return "" if device is None else repr(device)


def _host_memory() -> tuple[int, int]:
    """(free, total) bytes of host RAM, for ``mem_get_info`` on a CPU target."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):  # non-POSIX
        return 0, 0


@dataclasses.dataclass
class _Api:
    """What every section of the ``torch.cuda`` stand-ins shares."""

    shim: Any
    dm: Any
    target: Any
    accel: bool
    mod: Any
    hit: Callable

    def fn_of(self, name: str) -> Callable | None:
        """``name`` from the selected backend's device module (None on CPU or when it lacks it)."""
        return getattr(self.mod, name, None) if self.mod is not None else None

    def dev_arg(self, device: Any) -> Any:
        """A CUDA device argument as the target module expects it (None stays None)."""
        if device is None:
            return None
        if isinstance(device, int) and not isinstance(device, bool):
            return self.dm.device(device)
        return self.dm.map(device)


def build_cuda_api(shim: Any, originals: dict[str, Any]) -> dict[str, Any]:
    """Build ``{name: replacement}`` for ``torch.cuda`` attributes.

    Args:
        shim: the installing :class:`~torchport.shim.core.Shim` (map, report, classifier).
        originals: the current ``torch.cuda`` attributes by name (used by caller-aware
            queries to give libraries the real answer).

    Returns:
        Replacements only for names that exist in ``originals``; each section below
        builds one group (queries, current device, memory, RNG, streams and events).
    """
    produces: dict[str, tuple[type, ...]] = {}
    out = user_functions(shim, produces)

    def validated() -> bool:
        # a library validating the user's "cuda" request: it is redirected to the selected device, which exists
        shim.hit("torch.cuda.is_available", "is_available() (library, for your device)", True)
        return True

    acting = {"is_available": validated}
    return {name: _dispatch(name, fn, originals[name], shim.classifier, produces.get(name, ()), acting.get(name))
            for name, fn in out.items() if name in originals}


def user_functions(shim: Any, produces: dict[str, tuple[type, ...]] | None = None) -> dict[str, Any]:
    """``{name: implementation}``: what ``torch.cuda.<name>`` does for *user code* under ``shim`` (before the
    caller-aware dispatch). :func:`build_cuda_api` dispatches these; :mod:`torchport.shim.compat` calls them
    directly, so a fixed file's ``torchport.compat.<name>(...)`` does what ``torchport run`` does.

    Args:
        shim: the :class:`~torchport.shim.core.Shim` (or any object with its ``map``, ``target`` and ``hit``).
        produces: filled with the classes a class stand-in can produce (for ``isinstance``), when given.
    """
    accel = shim.map.accelerator
    api = _Api(shim=shim, dm=shim.map, target=shim.target, accel=accel,
               mod=shim.target.module if accel else None, hit=shim.hit)
    out: dict[str, Any] = {}
    produces = {} if produces is None else produces
    for section in (_queries, _current_device, _memory, _rng, _streams, _legacy_types):
        out.update(section(api, produces))
    return out


def _queries(api: _Api, produces: dict) -> dict[str, Any]:
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


def _current_device(api: _Api, produces: dict) -> dict[str, Any]:
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

        def __init__(self, device: Any) -> None:
            self.idx = dm.index_of(device)
            self.prev = dm.current
            negative = self.idx is not None and self.idx < 0  # torch.cuda.device(-1) is a no-op
            hit("torch.cuda.device", f"device({_r(device)})", "(no-op)" if negative else dm.device(self.idx))

        def __enter__(self) -> None:
            self.prev = dm.current
            if self.idx is not None and self.idx >= 0 and self.idx != self.prev:
                set_dev(self.idx)

        def __exit__(self, *exc: Any) -> bool:
            if self.prev != dm.current:
                set_dev(self.prev)
            return False

    produces["device"] = (DeviceContext,)
    return dict(current_device=current_device, set_device=set_device, device=DeviceContext)


def _memory(api: _Api, produces: dict) -> dict[str, Any]:
    """``synchronize``, the allocator statistics and device properties (host stand-ins on CPU)."""
    dm, hit, fn_of, dev_arg, target = api.dm, api.hit, api.fn_of, api.dev_arg, api.target
    out: dict[str, Any] = {}

    def synchronize(device: Any = None) -> None:
        """Under the torchport shim: synchronize the selected device (no-op on CPU)."""
        hit("torch.cuda.synchronize", f"synchronize({_r(device)})", dm.device(dm.index_of(device)))
        fn = fn_of("synchronize")
        if fn is not None:
            fn(dev_arg(device)) if device is not None else fn()

    out["synchronize"] = synchronize

    def stat(name: str, default: Callable[[], Any], takes_device: bool = True) -> Callable:
        api_name = f"torch.cuda.{name}"

        def replacement(*args: Any, **kwargs: Any) -> Any:
            device = kwargs.pop("device", args[0] if args else None) if takes_device else None
            fn = fn_of(name)
            hit(api_name, f"{name}({_r(device)})", dm.device(dm.index_of(device)) if fn else "host stand-in")
            if fn is None:
                return default()
            if takes_device and device is not None:
                return fn(dev_arg(device), *args[1:], **kwargs)
            return fn(*args[1:] if takes_device else args, **kwargs)

        replacement.__name__ = replacement.__qualname__ = name
        replacement.__doc__ = f"Under the torchport shim: ``{name}`` of the selected device (see docs/shim.md)."
        return replacement

    for name in _STATS_INT:
        out[name] = stat(name, lambda: 0)
    for name in _STATS_RESET:
        out[name] = stat(name, lambda: None)
    out["memory_stats"] = stat("memory_stats", dict)
    out["memory_summary"] = stat("memory_summary", lambda: f"(no device memory statistics on {target})")
    out["mem_get_info"] = stat("mem_get_info", _host_memory)
    out["empty_cache"] = stat("empty_cache", lambda: None, takes_device=False)
    out["ipc_collect"] = stat("ipc_collect", lambda: None, takes_device=False)
    out["get_device_name"] = stat("get_device_name", lambda: platform.processor() or platform.machine() or "cpu")
    out["get_device_capability"] = stat("get_device_capability", lambda: (0, 0))
    out["get_device_properties"] = stat("get_device_properties", lambda: types.SimpleNamespace(
        name=platform.processor() or "cpu", total_memory=_host_memory()[1], major=0, minor=0,
        multi_processor_count=os.cpu_count() or 1))
    return out


def _rng(api: _Api, produces: dict) -> dict[str, Any]:
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


def _streams(api: _Api, produces: dict) -> dict[str, Any]:
    """Streams and events of the selected device (:class:`CpuStream` / :class:`CpuEvent` on CPU)."""
    import torch

    dm, hit, fn_of, dev_arg, accel = api.dm, api.hit, api.fn_of, api.dev_arg, api.accel
    stream_cls = fn_of("Stream") or (CpuStream if not accel else getattr(torch, "Stream", CpuStream))
    event_cls = fn_of("Event") or (CpuEvent if not accel else getattr(torch, "Event", CpuEvent))
    cpu_stream = CpuStream()

    def Stream(device: Any = None, priority: int = 0, **kwargs: Any) -> Any:  # noqa: N802 - mirrors the class
        hit("torch.cuda.Stream", f"Stream({_r(device)})", dm.device(dm.index_of(device)))
        if stream_cls is CpuStream:
            return CpuStream(device, priority)
        return stream_cls(device=dev_arg(device) or dm.device(), priority=priority, **kwargs)

    def Event(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - mirrors the class
        hit("torch.cuda.Event", "Event()", dm.device())
        if event_cls is getattr(torch, "Event", None):
            kwargs.setdefault("device", dm.device())
        return event_cls(*args, **kwargs)

    def current_stream(device: Any = None) -> Any:
        """Under the torchport shim: the current stream of the selected device."""
        hit("torch.cuda.current_stream", f"current_stream({_r(device)})", dm.device(dm.index_of(device)))
        fn = fn_of("current_stream")
        return fn(dev_arg(device)) if fn is not None else cpu_stream

    def default_stream(device: Any = None) -> Any:
        """Under the torchport shim: the default stream of the selected device."""
        hit("torch.cuda.default_stream", f"default_stream({_r(device)})", dm.device(dm.index_of(device)))
        fn = fn_of("default_stream")
        return fn(dev_arg(device)) if fn is not None else cpu_stream

    def stream(stream: Any = None) -> Any:  # torch's signature: stream(stream), also called as stream(stream=s)
        """Under the torchport shim: ``with torch.cuda.stream(s):`` on the selected device."""
        s = stream
        hit("torch.cuda.stream", "stream(s)", dm.device())
        fn = fn_of("stream")
        return fn(s) if fn is not None and not isinstance(s, CpuStream) else _StreamContext(s)

    produces.update(Stream=(stream_cls,), Event=(event_cls,))
    return dict(Stream=Stream, Event=Event, current_stream=current_stream, default_stream=default_stream,
                stream=stream)


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


def _legacy_types(api: _Api, produces: dict) -> dict[str, Any]:
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

