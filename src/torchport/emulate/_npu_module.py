"""The ``torch.npu`` module of the emulated device (names and signatures follow torch_npu).

While the emulator is installed this module object *is* ``torch.npu`` (and
``torch_npu.npu``). Everything answers from :data:`torchport.emulate._state.STATE`:
device count and current device, one CPU generator per device as the device RNG,
and byte counters of live tensors per device for the memory functions.

Example::

    import torch, torchport.emulate
    torchport.emulate.install(devices=2)
    torch.npu.set_device(1)
    x = torch.ones(1024, device="npu")
    torch.npu.memory_allocated(1)      # 4096
    torch.npu.get_device_name(1)       # 'Ascend910B3 (emulated)'
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import time
import uuid
from typing import Any

import torch

from torchport.emulate import _npu_amp as amp  # noqa: F401  (torch.npu.amp)
from torchport.emulate import _numerics
from torchport.emulate._state import STATE
from torchport.runtime.graphs import HostGraph as _HostGraph

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device", "set_device", "device",
    "device_of", "synchronize", "get_device_name", "get_device_properties", "get_device_capability",
    "can_device_access_peer", "mem_get_info", "utilization", "is_bf16_supported", "get_amp_supported_dtype",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state", "set_rng_state",
    "get_rng_state_all", "set_rng_state_all", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "memory_cached", "max_memory_cached", "reset_peak_memory_stats",
    "reset_max_memory_allocated", "reset_max_memory_cached", "reset_accumulated_memory_stats", "empty_cache",
    "memory_stats", "memory_summary", "Stream", "Event", "StreamContext", "stream", "set_stream",
    "current_stream", "default_stream", "get_npu_overflow_flag", "clear_npu_overflow_flag", "amp",
    "set_compile_mode", "is_jit_compile_false", "set_option", "config", "matmul", "conv",
]

#: what the emulated card calls itself (a real 910B3 reports "Ascend910B3")
DEVICE_NAME = "Ascend910B3 (emulated)"


# ----------------------------------------------------------------------------- devices
def is_available() -> bool:
    """True while the emulator is installed with at least one (visible) device."""
    return STATE.installed and device_count() > 0


# ----------------------------------------------------------------------------- process model
# torch_npu's (and torch.cuda's): the runtime initialises on first use (torch calls _lazy_init() for the first
# npu tensor; current_device/set_device/synchronize call it too); until then device_count() re-reads
# ASCEND_RT_VISIBLE_DEVICES, afterwards the count is fixed; a child forked after initialisation may not use
# the npu. On the emulator the host memory would survive a fork, so this is what keeps a forked child from
# silently working where the card's runtime refuses.
_proc: dict[str, Any] = {"initialized": False, "bad_fork": False, "pid": 0, "count": None, "at_fork": False}


def _parse_visible_devices() -> list[int]:
    """``ASCEND_RT_VISIBLE_DEVICES`` as torch_npu reads it: digits and commas, up to the first other character."""
    var = os.getenv("ASCEND_RT_VISIBLE_DEVICES")
    if var is None:
        return list(range(64))
    end = next((i for i, c in enumerate(var) if not (c.isdigit() or c == ",")), len(var))
    out: list[int] = []
    for elem in var[:end].split(",") if var else ():
        if not elem:
            break
        out.append(int(elem))
    return out


def _visible_count() -> int:
    """The emulated cards the visible-devices list selects (torch_npu's trimming against the card count)."""
    visible = _parse_visible_devices()
    for idx, val in enumerate(visible):
        if idx > 0 and val <= visible[idx - 1]:  # the runtime needs ascending ids
            return 0
        if val >= STATE.devices:
            return idx
    return len(visible)


def is_initialized() -> bool:
    """True once the npu runtime of this process has been initialised (first use), and not in a bad fork."""
    return _proc["initialized"] and not _proc["bad_fork"]


def init() -> None:
    """Initialize the npu runtime now (otherwise it happens on first use)."""
    _lazy_init()


def _lazy_init() -> None:
    if _proc["initialized"] or not STATE.installed:
        return
    if _proc["bad_fork"]:
        raise RuntimeError("Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, "
                           "you must use the 'spawn' start method")
    count = _visible_count()
    _proc.update(initialized=True, pid=os.getpid(), count=count)
    if count != STATE.devices:
        STATE.native.set_available(True, count)


def _is_in_bad_fork() -> bool:
    return _proc["bad_fork"]


def _after_fork() -> None:
    if _proc["initialized"] and _proc["pid"] != os.getpid():
        _proc.update(initialized=False, bad_fork=True)
        if STATE.native is not None:
            STATE.native.set_requires_device_init(True)  # torch asks _lazy_init() again, which refuses


def _reset_runtime() -> None:
    """A freshly installed emulator: not initialised yet (its own start-up probe does not count as first use)."""
    _proc.update(initialized=False, count=None)
    STATE.native.set_requires_device_init(True)
    if not _proc["at_fork"]:
        os.register_at_fork(after_in_child=_after_fork)
        _proc["at_fork"] = True


def _resized() -> None:
    """The emulated card count changed (``install()`` reconfigured): an initialised runtime counts again."""
    if _proc["count"] is not None:
        _proc["count"] = _visible_count()
        STATE.native.set_available(True, _proc["count"])


def device_count() -> int:
    """Number of emulated devices visible to this process (0 when not installed).

    ``ASCEND_RT_VISIBLE_DEVICES`` selects among the emulated cards as on the card (read until the npu is
    initialised, fixed afterwards).
    """
    if not STATE.installed:
        return 0
    count = _proc["count"]
    return _visible_count() if count is None else count


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    if device is None:
        if optional:
            return STATE.current
        raise ValueError("Expected a npu device with a specified index or an integer, but got: None")
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, globals()["device"]):
        return device.idx
    if isinstance(device, torch.device):
        if device.type == "cpu" and allow_cpu:
            return -1
        if device.type != "npu":
            raise ValueError(f"Expected a npu device, but got: {device}")
        if device.index is None:
            if optional:
                return STATE.current
            raise ValueError(f"Expected a npu device with a specified index or an integer, but got: {device}")
        return device.index
    raise ValueError(f"Expected a npu device, an index or None, but got: {device!r}")


