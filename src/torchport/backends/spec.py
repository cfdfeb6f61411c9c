"""The one contract: everything device-specific about a backend, in one small record.

A :class:`BackendSpec` is a frozen dataclass. Each backend module (``cuda.py``,
``npu.py`` ...) builds one and the registry holds them. Code outside
``torchport.backends`` never names a device type: it asks the registry for the
selected spec and calls through its fields.

Every callable field must be cheap and free of side effects at import time:
``probe`` must not initialise a device runtime (no CUDA context, fork-safe), and
``module`` returns the already-imported torch device module or ``None``.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType, ModuleType
from typing import Any, Callable, Mapping

__all__ = ["BackendSpec", "AmpPolicy", "BackendUnavailable", "SlowPrecisionWarning"]


class SlowPrecisionWarning(UserWarning):
    """A precision was asked for explicitly where it runs slower than fp32; it runs as asked (the message
    gives the measured cost)."""


class BackendUnavailable(RuntimeError):
    """The backend was asked for but cannot run here (its error says what is missing)."""

    exit_code = 2  # torchport.errors.ExitCode.USAGE (backends/ imports nothing from torchport)


#: Every precision label torchport accepts (``--precision``, :class:`torchport.Amp`, configs): ``amp`` is
#: the backend's low precision (even where ``auto`` would pick fp32, e.g. bf16 on CPU).
PRECISIONS = ("fp32", "fp16", "bf16", "auto", "amp")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AmpPolicy:
    """What mixed precision means on one backend.

    Args:
        low_precision: precisions autocast runs fast here (``"fp16"``, ``"bf16"``).
        fp16_needs_scaler: fp16 loses small gradients without dynamic loss scaling.
        auto_order: what ``precision="auto"`` tries, in order; the first one that
            is usable wins (bf16 only when ``bf16_probe()``); empty means fp32.
        bf16_probe: ``() -> bool``; True when bf16 is fast on the current device.
        fallback: precision used (with a warning) when one outside
            ``low_precision`` is asked for; ``"fp32"`` when nothing fits.
    """

    low_precision: tuple[str, ...] = ("fp16", "bf16")
    fp16_needs_scaler: bool = True
    auto_order: tuple[str, ...] = ("bf16", "fp16")
    bf16_probe: Callable[[], bool] = lambda: True
    fallback: str = "fp32"

    def usable(self, precision: str) -> bool:
        """True when ``precision`` runs fast on this backend right now."""
        if precision == "fp32":
            return True
        if precision not in self.low_precision:
            return False
        return precision != "bf16" or bool(self.bf16_probe())

    def runs(self, precision: str) -> bool:
        """True when autocast in ``precision`` works here, fast or not (what a behaviour check may exercise).

        Equal to :meth:`usable` unless the backend runs slow low precisions when asked (the CPU)."""
        return self.usable(precision)

    def reason(self) -> str | None:
        """One line saying why ``auto`` picks what it picks (None: the table above is the reason)."""
        return None

    def cost_note(self, precision: str, label: str = "this backend", asked: str | None = None) -> str:
        """The one warning line of an explicit ``precision`` that runs here, but slowly (``asked``: how the
        code spelled the request). Backends that measure the cost say it (the CPU)."""
        return f"{asked or f'precision {precision!r}'} runs as asked on {label}, but {precision} is not fast there"

    def substitute(self, want: str) -> str:
        """What runs here for code written for another device that asked ``want`` (``run``'s redirected
        ``torch.autocast("cuda")``): ``want`` where it is fast, else the fallback where that is fast, else fp32."""
        if want == "fp32" or self.usable(want):
            return want
        return self.fallback if self.usable(self.fallback) else "fp32"

    def resolve_auto(self) -> str:
        """The precision ``"auto"`` means on this backend (``"fp32"`` when none fits)."""
        return next((p for p in self.auto_order if self.usable(p)), "fp32")

    def low(self) -> str | None:
        """The backend's mixed precision: ``auto``'s choice, else its first usable low precision; None if none."""
        auto = self.resolve_auto()
        return auto if auto != "fp32" else next((p for p in self.low_precision if self.usable(p)), None)

    def resolve(self, precision: str, label: str = "this backend") -> tuple[str, str | None]:
        """The one resolution of a precision label: ``(precision that runs, warning or None)``.

        ``auto`` and ``amp`` are resolved here; a low precision that is not fast on this backend
        falls back to ``fallback`` (or fp32) and the second item says so.

        Raises:
            ValueError: ``precision`` is not one of :data:`PRECISIONS`.
        """
        want = precision.strip().lower()
        if want not in PRECISIONS:
            raise ValueError(f"precision={precision!r} is not one of {', '.join(PRECISIONS)}")
        if want == "auto":
            return self.resolve_auto(), None
        if want == "amp":
            low = self.low()
            return (low, None) if low else ("fp32", f"{label} has no usable low precision: AMP runs in fp32")
        if want == "fp32" or self.usable(want):
            return want, None
        fallback = self.substitute(want)
        return fallback, (f"precision {want!r} is not fast on backend {label!r} "
                          f"(fast: {', '.join(self.low_precision) or 'none'}); using {fallback!r} instead")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BackendSpec:
    """Everything device-specific about one backend.

    Args:
        name: registry key and torch device type (``"cuda"``, ``"npu"``, ``"cpu"``).
        priority: auto-selection order, higher first (npu > cuda > xpu > mps > cpu).
        probe: side-effect-free ``() -> bool``; True when at least one device can run.
        module: ``() -> ModuleType | None``; the torch device module (``torch.cuda``).
        device_count: ``() -> int`` visible devices (0 when unavailable).
        dist_backend: torch.distributed backend for this device (``"nccl"``, ``"hccl"``).
        visible_devices_env: env var restricting visible devices, if any.
        amp: the :class:`AmpPolicy`.
        pin_memory: pinned host memory speeds up host-to-device copies here.
        data_parallel: ``torch.nn.DataParallel`` works here.
        is_accelerator: False only for cpu.
        install_hint: what to install / source when the backend is missing.
        compile_backend: ``torch.compile`` backend name, or None when unsupported.
        graph_api: the device module's CUDA-graph-like class (``"CUDAGraph"``, ``"NPUGraph"``); with it the
            module has ``graph`` / ``make_graphed_callables`` / ``graph_pool_handle`` /
            ``is_current_stream_capturing`` too. None: no graph API (the shim uses the host capture,
            ``torchport.runtime.graphs``).
        doctor_facts: ``() -> Mapping`` of extra facts ``torchport doctor`` prints.
        emulated: True for torchport's emulated devices.
        shim_active: ``() -> bool``; True when a foreign shim redirects this backend's
            device module to another device (e.g. torch_npu's ``transfer_to_npu``).
        plugin: import name of the out-of-tree package that provides the backend
            (``"torch_npu"``), recorded in doctor reports and checkpoint metadata.
        knobs: backend tuning knobs ``{name: setter}`` for :func:`torchport.tune`
            (``"cudnn_benchmark"``, ``"jit_compile"`` ...); a setter takes the value and
            returns True when it applied it (False: this torch build lacks the knob).
    """

    name: str
    priority: int
    probe: Callable[[], bool]
    module: Callable[[], ModuleType | None]
    device_count: Callable[[], int]
    dist_backend: str
    visible_devices_env: str | None = None
    amp: AmpPolicy = AmpPolicy()
    pin_memory: bool = False
    data_parallel: bool = False
    is_accelerator: bool = True
    install_hint: str = ""
    compile_backend: str | None = "inductor"
    graph_api: str | None = None
    doctor_facts: Callable[[], Mapping[str, Any]] = dict
    emulated: bool = False
    shim_active: Callable[[], bool] = lambda: False
    plugin: str | None = None
    knobs: Mapping[str, Callable[[Any], bool]] = dataclasses.field(default_factory=lambda: MappingProxyType({}))

    @property
    def device_type(self) -> str:
        """The torch device type string (same as ``name``)."""
        return self.name

    @property
    def label(self) -> str:
        """Human label: ``"npu (emulated)"`` for emulated backends, else the name."""
        return f"{self.name} (emulated)" if self.emulated else self.name

    def bf16_supported(self) -> bool:
        """torch's own answer to "can this device run bf16" (the device module's ``is_bf16_supported()``:
        bf16 *possible*, emulation included on older GPUs); False on a host without an accelerator.

        The one answer for ``torch.cuda.is_bf16_supported()`` in migrated code: what ``fix`` writes and what
        ``run`` returns, so both follow the original on CUDA. (``amp.usable("bf16")`` is a different question:
        bf16 *fast*, which ``precision="auto"`` asks.)
        """
        if not self.is_accelerator or not self.probe():
            return False
        fn = getattr(self.module(), "is_bf16_supported", None)
        if fn is None:
            return self.amp.usable("bf16")
        try:
            return bool(fn())
        except Exception:  # noqa: BLE001 - a driver that cannot answer has no usable bf16
            return False

    def require(self) -> ModuleType:
        """Return the device module, or raise :class:`BackendUnavailable` with the install hint."""
        if not self.probe():
            raise BackendUnavailable(
                f"backend {self.name!r} was requested but is not available here. {self.install_hint}".strip()
            )
        mod = self.module()
        if mod is None:
            raise BackendUnavailable(f"backend {self.name!r} has no torch device module. {self.install_hint}".strip())
        return mod
