"""CPU: always present; the fallback of last resort (and the one users must be warned about)."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from torchport.backends.spec import PRECISIONS, AmpPolicy, BackendSpec


def _module():
    import torch

    return torch.cpu


def _native(precision: str) -> Callable[[], bool]:
    def probe() -> bool:
        from torchport.backends.cpu_precision import decide

        return decide(precision).native
    return probe


@dataclasses.dataclass(frozen=True, kw_only=True)
class CpuAmpPolicy(AmpPolicy):
    """The CPU's AMP policy (:mod:`torchport.backends.cpu_precision` decides what is native).

    ``auto`` is bf16 where the CPU runs bf16 natively, else fp32; code written for CUDA (``run``'s redirected
    autocast) gets the same substitution. An explicit ``bf16`` / ``fp16`` / ``amp`` runs as asked -- the CPU's
    autocast supports both -- and the note (one warning line) gives the measured cost where it is not native.
    """

    low_precision: tuple[str, ...] = ("bf16", "fp16")
    fp16_needs_scaler: bool = True      # fp16's range is the same on every processor: loss scaling
    auto_order: tuple[str, ...] = ("bf16",)
    bf16_probe: Callable[[], bool] = _native("bf16")
    fp16_probe: Callable[[], bool] = _native("fp16")
    fallback: str = "bf16"

    def usable(self, precision: str) -> bool:
        if precision == "fp32":
            return True
        if precision not in self.low_precision:
            return False
        return bool(self.bf16_probe() if precision == "bf16" else self.fp16_probe())

    def runs(self, precision: str) -> bool:
        return precision == "fp32" or precision in self.low_precision

    def low(self) -> str | None:
        auto = self.resolve_auto()
        return auto if auto != "fp32" else self.low_precision[0]

    def reason(self) -> str | None:
        from torchport.backends.cpu_precision import decide

        d = decide("bf16")
        return f"bf16 {'native' if d.native else 'not native'}: {d.reason}"

    def cost_note(self, precision: str, label: str = "cpu", asked: str | None = None) -> str:
        """The one warning line of an explicit ``precision`` that is not native here (measured cost)."""
        from torchport.backends.cpu_precision import decide

        d = decide(precision)
        return (f"{asked or f'precision {precision!r}'} runs as asked on {label}, but this CPU has no native "
                f"{precision} ({d.reason}): measured {d.cost().phrase()}; "
                f"precision 'auto' picks {self.resolve_auto()} here")

    def resolve(self, precision: str, label: str = "this backend") -> tuple[str, str | None]:
        want = precision.strip().lower()
        if want not in PRECISIONS:
            raise ValueError(f"precision={precision!r} is not one of {', '.join(PRECISIONS)}")
        if want == "auto":
            return self.resolve_auto(), None
        run = self.low() if want == "amp" else want
        if run == "fp32" or self.usable(run):
            return run, None
        return run, self.cost_note(run, label)


SPEC = BackendSpec(
    name="cpu",
    priority=0,
    probe=lambda: True,
    module=_module,
    device_count=lambda: 1,
    dist_backend="gloo",
    visible_devices_env=None,
    amp=CpuAmpPolicy(),
    pin_memory=False,
    data_parallel=False,
    is_accelerator=False,
    compile_backend="inductor",
    doctor_facts=lambda: {"cpu_count": os.cpu_count(), "torch_threads": __import__("torch").get_num_threads(),
                          "cpu_capability": __import__("torch").backends.cpu.get_cpu_capability()},
)