def _checked(device: Any) -> int:
    idx = _get_device_index(device, optional=True)
    if idx < 0 or idx >= device_count():
        raise AssertionError("Invalid device id")
    return idx


class _Utils:
    """``torch.npu._utils`` (torch.serialization asks it for device indices)."""

    _get_device_index = staticmethod(_get_device_index)


_utils = _Utils()


def current_device() -> int:
    """Index of the current emulated device."""
    _lazy_init()
    return STATE.current


def set_device(device: Any) -> None:
    """Select the current device (``int``, ``"npu:1"`` or ``torch.device``); negative is a no-op."""
    idx = _get_device_index(device, optional=True)
    if idx < 0:
        return
    _lazy_init()
    _checked(idx)
    STATE.current = idx


class device:
    """Context manager that changes the current device (``with torch.npu.device(1): ...``)."""

    def __init__(self, device: Any) -> None:
        self.idx = _get_device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx < 0:
            return self
        self.prev_idx = STATE.current
        set_device(self.idx)
        return self

    def __exit__(self, *exc) -> bool:
        if self.prev_idx >= 0:
            STATE.current = self.prev_idx
        return False


class device_of(device):
    """Context manager selecting the device of tensor ``obj`` (no-op for CPU tensors)."""

    def __init__(self, obj: Any) -> None:
        super().__init__(obj.get_device() if getattr(obj, "is_npu", False) else -1)


def synchronize(device: Any = None) -> None:
    """Wait for all work on the device (the emulator runs synchronously: returns at once)."""
    _lazy_init()
    _get_device_index(device, optional=True)  # a non-npu device is rejected as on the card


def get_device_name(device_name: Any = None) -> str:
    _checked(device_name)
    return DEVICE_NAME


class _DeviceProperties(collections.namedtuple("_NPUDeviceProperties", "name total_memory cube_core_num vector_core_num L2_cache_size")):
    #: CUDA property names torch_npu answers with None (code written for CUDA reads them)
    _CUDA_ONLY = frozenset({"major", "minor", "is_multi_gpu_board", "is_integrated", "max_threads_per_multi_processor",
                            "warp_size", "regs_per_multiprocessor", "gcnArchName", "multi_processor_count"})

    def __getattr__(self, name: str) -> Any:
        if name in self._CUDA_ONLY:
            return None
        raise AttributeError(f"'_NPUDeviceProperties' object has no attribute {name!r}")

    def __repr__(self) -> str:
        return (f"_NPUDeviceProperties(name='{self.name}', total_memory={self.total_memory // 1024**2}MB, "
                f"cube_core_num={self.cube_core_num}, vector_core_num={self.vector_core_num}, "
                f"L2_cache_size={self.L2_cache_size // 1024**2}MB)")


def get_device_properties(device_name: Any = None) -> _DeviceProperties:
    idx = _checked(device_name)
    props = _DeviceProperties(DEVICE_NAME, STATE.native.total_memory(), 20, 40, 192 * 1024**2)
    props.uuid = uuid.uuid5(uuid.NAMESPACE_OID, f"torchport-emulated-npu-{idx}")  # stable per card
    return props


def get_device_capability(device: Any = None) -> tuple[int, int] | None:
    """torch_npu returns None unless TORCH_NPU_DEVICE_CAPABILITY="major.minor" is set; so does the emulator.

    ``device`` may also be the card's name (``get_device_properties(0).name``)."""
    if not (isinstance(device, str) and device == DEVICE_NAME):
        _checked(device)
    major, _, minor = os.environ.get("TORCH_NPU_DEVICE_CAPABILITY", "").partition(".")
    if major.isdigit() and minor.isdigit():
        return int(major), int(minor)
    return None


def can_device_access_peer(device_id: Any, peer_device_id: Any) -> bool:
    """True between two different emulated cards (same host memory); False for a card and itself."""
    count = device_count()
    if not isinstance(device_id, int) or not 0 <= device_id < count:
        raise AssertionError("Invalid device id")
    if not isinstance(peer_device_id, int) or not 0 <= peer_device_id < count:
        raise AssertionError("Invalid peer device id")
    return device_id != peer_device_id


def utilization(device: Any = None) -> int:
    _checked(device)
    return 0


def is_bf16_supported(including_emulation: bool = False) -> bool:
    """The emulated card is a 910B (bf16 capable)."""
    return True


def get_amp_supported_dtype() -> list:
    return [torch.float16, torch.bfloat16, torch.float32]


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled("npu")


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype("npu")


def get_npu_overflow_flag() -> bool:
    """True when a float16 result overflowed since the last clear (saturation mode)."""
    return bool(STATE.overflow_flag)


def clear_npu_overflow_flag() -> None:
    STATE.overflow_flag = False


