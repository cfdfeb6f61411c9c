"""Streams and events under the shim: the selected backend's, or CPU streams / host-clock events on a CPU target.

``set_stream`` / ``StreamContext`` / ``stream(s)`` act on the target's streams (``torch.npu.set_stream``
...); on a CPU target they make a :class:`CpuStream` current for this thread, so ``current_stream()``
returns the stream the script selected.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from torchport.shim._cuda_api import C, _Api, _r

__all__ = ["CpuStream", "CpuEvent", "SECTIONS"]


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

    def __eq__(self, other: Any) -> bool:  # one CPU: every CPU stream orders work the same way
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


class _CpuStreams:
    """The current CPU stream of each thread (``set_stream``), else the default one."""

    def __init__(self) -> None:
        self.default = CpuStream()
        self._local = threading.local()

    def current(self) -> CpuStream:
        return getattr(self._local, "stream", None) or self.default

    def set(self, stream: Any) -> None:
        if stream is not None:
            self._local.stream = stream


class _CpuStreamContext:
    """``with torch.cuda.StreamContext(s):`` / ``stream(s)`` on a CPU target: ``s`` is current for the block."""

    def __init__(self, streams: _CpuStreams, stream: Any) -> None:
        self.stream, self._streams, self._prev = stream, streams, None

    def __enter__(self) -> Any:
        self._prev = self._streams.current()
        self._streams.set(self.stream)
        return self.stream

    def __exit__(self, *exc: Any) -> None:
        if self.stream is not None:
            self._streams.set(self._prev)
        return None


def _streams(api: _Api) -> dict[str, Any]:
    """Streams and events of the selected device (:class:`CpuStream` / :class:`CpuEvent` on CPU)."""
    import torch

    dm, hit, fn_of, dev_arg, accel = api.dm, api.hit, api.fn_of, api.dev_arg, api.accel
    stream_cls = fn_of("Stream") or (CpuStream if not accel else getattr(torch, "Stream", CpuStream))
    event_cls = fn_of("Event") or (CpuEvent if not accel else getattr(torch, "Event", CpuEvent))
    cpu = _CpuStreams()

    def Stream(device: Any = None, priority: int = 0, **kwargs: Any) -> Any:  # noqa: N802 - mirrors the class
        hit(C + "Stream", f"Stream({_r(device)})", dm.device(dm.index_of(device)))
        if stream_cls is CpuStream:
            return CpuStream(device, priority)
        return stream_cls(device=dev_arg(device) or dm.device(), priority=priority, **kwargs)

    def Event(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - mirrors the class
        hit(C + "Event", "Event()", dm.device())
        if event_cls is getattr(torch, "Event", None):
            kwargs.setdefault("device", dm.device())
        return event_cls(*args, **kwargs)

    def current_stream(device: Any = None) -> Any:
        """Under the torchport shim: the current stream of the selected device."""
        hit(C + "current_stream", f"current_stream({_r(device)})", dm.device(dm.index_of(device)))
        fn = fn_of("current_stream")
        return fn(dev_arg(device)) if fn is not None else cpu.current()

    def default_stream(device: Any = None) -> Any:
        """Under the torchport shim: the default stream of the selected device."""
        hit(C + "default_stream", f"default_stream({_r(device)})", dm.device(dm.index_of(device)))
        fn = fn_of("default_stream")
        return fn(dev_arg(device)) if fn is not None else cpu.default

    def set_stream(stream: Any) -> None:
        """Under the torchport shim: make ``stream`` current on its device (the selected backend's streams)."""
        hit(C + "set_stream", "set_stream(s)", dm.device())
        fn = fn_of("set_stream")
        if fn is not None and not isinstance(stream, CpuStream):
            return fn(stream)
        cpu.set(stream)
        return None

    def StreamContext(stream: Any) -> Any:  # noqa: N802 - mirrors the class
        """Under the torchport shim: ``with torch.cuda.StreamContext(s):`` on the selected backend's streams."""
        hit(C + "StreamContext", "StreamContext(s)", dm.device())
        cls = fn_of("StreamContext")
        if cls is not None and not isinstance(stream, CpuStream):
            return cls(stream)
        return _CpuStreamContext(cpu, stream)

    def stream(stream: Any = None) -> Any:  # torch's signature: stream(stream), also called as stream(stream=s)
        """Under the torchport shim: ``with torch.cuda.stream(s):`` on the selected device."""
        hit(C + "stream", "stream(s)", dm.device())
        fn = fn_of("stream")
        return fn(stream) if fn is not None and not isinstance(stream, CpuStream) else _CpuStreamContext(cpu, stream)

    external_fix = "it wraps a raw CUDA stream handle, which this target cannot run; drop it"
    external = api.via_or_refuse(C + "ExternalStream", external_fix, device_pos=1)
    from_external = api.via_or_refuse(C + "get_stream_from_external", external_fix, path="ExternalStream",
                                      device_pos=1)
    context_cls = fn_of("StreamContext")
    api.produces.update({C + "Stream": (stream_cls,), C + "Event": (event_cls,),
                         C + "StreamContext": tuple(c for c in (context_cls, _CpuStreamContext) if c is not None)})
    if fn_of("ExternalStream") is not None:
        api.produces[C + "ExternalStream"] = (fn_of("ExternalStream"),)
    return dict(Stream=Stream, Event=Event, current_stream=current_stream, default_stream=default_stream,
                stream=stream, set_stream=set_stream, StreamContext=StreamContext, ExternalStream=external,
                get_stream_from_external=from_external)


SECTIONS = (_streams,)
