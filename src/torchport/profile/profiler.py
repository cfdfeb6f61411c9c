"""Where a training step's time goes: phase timing at device-synchronised boundaries.

Accelerators run asynchronously: ``loss.backward()`` returns when the work is
*queued*, and its cost shows up wherever the host next waits (often inside
``optimizer.step()`` or the next ``.item()``). :class:`StepProfiler` therefore
synchronizes the device at every phase boundary, so each phase is charged for the
device work it queued. The step is partitioned: every instant between two step
boundaries belongs to exactly one phase, and time outside the named phases is
charged to ``"other"`` -- so the phases sum to the measured step time.

The price: synchronising removes the overlap of host and device work, so a
profiled step can be slower than a free-running one. The profiler counts its sync
calls and :func:`sync_cost` measures one call on the idle device; ``profile_loop``
also times a few free-running steps to report the difference.

Example (your own loop)::

    from torchport.profile import StepProfiler

    prof = StepProfiler(warmup=2)
    for images, labels in prof.iterate(loader, steps=22):     # "data" = waiting for the loader
        with prof.phase("copy"):
            images, labels = torchport.to_device((images, labels))
        with prof.phase("forward"):
            with amp.autocast():
                loss = criterion(model(images), labels)
        with prof.phase("backward"):
            amp.backward(loss)
        with prof.phase("optimizer"):
            amp.step(optimizer)
            optimizer.zero_grad(set_to_none=True)
    print(prof.result().summary())        # 20 timed steps; the first 2 were warm-up

Without ``iterate`` wrap the fetch in ``prof.phase("data")`` and call ``prof.step()``
at the end of every step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from typing import Any, Iterable, Iterator

from torchport.profile.analysis import PHASES, Analysis, analyze

__all__ = ["StepProfiler", "StepRecord", "ProfileResult", "sync_cost", "PHASES"]

_clock = time.perf_counter
_END = object()


def _synchronize(target: Any) -> None:
    from torchport.runtime.memory import synchronize

    synchronize(target)


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """One step: its wall time and the seconds charged to each phase (they sum to ``total_s``)."""

    index: int
    total_s: float
    phases: dict[str, float]
    warmup: bool


@dataclasses.dataclass(kw_only=True)
class ProfileResult:
    """The timed steps of a profile and what they say.

    Attributes:
        steps: the timed steps (warm-up excluded).
        warmup_steps: how many steps were run first and left out.
        device, backend: where it ran (``str(target)`` and ``target.backend.label``).
        precision: the AMP precision of the loop, when known (shapes the advice).
        sync_calls_per_step: device synchronisations the profiler added per step.
        sync_cost_s: one synchronize() on the idle device (None when not measured).
        unprofiled_step_s: median free-running step (only step-boundary syncs), when measured.
        settings: workload / config, copied into the JSON.
    """

    steps: list[StepRecord]
    warmup_steps: int
    device: str
    backend: str
    precision: str | None = None
    sync_calls_per_step: float = 0.0
    sync_cost_s: float | None = None
    unprofiled_step_s: float | None = None
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    is_accelerator: bool = True
    amp_hint: str | None = None
    compile_backend: str | None = "inductor"

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError(
                f"no timed steps: all {self.warmup_steps} recorded steps were warm-up; run more steps than warmup"
            )

    @property
    def description(self) -> str:
        """The workload line from ``settings`` ("" when profiling user code)."""
        return str(self.settings.get("description", ""))

    @property
    def step_s(self) -> float:
        """Mean step time in seconds (the phases' means sum to it)."""
        return statistics.fmean(s.total_s for s in self.steps)

    @property
    def step_median_s(self) -> float:
        """Median step time in seconds."""
        return statistics.median(s.total_s for s in self.steps)

    @property
    def phase_s(self) -> dict[str, float]:
        """Mean seconds per step for each phase: the canonical ones first, then custom names."""
        names = [p for p in PHASES if any(p in s.phases for s in self.steps)]
        names += sorted({k for s in self.steps for k in s.phases} - set(names))
        return {n: statistics.fmean(s.phases.get(n, 0.0) for s in self.steps) for n in names}

    @property
    def fractions(self) -> dict[str, float]:
        """Each phase's share of the step (sums to 1)."""
        total = self.step_s
        return {k: (v / total if total > 0 else 0.0) for k, v in self.phase_s.items()}

    @property
    def analysis(self) -> Analysis:
        """Dominant term, verdict and advice (see :func:`torchport.profile.analysis.analyze`)."""
        return analyze(self.phase_s, device=self.backend, precision=self.precision,
                       is_accelerator=self.is_accelerator, amp_hint=self.amp_hint,
                       compile_backend=self.compile_backend)

    @property
    def sync_overhead_s(self) -> float | None:
        """Estimated seconds per step spent in the profiler's own sync calls (idle-device cost)."""
        if self.sync_cost_s is None:
            return None
        return self.sync_cost_s * self.sync_calls_per_step

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record: per-phase seconds and fractions, the dominant term, the steps."""
        a = self.analysis
        return {
            "schema": "torchport.profile/1",
            "device": self.device,
            "backend": self.backend,
            "precision": self.precision,
            "steps": len(self.steps),
            "warmup_steps": self.warmup_steps,
            "step_s": self.step_s,
            "step_median_s": self.step_median_s,
            "step_min_s": min(s.total_s for s in self.steps),
            "step_max_s": max(s.total_s for s in self.steps),
            "phases": {k: {"seconds": v, "fraction": self.fractions[k]} for k, v in self.phase_s.items()},
            "dominant": a.dominant,
            "dominant_phase": a.dominant_phase,
            "dominant_fraction": a.fraction,
            "verdict": a.verdict,
            "advice": a.advice,
            "warning": a.warning,
            "groups": a.groups,
            "sync": {
                "calls_per_step": self.sync_calls_per_step,
                "cost_per_call_s": self.sync_cost_s,
                "overhead_per_step_s": self.sync_overhead_s,
                "unprofiled_step_s": self.unprofiled_step_s,
            },
            "per_step": [{"index": s.index, "total_s": s.total_s, "phases": s.phases} for s in self.steps],
            "settings": self.settings,
        }

    def summary(self) -> str:
        """Plain-text report: one line per phase, then the verdict, advice and warning."""
        lines = [f"{len(self.steps)} steps on {self.device} ({self.backend}), mean step {self.step_s * 1e3:.1f} ms"
                 f" (warm-up {self.warmup_steps} excluded)"]
        for name, sec in self.phase_s.items():
            lines.append(f"  {name:<10} {sec * 1e3:9.2f} ms  {self.fractions[name] * 100:5.1f}%")
        a = self.analysis
        lines.append(f"dominant: {a.dominant_phase} -> {a.verdict} ({a.fraction * 100:.0f}% of the step)")
        lines += [f"  - {tip}" for tip in a.advice]
        lines.append(f"note: {a.warning}")
        return "\n".join(lines)


class StepProfiler:
    """Time the phases of training steps at device-synchronised boundaries.

    Args:
        warmup: the first ``warmup`` steps are recorded but left out of the result (NPU
            graph compilation takes 10-30 s on the first iteration).
        target: device :class:`~torchport.runtime.device.Target`; default the current one.
        sync: synchronize at every phase boundary (True, correct attribution) or only at
            step boundaries (False: step times stay right, phase split is what the host saw).
        annotate: also emit ``torch.profiler.record_function("torchport/<phase>")`` ranges,
            so a Chrome trace shows the phases.

    Note:
        Phases cannot nest; a phase name used twice in a step accumulates. Phase names
        outside :data:`PHASES` are kept and reported, and count as "other" for the verdict.
    """

    def __init__(self, *, warmup: int = 2, target: Any = None, sync: bool = True, annotate: bool = False) -> None:
        if warmup < 0:
            raise ValueError(f"warmup={warmup} must be >= 0")
        if target is None:
            from torchport.runtime.device import current

            target = current()
        self.target = target
        self.warmup = int(warmup)
        self.sync = bool(sync)
        self.annotate = bool(annotate)
        self.records: list[StepRecord] = []
        self.sync_calls = 0
        self._started = False
        self._active: str | None = None
        self._cur: dict[str, float] = {}
        self._t = 0.0
        self._step_start = 0.0

    # -- clock ------------------------------------------------------------------------
    def _mark(self, sync: bool) -> float:
        if sync:
            _synchronize(self.target)
            self.sync_calls += 1
        return _clock()

    def _charge(self, name: str, now: float) -> None:
        self._cur[name] = self._cur.get(name, 0.0) + (now - self._t)
        self._t = now

    def start(self) -> "StepProfiler":
        """Open the first step (idempotent; ``iterate`` and ``with`` call it)."""
        if not self._started:
            self._started = True
            self._t = self._step_start = self._mark(True)
        return self

    def __enter__(self) -> "StepProfiler":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None and self._cur and self._active is None:
            self.step()

    # -- phases -----------------------------------------------------------------------
    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the time inside the block (including the device work it queued) to ``name``."""
        if self._active is not None:
            raise RuntimeError(f"phase {name!r} opened inside phase {self._active!r}: phases cannot nest; "
                               "close the outer phase first")
        self.start()
        self._charge("other", self._mark(self.sync))
        self._active = name
        try:
            with self._annotation(name):
                yield
        finally:
            self._charge(name, self._mark(self.sync))
            self._active = None

    def _annotation(self, name: str) -> contextlib.AbstractContextManager:
        """A ``torchport/<phase>`` range in the trace when annotating, else nothing."""
        if not self.annotate:
            return contextlib.nullcontext()
        import torch

        return torch.profiler.record_function(f"torchport/{name}")

    def step(self) -> StepRecord:
        """Close the current step (device-synchronised) and return its record."""
        if self._active is not None:
            raise RuntimeError(f"step() called inside phase {self._active!r}; close the phase first")
        self.start()
        now = self._mark(True)
        self._charge("other", now)
        rec = StepRecord(len(self.records), now - self._step_start, dict(self._cur), len(self.records) < self.warmup)
        self.records.append(rec)
        self._cur = {}
        self._step_start = now
        return rec

    def _abandon(self) -> None:
        """Drop a step that never got past its data fetch (the iterable ran out)."""
        self._cur = {}
        self._t = self._step_start = _clock()

    def iterate(self, iterable: Iterable, *, steps: int | None = None, cycle: bool = True) -> Iterator[Any]:
        """Yield batches from ``iterable``, timing each fetch as the ``"data"`` phase.

        Each new fetch first closes the previous step if the loop body did not call
        :meth:`step`, so a plain ``for`` loop is profiled step by step.

        Args:
            iterable: a DataLoader or any iterable of batches.
            steps: total steps including warm-up (None: until the iterable ends).
            cycle: with ``steps``, re-iterate the iterable when it runs out (a new epoch).
        """
        self.start()
        it = iter(iterable)
        done = 0
        while steps is None or done < steps:
            if self._active is not None:
                raise RuntimeError(f"phase {self._active!r} still open at the next fetch")
            self._charge("other", self._mark(self.sync))
            with self._annotation("data"):
                batch = next(it, _END)
                if batch is _END and steps is not None and cycle:
                    it = iter(iterable)  # a new epoch
                    batch = next(it, _END)
            if batch is _END:
                self._abandon()
                return
            self._charge("data", self._mark(self.sync))
            count = len(self.records)
            yield batch
            if len(self.records) == count:
                self.step()
            done += 1

    # -- results ----------------------------------------------------------------------
    @property
    def timed(self) -> list[StepRecord]:
        """Records after warm-up."""
        return [r for r in self.records if not r.warmup]

    def result(self, *, precision: str | None = None, settings: dict[str, Any] | None = None,
               measure_sync: bool = True, unprofiled_step_s: float | None = None) -> ProfileResult:
        """Summarise the timed steps.

        Args:
            precision: the loop's AMP precision (so advice does not suggest AMP twice).
            settings: free-form config to carry into the JSON.
            measure_sync: time :func:`sync_cost` on the idle device now.
            unprofiled_step_s: free-running step time, if the caller measured one.
        """
        timed = self.timed
        calls = self.sync_calls / max(1, len(self.records))
        amp_hint = None
        try:
            auto = self.target.backend.amp.resolve_auto()   # advise AMP only where the policy finds it fast
            amp_hint = auto if auto != "fp32" else None
        except Exception:
            amp_hint = None
        return ProfileResult(
            steps=timed,
            warmup_steps=len(self.records) - len(timed),
            device=str(self.target),
            backend=self.target.backend.label,
            precision=precision,
            sync_calls_per_step=calls,
            sync_cost_s=sync_cost(self.target) if measure_sync else None,
            unprofiled_step_s=unprofiled_step_s,
            settings=dict(settings or {}),
            is_accelerator=bool(self.target.is_accelerator),
            amp_hint=amp_hint,
            compile_backend=getattr(self.target.backend, "compile_backend", None),
        )


def sync_cost(target: Any = None, *, repeats: int = 25) -> float:
    """Median seconds of one ``synchronize()`` on an idle device (the profiler's own cost per boundary)."""
    if target is None:
        from torchport.runtime.device import current

        target = current()
    _synchronize(target)
    samples = []
    for _ in range(repeats):
        t0 = _clock()
        _synchronize(target)
        samples.append(_clock() - t0)
    return statistics.median(samples)