# ----------------------------------------------------------------------------- runtime options
class _Options:
    """Attribute bag for ``torch.npu.config`` / ``.matmul`` / ``.conv`` (settings have no effect here)."""

    def __init__(self, **defaults: Any) -> None:
        self.__dict__.update(defaults)


config = _Options(allow_internal_format=False)
matmul = _numerics.MatmulFlags()  # allow_hf32 switches the emulated HF32 (set_numerics("npu"))
conv = _numerics.ConvFlags()
_options: dict[str, Any] = {"jitCompile": "disable"}


def set_compile_mode(jit_compile: bool = False) -> None:
    """Accepted and remembered (``torch.npu.set_compile_mode(jit_compile=False)`` is common in Ascend scripts)."""
    _options["jitCompile"] = "enable" if jit_compile else "disable"


def is_jit_compile_false() -> bool:
    return _options["jitCompile"] == "disable"


def set_option(option: dict) -> None:
    """Accept torch_npu ``set_option({...})`` settings (recorded; they do not change the emulation)."""
    if not isinstance(option, dict):
        raise TypeError(f"npu option must be a dict, got {type(option).__name__}")
    _options.update({str(k): v for k, v in option.items()})


# ----------------------------------------------------------------------------- RNG
def _gen(device: Any) -> torch.Generator:
    return STATE.default_generators[_checked(device)]


