"""Mutable state of the emulated NPU: configuration, current device, RNG, memory counters.

One module-level :data:`STATE` object holds everything the dispatch hot path reads,
so a single attribute lookup answers "is the emulator on, and how is it configured?".
Nothing here imports torch at module import time.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any

__all__ = ["STATE", "EmulatorState", "MemoryCounters", "SATURATE", "INF"]

#: overflow modes: IEEE inf/nan (Atlas 800T A2 / 910B default) or saturation (older 910 chips)
INF = "inf"
SATURATE = "saturate"


def _oom(nbytes: int, limit: int, current: int) -> Exception:
    """torch_npu's error for an allocation over the per-process memory fraction."""
    import torch

    mib = 1024 * 1024
    return torch.OutOfMemoryError(
        "NPU out of memory. Allocation was preemptively rejected because it would exceed "
        f"per_process_memory_fraction limit. Requested size: {nbytes / mib:.2f} MiB. "
        f"Allowed memory size: {limit / mib:.2f} MiB, currently allocated: {current / mib:.2f} MiB.")


class MemoryCounters:
    """Bytes of live tensor storage per emulated device: current and peak.

    Storages are counted once (views share them) and uncounted by a weakref
    finalizer when the last tensor using them dies.
    """

    def __init__(self, devices: int) -> None:
        self.current = [0] * devices
        self.peak = [0] * devices
        #: per device: bytes a process may hold (``set_per_process_memory_fraction``), None = no limit
        self.limit: list = [None] * devices
        self.lock = threading.Lock()

    def resize(self, devices: int) -> None:
        """Grow/shrink the per-device arrays (existing counts are kept)."""
        with self.lock:
            extra = devices - len(self.current)
            if extra > 0:
                self.current += [0] * extra
                self.peak += [0] * extra
                self.limit += [None] * extra
            elif extra < 0:
                del self.current[devices:]
                del self.peak[devices:]
                del self.limit[devices:]

    def track(self, storage: Any, index: int) -> None:
        """Count ``storage`` (an ``UntypedStorage``) on device ``index`` until it is freed."""
        nbytes = storage.nbytes()
        storage._torchport_npu = index
        if nbytes == 0:
            return
        with self.lock:
            if index >= len(self.current):
                return
            cur = self.current[index] + nbytes
            limit = self.limit[index]
            if limit is not None and cur > limit:
                storage._torchport_npu = None
                raise _oom(nbytes, limit, self.current[index])
            self.current[index] = cur
            if cur > self.peak[index]:
                self.peak[index] = cur
        weakref.finalize(storage, self._free, index, nbytes, id(self))

    def _free(self, index: int, nbytes: int, owner: int) -> None:
        if owner != id(self):
            return
        with self.lock:
            if index < len(self.current):
                self.current[index] = max(0, self.current[index] - nbytes)

    def reset_peak(self, index: int) -> None:
        """Set the peak of device ``index`` to its current value."""
        with self.lock:
            self.peak[index] = self.current[index]


@dataclasses.dataclass
class EmulatorState:
    """Everything the emulator knows at run time (one instance: :data:`STATE`).

    Attributes:
        installed: True between ``install()`` and ``uninstall()``.
        devices: number of emulated devices.
        current: the calling thread's current device index (``torch.npu.set_device``).
        fallback_ops: operator names (``"aten::nonzero"``) treated as unsupported:
            they warn like torch_npu's CPU fallback.
        overflow_mode: ``"inf"`` or ``"saturate"``.
        perturb: op name or module class name -> relative noise amplitude.
        overflow_flag: set when a float16 result overflowed in saturation mode.
        generators: per device, the host ``torch.Generator`` that draws for it (the device RNG).
        default_generators: per device, the ``npu`` ``torch.Generator`` users see
            (``torch.npu.default_generators``); seeding it reseeds the host one on a stream
            of its own (not the CPU's numbers for the same seed).
        memory: per-device byte counters.
        fallback_warned: op names already warned about (warn once, like torch_npu).
        fallback_counts: op name -> times it ran through the CPU fallback.
    """

    installed: bool = False
    devices: int = 0
    fallback_ops: frozenset = frozenset()
    #: also treat operators torch_npu 2.14.0 does not implement as CPU fallbacks (_coverage.py)
    coverage: bool = True
    overflow_mode: str = INF
    perturb: dict = dataclasses.field(default_factory=dict)
    overflow_flag: bool = False
    generators: list = dataclasses.field(default_factory=list)
    default_generators: list = dataclasses.field(default_factory=list)
    memory: MemoryCounters = dataclasses.field(default_factory=lambda: MemoryCounters(0))
    fallback_warned: set = dataclasses.field(default_factory=set)
    fallback_counts: dict = dataclasses.field(default_factory=dict)
    perturb_generator: Any = None
    #: the compiled module (``_native.py``) once loaded: it holds the per-thread current device
    native: Any = None

    @property
    def current(self) -> int:
        """The current device index of the calling thread (``torch.npu.set_device``)."""
        n = self.native
        return n.current_device() if n is not None else 0

    @current.setter
    def current(self, index: int) -> None:
        if self.native is not None:
            self.native.set_device(int(index))


STATE = EmulatorState()
