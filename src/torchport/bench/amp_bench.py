"""FP32 vs AMP on the selected device: throughput, time per batch and peak device memory.

For each precision the bench builds the same model (same seed), warms up, then times
``windows`` windows of ``steps_per_window`` training steps, each window bracketed by
device synchronisations. It reports the median over windows and their spread, plus
the peak allocated device memory from the runtime's memory stats (``None`` on CPU,
which has no device allocator; the emulated npu counts the bytes of live tensors).

Synthetic data is made once on the host and copied every step (a real loop's copy,
none of its decoding); a directory runs the real ImageFolder pipeline instead, so the
windows then include data wait.

Example::

    from torchport.bench import BenchConfig, run_bench
    from torchport.workload import Workload
    report = run_bench(BenchConfig(workload=Workload(model="resnet18", batch=16, size=64),
                                   windows=3, steps_per_window=2, warmup=1))
    report.results["amp"].images_per_s, report.speedup
"""

from __future__ import annotations

import dataclasses
import datetime
import gc
import platform
import statistics
import time
from typing import Any, Callable

from torchport.workload import Workload, amp_precision, build_model, cycle, describe, host_batches, make_loader
from torchport.errors import ConfigError

__all__ = ["BenchConfig", "PrecisionResult", "BenchReport", "run_bench", "SCHEMA"]

SCHEMA = "torchport.bench/1"


@dataclasses.dataclass(kw_only=True)
class BenchConfig:
    """Settings of ``torchport bench`` (CLI flags map one to one).

    Args:
        workload: model, batch, image size, data, channels_last.
        precisions: labels to run, baseline first: ``fp32``, ``amp`` (the backend's mixed
            precision), or an explicit ``fp16`` / ``bf16`` / ``auto``.
        windows: timed windows (median and spread over them).
        steps_per_window: training steps per window.
        warmup: untimed steps per precision (graph compilation, autotuning, allocator).
        device: ``auto``, a backend name or ``name:index`` (None: ``TORCHPORT_DEVICE`` / auto).
        require_accelerator: refuse a CPU run (None: ``TORCHPORT_REQUIRE_ACCELERATOR``).
        lr: SGD learning rate (momentum 0.9).
        compile: ``torch.compile`` the model with the backend's compiler; its first step (the compile) is
            timed apart as warm-up (``compile_s``) and is never in a window.
    """

    workload: Workload = dataclasses.field(default_factory=Workload)
    precisions: tuple[str, ...] = ("fp32", "amp")
    windows: int = 5
    steps_per_window: int = 20
    warmup: int = 10
    device: str | None = None
    require_accelerator: bool | None = None
    lr: float = 0.01
    compile: bool = False

    def __post_init__(self) -> None:
        self.precisions = tuple(p.strip().lower() for p in self.precisions if p.strip())
        if not self.precisions:
            raise ConfigError("precisions is empty; pass e.g. fp32,amp")
        if len(set(self.precisions)) != len(self.precisions):
            raise ConfigError(f"precisions {','.join(self.precisions)} repeat a label")
        if self.windows < 1 or self.steps_per_window < 1 or self.warmup < 0:
            raise ConfigError(f"windows={self.windows} and steps_per_window={self.steps_per_window} must be >= 1, "
                              f"warmup={self.warmup} >= 0")


@dataclasses.dataclass(kw_only=True)
class PrecisionResult:
    """One precision's numbers (``ms_per_batch`` and ``images_per_s`` are medians over windows)."""

    label: str
    precision: str
    batch: int
    windows_ms: list[float]
    peak_memory_bytes: int | None
    baseline_memory_bytes: int | None = None
    skipped_steps: int = 0
    compile_s: float | None = None      # compile: the first (compiling) step, warm-up
    compile_backend: str | None = None

    @property
    def ms_per_batch(self) -> float:
        return statistics.median(self.windows_ms)

    @property
    def images_per_s(self) -> float:
        return self.batch * 1000.0 / self.ms_per_batch

    @property
    def spread_pct(self) -> float:
        """(slowest - fastest window) / median, in percent."""
        return (max(self.windows_ms) - min(self.windows_ms)) / self.ms_per_batch * 100.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "images_per_s": self.images_per_s,
            "ms_per_batch": self.ms_per_batch,
            "peak_memory_bytes": self.peak_memory_bytes,
            "baseline_memory_bytes": self.baseline_memory_bytes,
            "windows_ms": self.windows_ms,
            "ms_min": min(self.windows_ms),
            "ms_max": max(self.windows_ms),
            "images_per_s_min": self.batch * 1000.0 / max(self.windows_ms),
            "images_per_s_max": self.batch * 1000.0 / min(self.windows_ms),
            "spread_pct": self.spread_pct,
            "skipped_steps": self.skipped_steps,
            "compile_s": self.compile_s,
            "compile_backend": self.compile_backend,
        }


