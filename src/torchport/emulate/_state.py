"""Mutable state of the emulated NPU: configuration, current device, RNG (memory is counted by the C++ allocator).

One module-level :data:`STATE` object holds everything the dispatch hot path reads,
so a single attribute lookup answers "is the emulator on, and how is it configured?".
Nothing here imports torch at module import time.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["STATE", "EmulatorState", "SATURATE", "INF"]

#: overflow modes: IEEE inf/nan (Atlas 800T A2 / 910B default) or saturation (older 910 chips)
INF = "inf"
SATURATE = "saturate"


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