def manual_seed(seed: int) -> None:
    """Seed the current device's generator."""
    _gen(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every device's generator (``torch.manual_seed`` calls this too)."""
    for g in STATE.default_generators:
        g.manual_seed(int(seed))


def seed() -> None:
    _gen(None).seed()


def seed_all() -> None:
    s = _gen(None).seed()
    for g in STATE.default_generators:
        g.manual_seed(s)


def initial_seed() -> int:
    return _gen(None).initial_seed()


def get_rng_state(device: Any = "npu") -> torch.Tensor:
    return _gen(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "npu") -> None:
    _gen(device).set_state(new_state.clone() if new_state.device.type == "cpu" else new_state.cpu())


def get_rng_state_all() -> list:
    return [g.get_state() for g in STATE.default_generators]


def set_rng_state_all(new_states: Any) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


# ----------------------------------------------------------------------------- memory
# One source of truth: the device allocator in npu_native.cpp (c10 DeviceStats per device, which
# torch.accelerator's memory functions read too). It caches nothing, so reserved == allocated.
def memory_stats_as_nested_dict(device: Any = None) -> dict:
    """``memory_stats`` as nested dicts (``{"allocated_bytes": {"all": {"current": ...}}}``), as torch_npu returns."""
    return STATE.native.memory_stats(_checked(device))


def memory_stats(device: Any = None) -> "collections.OrderedDict[str, int]":
    """torch_npu's caching-allocator statistics (``allocated_bytes.all.current``, ``segment.small_pool.peak``,
    ``num_ooms`` ...), flattened and sorted as torch_npu returns them."""
    flat: list[tuple[str, int]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            flat.append((prefix, value))

    walk("", memory_stats_as_nested_dict(device))
    return collections.OrderedDict(sorted(flat))


def memory_allocated(device: Any = None) -> int:
    """Bytes of npu blocks alive on the device (views counted once; blocks rounded to 512 bytes as on the card)."""
    return memory_stats_as_nested_dict(device)["allocated_bytes"]["all"]["current"]


def max_memory_allocated(device: Any = None) -> int:
    """Peak of :func:`memory_allocated` since start or the last :func:`reset_peak_memory_stats`."""
    return memory_stats_as_nested_dict(device)["allocated_bytes"]["all"]["peak"]


def memory_reserved(device: Any = None) -> int:
    """Bytes the allocator holds from the device: equal to :func:`memory_allocated` (nothing is cached)."""
    return memory_stats_as_nested_dict(device)["reserved_bytes"]["all"]["current"]


def max_memory_reserved(device: Any = None) -> int:
    return memory_stats_as_nested_dict(device)["reserved_bytes"]["all"]["peak"]


memory_cached = memory_reserved
max_memory_cached = max_memory_reserved


def reset_peak_memory_stats(device: Any = None) -> None:
    STATE.native.reset_peak(_checked(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    STATE.native.reset_accumulated(_checked(device))


def empty_cache() -> None:
    """Nothing to release: the emulator's allocator returns freed blocks to the host at once."""


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """``(free, total)`` bytes: total is the 910B3's 64 GiB HBM."""
    return tuple(STATE.native.mem_get_info(_checked(device)))


def _summary_rows(stats: dict, rows: list[tuple[str, str, bool]]) -> list[str]:
    lines = []
    for key, name, is_bytes in rows:
        lines.append("-" * 75)
        for pool, label in (("all", name), ("large_pool", "      from large pool"),
                            ("small_pool", "      from small pool")):
            vals = [stats[f"{key}.{pool}.{m}"] for m in ("current", "peak", "allocated", "freed")]
            cells = [_format_size(v) if is_bytes else _format_count(v) for v in vals]
            lines.append(" {:<21} | {} | {} | {} | {} ".format(label, *cells))
    return lines


def _format_size(nbytes: int) -> str:
    for unit in ("B  ", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 * 1024 or unit == "TiB":
            return f"{nbytes:6d} {unit}"
        nbytes //= 1024
    return f"{nbytes:6d} PiB"  # pragma: no cover


def _format_count(count: int) -> str:
    for unit in (" ", "K", "M"):
        if abs(count) < 1000 * 1000 or unit == "M":
            return f"{count:7d} {unit}"
        count //= 1000
    return f"{count:7d} B"  # pragma: no cover


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of :func:`memory_stats` in torch_npu's layout (header with OOMs and retries, then one
    block per statistic, per pool)."""
    idx = _checked(device)
    stats = memory_stats(idx)
    rows = [("allocated_bytes", "Allocated memory", True), ("active_bytes", "Active memory", True),
            ("requested_bytes", "Requested memory", True), ("reserved_bytes", "NPU reserved memory", True),
            ("inactive_split_bytes", "Non-releasable memory", True), ("allocation", "Allocations", False),
            ("active", "Active allocs", False), ("segment", "NPU reserved segments", False),
            ("inactive_split", "Non-releasable allocs", False)]
    lines = ["=" * 75,
             " {_:16} PyTorch NPU memory summary, device ID {device:<18d} ".format(_="", device=idx),
             "-" * 75,
             "  {_:9} NPU OOMs: {ooms:<13d} | {_:6} npuMalloc retries: {retries:<9d}  ".format(
                 _="", ooms=stats["num_ooms"], retries=stats["num_alloc_retries"]),
             "=" * 75,
             "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    lines += _summary_rows(stats, rows if not abbreviated else rows[:1] + rows[3:4])
    lines += ["-" * 75,
              " {:<21} | {:>10} | {:>10} | {:>10} | {:>10} ".format(
                  "Oversize allocations", *(stats[f"oversize_allocations.{m}"]
                                            for m in ("current", "peak", "allocated", "freed"))),
              "=" * 75]
    return "|" + "|\n|".join(lines) + "|\n"


# ----------------------------------------------------------------------------- streams and events
#: PrivateUse1's number in c10::DeviceType (what ``Stream.device_type`` reports on npu)
_DEVICE_TYPE = 20


def _check_stream_ids(stream_id: Any, device_index: Any, device_type: Any) -> None:
    """The card's checks on ``Stream(stream_id=, device_index=, device_type=)`` (a rebuilt stream): the
    type checks of its argument parser, then ``NPUStream_internals`` (an id never handed out is rejected)."""
    for name, value in (("stream_id", stream_id), ("device_index", device_index), ("device_type", device_type)):
        if not isinstance(value, int):
            raise RuntimeError(f"Stream(): {name} must be an int, got {value!r}")
        if value < 0:
            raise RuntimeError(f"Stream(): {name} must be non-negative, got {value}")
    if device_type != _DEVICE_TYPE:
        raise RuntimeError(f"Stream(): device_type {device_type} is not the npu's ({_DEVICE_TYPE})")
    if device_index >= device_count():
        raise RuntimeError(f"Stream(): device_index {device_index} is out of range (device_count() is "
                           f"{device_count()})")
    STATE.native.stream_handle(stream_id, device_index)


def _is_external(stream_id: int) -> bool:
    return bool(stream_id & (1 << 30))


class Stream(torch.Stream):
    """A device stream (a ``torch.Stream`` of the npu device, so ``record_stream`` and ``torch.accelerator``
    accept it), with torch_npu's stream ids: ``stream_id >> 5`` is the class (3 normal pool, 4 high priority,
    2 sync-launch, 0 default), the low 5 bits the index in its pool. ``Stream(stream_id=, device_index=,
    device_type=)`` rebuilds one, with the card's checks; ``is_sync_launch=True`` takes a sync-launch stream.
    The emulator executes synchronously, so every stream is idle."""

    def __new__(cls, device: Any = None, priority: int = 0, is_sync_launch: Any = False, stream_ptr: int = 0,
                **kwargs: Any) -> "Stream":
        ids = [kwargs.pop(k, None) for k in ("stream_id", "device_index", "device_type")]
        if kwargs:
            raise TypeError(f"Stream() got an unexpected keyword argument {next(iter(kwargs))!r}")
        if any(ids):  # the card rebuilds only when one of the three is non-zero
            ids = [0 if v is None else v for v in ids]
            _check_stream_ids(*ids)
            return super().__new__(cls, stream_id=ids[0], device_index=ids[1], device_type=ids[2])
        idx = _get_device_index(device, optional=True)
        if stream_ptr:
            if priority != 0:
                raise RuntimeError("Priority was explicitly set for an external stream" + _card_error(0, 1))
            if is_sync_launch:
                raise RuntimeError("is_sync_launch was explicitly set for an external stream" + _card_error(0, 1))
            sid = STATE.native.stream_external(int(stream_ptr), idx)
        elif is_sync_launch:
            sid = STATE.native.stream_sync_launch(idx)
        else:
            sid = STATE.native.stream_new(idx, int(priority))
        return super().__new__(cls, stream_id=sid, device_index=idx, device_type=_DEVICE_TYPE)

    @property
    def npu_stream(self) -> int:
        """The stream's runtime handle (its emulated aclrtStream; an external stream's own handle)."""
        if _is_external(self.stream_id) and os.environ.get("PER_STREAM_QUEUE") == "1":
            raise RuntimeError("External NPU stream is not supported in NPUStream::stream() with per-stream task "
                               "queue." + _card_error(0, 7))
        return STATE.native.stream_handle(self.stream_id, self.device_index)

    @property
    def _as_parameter_(self) -> Any:
        import ctypes

        return ctypes.c_void_p(self.npu_stream)

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        pass

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def wait_stream(self, stream: "Stream") -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, torch.Stream) and super().__eq__(other)

    def __hash__(self) -> int:
        return hash((self.stream_id, self.device_index))

    def __repr__(self) -> str:
        return f"<torch_npu.npu.Stream device={self.device} npu_stream={self.npu_stream:#x}>"


class ExternalStream(Stream):
    """A stream made outside torch_npu (a raw handle, e.g. from ``torch_npu.npu.npurt().npuStreamCreate``):
    ops run on it, it can be current; ``synchronize``, ``query``, events and ``record_stream`` on it are
    rejected with the card's messages (the caller tracks its work)."""

    def __new__(cls, stream_ptr: int, device: Any = None, **kwargs: Any) -> "ExternalStream":
        with globals()["device"](device):
            return super().__new__(cls, stream_ptr=stream_ptr, **kwargs)


def _card_error(sub: int, code: int) -> str:
    """torch_npu's error suffix (``ERR<sub><code> PTA invalid parameter`` ...), from the native module."""
    return STATE.native.card_error(sub, code)


class _Npurt:
    """``torch_npu.npu.npurt()``: the runtime's stream calls, on the emulator's own runtime streams."""

    @staticmethod
    def npuStreamCreate(ptr: int) -> int:  # noqa: N802 - torch_npu's name
        """Create a runtime stream and write its handle at address ``ptr``; 0 on success."""
        return STATE.native.npurt_stream_create(int(ptr))

    @staticmethod
    def npuStreamDestroy(stream: int) -> int:  # noqa: N802
        """Destroy a stream made by ``npuStreamCreate``; 0 on success, ACL_ERROR_INVALID_PARAM otherwise."""
        return STATE.native.npurt_stream_destroy(int(stream))


def npurt() -> _Npurt:
    """The runtime API module (stream create/destroy on the emulator's runtime)."""
    return _Npurt()


class Event(torch.Event):
    """A timing event: ``elapsed_time`` is the host time between two ``record`` calls (ms), kept by the
    device's C++ event (so a plain ``torch.Event`` on npu times the same way). A ``torch.Event`` of the npu
    device, so ``torch.Stream.wait_event`` (``torch.accelerator.current_stream()``, as FSDP2 calls it with the
    events it made through ``torch.npu.Event``) accepts it."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> "Event":
        return super().__new__(cls, device=torch.device("npu"), enable_timing=enable_timing, blocking=blocking,
                               interprocess=interprocess)

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self._t: int | None = None

    def record(self, stream: Stream | None = None) -> None:
        super().record(stream if stream is not None else current_stream())
        self._t = time.perf_counter_ns()

    def wait(self, stream: Stream | None = None) -> None:
        super().wait(stream if stream is not None else current_stream())

    def __repr__(self) -> str:
        state = "recorded" if self._t is not None else "uninitialized"
        return f"<torch_npu.npu.Event {state}>"

    def recorded_time(self) -> int:
        """When the event was recorded (ns, host clock)."""
        if self._t is None:
            raise RuntimeError("Event must be recorded before recorded_time()")
        return self._t

    def elapsed_time(self, end_event: "Event") -> float:
        # torch.Event.elapsed_time takes only a plain torch.Event as `end_event`, so this subclass keeps the
        # host clock of its records itself (the C++ event behind a plain torch.Event on npu does the same)
        if not self.enable_timing or not getattr(end_event, "enable_timing", False):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self._t is None or end_event._t is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time." + _card_error(0, 5))
        return (end_event._t - self._t) / 1e6


def default_stream(device: Any = None) -> Stream:
    return Stream(stream_id=0, device_index=_get_device_index(device, optional=True), device_type=_DEVICE_TYPE)


def current_stream(device: Any = None) -> Stream:
    """The stream made current on ``device`` in this thread (``set_stream``, ``with torch.npu.stream(s)``,
    ``torch.accelerator.set_stream``: one record, in the device guard), else the default stream."""
    idx = _get_device_index(device, optional=True)
    return Stream(stream_id=STATE.native.stream_current(idx), device_index=idx, device_type=_DEVICE_TYPE)


def set_stream(stream: Stream) -> None:
    if stream is not None:
        STATE.native.stream_set(stream.stream_id, stream.device_index)


class StreamContext(contextlib.AbstractContextManager):
    """``with torch.npu.stream(s):`` makes ``s`` current on its device (work stays synchronous on the emulator)."""

    def __init__(self, stream_ctx: Stream | None) -> None:
        self.stream = stream_ctx
        self._previous: Stream | None = None

    def __enter__(self) -> "StreamContext":
        if self.stream is not None:
            self._previous = current_stream(self.stream.device.index)
            set_stream(self.stream)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.stream is not None:
            set_stream(self._previous)
        return None


def stream(stream: Stream | None) -> StreamContext:
    return StreamContext(stream)


# ----------------------------------------------------------------------------- torch_npu 2.14 completeness
# Every other name of torch_npu.npu.__all__ is either below (real behaviour on the emulator) or in
# NOT_EMULATED (docs/emulator.md has the same table); tests/emulate/test_emu_conformance.py checks both.
_settings: dict[str, Any] = {"sync_debug_mode": 0, "task_queue_enable": 1, "mm_bmm_format_nd": True, "aoe": None,
                             "deterministic_level": 0, "compatible_impl": False, "op_timeout_ms": None}
_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: Any) -> None:
    """Accepted and remembered (a documented no-op: the emulator never synchronizes implicitly)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_MODES[debug_mode]
    if int(debug_mode) not in (0, 1, 2):  # the card's check
        raise RuntimeError("invalid value of debug_mode, expected one of 0,1,2")
    _settings["sync_debug_mode"] = int(debug_mode)


def get_sync_debug_mode() -> int:
    return _settings["sync_debug_mode"]


def set_task_queue_enable(mode: Any) -> None:
    _settings["task_queue_enable"] = int(mode)


def get_task_queue_enable() -> int:
    return _settings["task_queue_enable"]


def set_mm_bmm_format_nd(is_nd: bool = True) -> None:
    _settings["mm_bmm_format_nd"] = bool(is_nd)


def get_mm_bmm_format_nd() -> bool:
    return _settings["mm_bmm_format_nd"]


def set_aoe(dump_path: Any) -> None:
    """AOE tuning is a CANN tool: the path is remembered, nothing is tuned."""
    _settings["aoe"] = str(dump_path)


def set_op_timeout_ms(timeout: int) -> None:
    timeout = int(timeout)
    if timeout < 0:  # torch_npu passes it as a C uint32: pybind11's messages
        raise OverflowError("can't convert negative value to unsigned int")
    if timeout >= 2**32:
        raise OverflowError("Overflow when unpacking long")
    _settings["op_timeout_ms"] = timeout


def set_deterministic_level(level: int) -> None:
    _settings["deterministic_level"] = int(level)


def use_compatible_impl(is_enable: bool) -> None:
    _settings["compatible_impl"] = bool(is_enable)


def are_compatible_impl_enabled() -> bool:
    return _settings["compatible_impl"]


def set_autocast_enabled(enable: bool) -> None:
    torch.set_autocast_enabled("npu", bool(enable))


def set_autocast_dtype(dtype: torch.dtype) -> None:
    torch.set_autocast_dtype("npu", dtype)


def enable_deterministic_with_backward(tensor: torch.Tensor) -> torch.Tensor:
    """torch_npu turns deterministic kernels on for the backward of ``tensor``; the emulator always is."""
    return tensor


def disable_deterministic_with_backward(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def is_current_stream_capturing() -> bool:
    """True while this thread captures an :class:`NPUGraph` (``torchport.runtime.graphs``)."""
    from torchport.runtime import graphs

    return graphs.is_current_stream_capturing()


class NPUGraph(_HostGraph):
    """torch_npu's ``NPUGraph`` (aclgraph) on the emulator: capture records the operators the block runs (they
    execute), ``replay()`` runs them again on the captured tensors (``torchport.runtime.graphs.HostGraph``)."""

    def __init__(self, keep_graph: bool = False) -> None:
        super().__init__(keep_graph)


class graph(contextlib.ContextDecorator):
    """``with torch.npu.graph(g): ...`` captures the block into ``g`` (``stream``, ``auto_dispatch_capture`` and
    ``capture_error_mode`` are accepted and have no effect on the emulator)."""

    def __init__(self, npu_graph: Any, pool: Any = None, stream: Any = None, auto_dispatch_capture: bool = False,
                 capture_error_mode: str = "global") -> None:
        self.npu_graph, self.pool, self.capture_error_mode = npu_graph, pool, capture_error_mode

    def __enter__(self) -> Any:
        self.npu_graph.capture_begin(pool=self.pool, capture_error_mode=self.capture_error_mode)
        return self.npu_graph

    def __exit__(self, *exc: Any) -> bool:
        self.npu_graph.capture_end()
        return False


def graph_pool_handle() -> Any:
    """An opaque pool token (the emulator's graphs share its allocator)."""
    from torchport.runtime import graphs

    return graphs.graph_pool_handle()


def make_graphed_callables(callables: Any, sample_args: Any, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: Any = None) -> Any:
    """The callables themselves: they compute, forward and backward, what their graphed versions would replay."""
    from torchport.runtime import graphs

    return graphs.make_graphed_callables(callables, sample_args, num_warmup_iters, allow_unused_input, pool)


def ipc_collect() -> None:
    """Nothing to collect: no inter-process device memory on the emulator."""


def empty_virt_addr_cache() -> None:
    empty_cache()


def host_empty_cache() -> None:
    """Release the pinned host blocks cached for reuse by ``pin_memory()``."""
    STATE.native.host_empty_cache()


# -- memory fraction, caching allocator, snapshot
def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Limit this process to ``fraction`` of the device's 64 GiB: allocations beyond raise
    ``torch.OutOfMemoryError`` with torch_npu's message, before any host memory is touched.
    ``PYTORCH_NPU_ALLOC_CONF=per_process_memory_fraction:F`` sets it for every device at the first allocation."""
    idx = _checked(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    STATE.native.set_memory_fraction(idx, fraction)


def get_per_process_memory_fraction(device: Any = None) -> float:
    return STATE.native.memory_fraction(_checked(device))


_blocks: dict[int, torch.Tensor] = {}


def caching_allocator_alloc(size: int, device: Any = None, stream: Any = None) -> int:
    """Allocate ``size`` bytes on the device; returns the address (free with :func:`caching_allocator_delete`)."""
    idx = _checked(device)
    t = torch.empty(int(size), dtype=torch.uint8, device=torch.device("npu", idx))
    ptr = t.data_ptr()
    _blocks[ptr] = t
    return ptr


def caching_allocator_delete(mem_ptr: int) -> None:
    _blocks.pop(int(mem_ptr), None)


def memory_snapshot(mempool_id: Any = None) -> list:
    """One segment per live block, every device (the emulator caches nothing, so no split or inactive blocks)."""
    return STATE.native.memory_snapshot()


def get_allocator_backend() -> str:
    return "native"


# -- legacy tensor types: torch.npu.FloatTensor(2, 3) / isinstance(t, torch.npu.FloatTensor)
class _LegacyTensorMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return (isinstance(instance, torch.Tensor) and instance.device.type == "npu"
                and instance.dtype == cls.dtype)


def _legacy_type(name: str, dtype: torch.dtype) -> type:
    def __new__(cls, *args: Any, device: Any = None, **kwargs: Any):  # noqa: N807
        dev = torch.device("npu", _get_device_index(device, optional=True))
        if not args:  # torch.npu.FloatTensor(): an empty tensor, as the legacy constructors give
            return torch.empty(0, dtype=dtype, device=dev)
        if len(args) == 1 and not isinstance(args[0], int) and not isinstance(args[0], torch.Size):
            return torch.tensor(args[0], dtype=dtype, device=dev)
        return torch.empty(*args, dtype=dtype, device=dev)

    # the C-level type name is "torch.npu.HalfTensor": what ``x.type(torch.npu.HalfTensor)`` parses
    # (torch resolves "torch.<privateuse1 name>.<Scalar>Tensor" itself); Python shows the short name
    return _LegacyTensorMeta(f"torch.npu.{name}", (), {"__new__": __new__, "dtype": dtype, "is_npu": True,
                                                       "__module__": "torch_npu.npu", "__qualname__": name,
                                                       "__doc__": f"Legacy constructor: a {dtype} tensor on the npu."})


BoolTensor = _legacy_type("BoolTensor", torch.bool)
ByteTensor = _legacy_type("ByteTensor", torch.uint8)
CharTensor = _legacy_type("CharTensor", torch.int8)
DoubleTensor = _legacy_type("DoubleTensor", torch.float64)
FloatTensor = _legacy_type("FloatTensor", torch.float32)
HalfTensor = _legacy_type("HalfTensor", torch.float16)
IntTensor = _legacy_type("IntTensor", torch.int32)
LongTensor = _legacy_type("LongTensor", torch.int64)
ShortTensor = _legacy_type("ShortTensor", torch.int16)
BFloat16Tensor = _legacy_type("BFloat16Tensor", torch.bfloat16)


# -- legacy typed storages: isinstance(t.storage(), torch.npu.FloatStorage) / torch.npu.FloatStorage(4)
def _legacy_storage(name: str, dtype: torch.dtype) -> type:
    """torch's own legacy-storage class shape (as torch.cuda's): torch.storage reads the device from the
    module name's last part ("npu") for both construction and isinstance."""
    from torch._utils import classproperty

    def unavailable(what: str) -> classmethod:
        def method(cls: type, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError(f"{what}: Not available for NPU storage")  # torch_npu's words
        return classmethod(method)

    return type(name, (torch.storage._LegacyStorage,), {
        "__module__": "torch_npu.npu", "__qualname__": name,
        "_dtype": classproperty(lambda cls: dtype),
        "dtype": classproperty(lambda cls: dtype),
        "from_buffer": unavailable("from_buffer"), "_new_with_weak_ptr": unavailable("_new_with_weak_ptr"),
        "_new_shared_filename": unavailable("_new_shared_filename"),
        "__doc__": f"Legacy typed storage of {dtype} on the npu."})


for _tensor_type in (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor,
                     ShortTensor, BFloat16Tensor):  # BoolStorage ... BFloat16Storage
    _name = _tensor_type.__qualname__.replace("Tensor", "Storage")
    globals()[_name] = _legacy_storage(_name, _tensor_type.dtype)


# ----------------------------------------------------------------------------- AI Core resource limits
#: the 910B3's cores (get_device_properties): what get_device_limit reports until set_device_limit
_CORES = {"cube_core_num": 20, "vector_core_num": 40}
_device_limits: dict[int, dict[str, int]] = {}
_stream_limits: dict[tuple[int, int], dict[str, int]] = {}


def _limit_device(device: Any) -> int:
    """torch_npu's checks on a device argument of the limit functions (an int, a present device)."""
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device must be an int, but got {type(device).__name__}" + _card_error(0, 2))
    return _checked(device)  # "Invalid device id" outside [0, device_count())


def _limited(base: dict[str, int], cube_num: int, vector_num: int) -> dict[str, int]:
    out = dict(base)
    for key, value in (("cube_core_num", cube_num), ("vector_core_num", vector_num)):
        if value == -1:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _CORES[key]:
            raise RuntimeError(f"{key} must be an int in [1, {_CORES[key]}] (the card's {key}), got {value!r}"
                               + _card_error(0, 3))
        out[key] = value
    return out


class _CallOnce:
    """torch_npu's ``_call_once_class``: ``set_device_limit`` may be called once per process (``.called``)."""

    def __init__(self, func: Any) -> None:
        self.func, self.called, self.result = func, False, None
        functools.update_wrapper(self, func)  # its name, doc and signature

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.called:
            raise RuntimeError(f"Function '{self.func.__name__}' has already been called, You can only set this "
                               "interface once.")
        self.called = True
        self.result = self.func(*args, **kwargs)
        return self.result


@_CallOnce
def set_device_limit(device: int, cube_num: int = -1, vector_num: int = -1) -> None:
    """Limit the AI Cores a device's operators use (``-1``: keep); once per process, as on the card."""
    idx = _limit_device(device)
    _device_limits[idx] = _limited(get_device_limit(idx), cube_num, vector_num)


def get_device_limit(device: int) -> dict[str, int]:
    """``{"cube_core_num": .., "vector_core_num": ..}`` of the device (its cores unless limited)."""
    return dict(_device_limits.get(_limit_device(device), _CORES))


def _limit_stream(stream: Any) -> tuple[int, int]:
    if stream is None:
        raise AssertionError("stream cannot be None" + _card_error(0, 1))
    if not isinstance(stream, Stream):
        raise AssertionError(f"stream should be torch_npu.npu.Stream, could not be {type(stream)}"
                             + _card_error(0, 2))
    return stream.device_index, stream.stream_id


def set_stream_limit(stream: Stream, cube_num: int = -1, vector_num: int = -1) -> None:
    """Limit the AI Cores of the operators launched on ``stream`` (``-1``: keep)."""
    key = _limit_stream(stream)
    _stream_limits[key] = _limited(get_stream_limit(stream), cube_num, vector_num)


def reset_stream_limit(stream: Stream) -> None:
    _stream_limits.pop(_limit_stream(stream), None)


def get_stream_limit(stream: Stream) -> dict[str, int]:
    """The stream's limits (its device's unless set on the stream)."""
    idx, sid = _limit_stream(stream)
    return dict(_stream_limits.get((idx, sid)) or get_device_limit(idx))


def current_blas_handle() -> None:
    """None, with torch_npu's warning: the NPU has no BLAS handle (the card's answer, not a stand-in)."""
    import warnings

    warnings.warn("NPU does not use blas handle.")
    return None


class SyncLaunchStream(Stream):
    """A stream from the device's sync-launch pool (4 per device; launches bypass the task queue on the
    card; every emulated stream is synchronous)."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> "SyncLaunchStream":
        return super().__new__(cls, device, priority, is_sync_launch=True, **kwargs)


def _mstx() -> Any:
    import importlib

    return importlib.import_module("torch_npu.npu.mstx")


#: names of torch_npu.npu.__all__ (2.14.0) the emulator does not provide, with the reason
NOT_EMULATED: dict[str, str] = {
    **{n: "dump of operator data is a CANN/msprof feature" for n in ("set_dump", "init_dump", "finalize_dump")},
    **{n: "NPU graph capture (aclgraph) needs the device runtime" for n in (
        "graph_task_group_begin",
        "graph_task_group_end", "graph_task_update_begin", "graph_task_update_end", "NpuGraphOpHandler",
        "register_npu_graph_handler", "super_kernel_scope_begin", "super_kernel_scope_end")},
    **{n: "custom allocators and memory pools plug into the device caching allocator, which the emulator "
          "does not have" for n in ("MemPool", "use_mem_pool", "NPUPluggableAllocator", "change_current_allocator")},
    **{n: "hardware fault handling (UCE, device stop/restart, stress self-test)" for n in (
        "stop_device", "restart_device", "check_uce_in_memory", "stress_detect")},
    **{n: "model obfuscation needs the Ascend crypto runtime" for n in (
        "obfuscation_initialize", "obfuscation_finalize", "obfuscation_calculate")},
    **{n: "host (pinned) memory statistics of the device allocator" for n in (
        "host_memory_stats", "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats",
        "reset_peak_host_memory_stats")},
    "ExternalEvent": "wraps a raw aclrtEvent handle",
    "CubeMathType": "cube-unit math modes of the real chip",
}

__all__ += [  # noqa: F822 - mstx comes from the module __getattr__
    "set_sync_debug_mode", "get_sync_debug_mode", "set_task_queue_enable", "get_task_queue_enable",
    "set_mm_bmm_format_nd", "get_mm_bmm_format_nd", "set_aoe", "set_op_timeout_ms", "set_deterministic_level",
    "use_compatible_impl", "are_compatible_impl_enabled", "set_autocast_enabled", "set_autocast_dtype",
    "is_autocast_enabled", "get_autocast_dtype", "enable_deterministic_with_backward",
    "disable_deterministic_with_backward", "is_current_stream_capturing", "ipc_collect", "empty_virt_addr_cache",
    "host_empty_cache", "set_per_process_memory_fraction", "get_per_process_memory_fraction",
    "caching_allocator_alloc", "caching_allocator_delete", "memory_stats_as_nested_dict", "memory_snapshot",
    "get_allocator_backend", "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor",
    "HalfTensor", "IntTensor", "LongTensor", "ShortTensor", "BFloat16Tensor", "SyncLaunchStream", "mstx",
    "BoolStorage", "ByteStorage", "CharStorage", "DoubleStorage", "FloatStorage", "HalfStorage", "IntStorage",
    "LongStorage", "ShortStorage", "BFloat16Storage",
    "ExternalStream", "npurt", "set_device_limit", "get_device_limit", "set_stream_limit", "reset_stream_limit",
    "get_stream_limit", "current_blas_handle", "NPUGraph", "graph", "graph_pool_handle", "make_graphed_callables",
]


def __getattr__(name: str) -> Any:
    if name == "mstx":
        return _mstx()
    if name in ("utils", "memory", "random", "streams", "aclnn") and STATE.installed:  # torch_npu.npu.<submodule>
        import importlib

        return importlib.import_module(f"torch_npu.npu.{name}")
    if name == "default_generators":
        return tuple(STATE.default_generators)
    raise AttributeError(f"module 'torch_npu.npu' has no attribute {name!r}")