@dataclasses.dataclass(kw_only=True)
class BenchReport:
    """All precisions of one run plus where it ran; ``to_dict`` is the ``--json`` file."""

    config: BenchConfig
    results: dict[str, PrecisionResult]
    device: str
    device_type: str
    backend: str
    device_name: str
    emulated: bool
    torch_version: str
    host: str
    created: str
    policy: dict[str, Any] = dataclasses.field(default_factory=dict)   # what "auto" picks here and why

    @property
    def baseline(self) -> PrecisionResult:
        return next(iter(self.results.values()))

    @property
    def contender(self) -> PrecisionResult | None:
        """The first result after the baseline (AMP in the default run)."""
        rest = list(self.results.values())[1:]
        return rest[0] if rest else None

    @property
    def speedup(self) -> float | None:
        """Contender throughput / baseline throughput."""
        c = self.contender
        return None if c is None else c.images_per_s / self.baseline.images_per_s

    @property
    def memory_change(self) -> float | None:
        """Relative change of peak memory, contender vs baseline (-0.48 = 48% less); None if unknown."""
        c, b = self.contender, self.baseline
        if c is None or not b.peak_memory_bytes or c.peak_memory_bytes is None:
            return None
        return c.peak_memory_bytes / b.peak_memory_bytes - 1.0

    def to_dict(self) -> dict[str, Any]:
        c = self.contender
        comparison = None
        if c is not None:
            comparison = {
                "baseline": self.baseline.label, "other": c.label,
                "speedup": self.speedup,
                "throughput_change": self.speedup - 1.0,
                "time_change": c.ms_per_batch / self.baseline.ms_per_batch - 1.0,
                "memory_change": self.memory_change,
            }
        cfg = self.config
        return {
            "schema": SCHEMA,
            "device": self.device,
            "device_type": self.device_type,
            "backend": self.backend,
            "device_name": self.device_name,
            "emulated": self.emulated,
            "torch": self.torch_version,
            "host": self.host,
            "platform": platform.platform(),
            "created": self.created,
            "precision_policy": self.policy,
            "settings": {
                **dataclasses.asdict(cfg.workload),
                "description": describe(cfg.workload),
                "precisions": list(cfg.precisions),
                "windows": cfg.windows,
                "steps_per_window": cfg.steps_per_window,
                "warmup": cfg.warmup,
                "lr": cfg.lr,
                "compile": cfg.compile,
            },
            "results": {k: v.to_dict() for k, v in self.results.items()},
            "comparison": comparison,
        }


def _device_name(target: Any) -> str:
    if target.is_accelerator:
        fn = getattr(target.module, "get_device_name", None)
        try:
            if fn is not None:
                return str(fn(target.index))
        except Exception:
            pass
        return target.backend.label
    return platform.processor() or _cpu_model() or platform.machine() or "cpu"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _bench_one(label: str, cfg: BenchConfig, target: Any, data: Any, classes: int,
               progress: Callable[[str], None]) -> PrecisionResult:
    import torch

    from torchport.runtime.amp import Amp
    from torchport.runtime.step import (compile_backend_name, compile_line, compile_model, timed_warmup_step,
                                        train_step)
    from torchport.runtime.memory import empty_cache, memory_stats, reset_peak_memory, synchronize

    wl = cfg.workload
    precision = amp_precision(label, target)
    gc.collect()
    empty_cache(target)
    synchronize(target)
    baseline = memory_stats(target)["allocated_bytes"]
    reset_peak_memory(target)

    model = build_model(wl, num_classes=classes).to(target.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp = Amp(precision, target)
    batches = cycle(data)

    run_model = compile_model(model, target) if cfg.compile else model

    def step() -> None:
        train_step(run_model, next(batches), optimizer, amp, loss_fn, device=target.device,
                   channels_last=wl.channels_last)

    compile_s = None
    if cfg.compile:   # the first step compiles: warm-up, timed apart, on top of cfg.warmup
        compile_s = timed_warmup_step(step, target)
        progress(f"{label} ({precision}): " + compile_line(compile_s, compile_backend_name(target)))
    progress(f"{label} ({precision}): {cfg.warmup} warm-up steps")
    for _ in range(cfg.warmup):
        step()
    windows_ms = []
    for w in range(cfg.windows):
        synchronize(target)
        t0 = time.perf_counter()
        for _ in range(cfg.steps_per_window):
            step()
        synchronize(target)
        windows_ms.append((time.perf_counter() - t0) * 1000.0 / cfg.steps_per_window)
        progress(f"{label} ({precision}): window {w + 1}/{cfg.windows}: {windows_ms[-1]:.1f} ms/batch")
    peak = memory_stats(target)["peak_bytes"]
    result = PrecisionResult(label=label, precision=precision, batch=wl.batch, windows_ms=windows_ms,
                             peak_memory_bytes=peak, baseline_memory_bytes=baseline,
                             skipped_steps=amp.skipped_steps, compile_s=compile_s,
                             compile_backend=compile_backend_name(target) if cfg.compile else None)
    return result  # model and optimizer die here; the next precision collects them before it starts


def run_bench(config: BenchConfig, *, progress: Callable[[str], None] | None = None) -> BenchReport:
    """Run every precision of ``config`` on the selected device.

    Args:
        config: what to run.
        progress: called with a short status line after each window (e.g. ``print``).

    Returns:
        A :class:`BenchReport` (baseline = first precision).
    """
    import torch

    from torchport.runtime.device import current, select_device

    explicit = config.device or config.require_accelerator is not None
    target = select_device(config.device, require_accelerator=config.require_accelerator) if explicit else current()
    progress = progress or (lambda _msg: None)
    for label in config.precisions:  # fail on a bad label before any precision runs
        amp_precision(label, target)
    wl = config.workload
    if wl.synthetic and wl.slow_data_ms == 0:
        pin = bool(target.backend.pin_memory and target.is_accelerator)
        data: Any = host_batches(wl, 2, pin=pin)
        classes = wl.num_classes
    else:
        data, classes = make_loader(wl, target, default_workers=None)
    results = {label: _bench_one(label, config, target, data, classes, progress) for label in config.precisions}
    return BenchReport(
        config=config,
        results=results,
        device=str(target),
        device_type=target.type,
        backend=target.backend.label,
        device_name=_device_name(target),
        emulated=bool(target.backend.emulated),
        torch_version=torch.__version__,
        host=platform.node(),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        policy={"auto": target.backend.amp.resolve_auto(), "reason": target.backend.amp.reason()},
    )
