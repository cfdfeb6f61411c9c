"""The check registry and the runner behind ``torchport check``.

The registry is explicit: one :class:`CheckSpec` line per check, in run order. Each
entry adapts :class:`CheckOptions` (the one config object the CLI flags fill) to the
check function's arguments.

Example::

    from torchport.checks import run_checks, CheckOptions
    report = run_checks(only=["amp", "data"], options=CheckOptions(steps=20))
    report.exit_code        # 1 when any check failed
"""

from __future__ import annotations

import dataclasses
import difflib
import platform as _platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

from torchport.checks.result import CheckResult, Evidence, Report, Status
from torchport.runtime.checkpoint import CheckpointRefusedError

__all__ = ["CheckOptions", "CheckSpec", "CHECKS", "ALIASES", "select_checks", "run_checks", "UnknownCheckError"]


class UnknownCheckError(ValueError):
    """``--only`` / ``--skip`` named a check that does not exist (the message lists the known ones)."""


@dataclasses.dataclass(kw_only=True)
class CheckOptions:
    """Settings for one ``torchport check`` run (CLI flags map 1:1 onto these fields).

    Args:
        steps: parity steps (default 100).
        record: parity: write a reference here (platform A).
        reference: parity / data: compare against this reference (platform B).
        predict: parity: predict this card's default numerics (``npu`` / ``cuda``): the drift band, and
            ``reference`` judged against it (:mod:`torchport.checks.predict`).
        audit_steps: device-audit training steps.
        expect_accelerator: device audit: fail on CPU (default: when an accelerator is present).
        data_batches: data determinism: batches fingerprinted per loader.
        workers: data determinism: worker counts compared.
        growth_interval: AMP: clean steps before the scale grows.
        include_emulated: checkpoint: add the emulated NPU as a platform.
        checkpoint_steps: checkpoint: steps before saving / after resuming.
        nproc: distributed: processes launched (per node).
        nnodes: distributed: rehearsal nodes (> 1: :mod:`torchport.cluster.rehearsal`).
        net: distributed, nnodes > 1: ``loopback`` (127.0.0.x) or ``netns`` (a network namespace per node).
        dist_timeout: distributed: hard limit for the launch, seconds.
        barrier_timeout: distributed: collective / barrier timeout, seconds.
    """

    steps: int = 100
    record: str | None = None
    reference: str | None = None
    predict: str | None = None
    audit_steps: int = 2
    expect_accelerator: bool | None = None
    data_batches: int = 3
    workers: tuple[int, ...] = (0, 2)
    growth_interval: int = 3
    include_emulated: bool = True
    checkpoint_steps: int = 2
    nproc: int = 2
    nnodes: int = 1
    net: str = "loopback"
    dist_timeout: float = 120.0
    barrier_timeout: float = 30.0


@dataclasses.dataclass(frozen=True)
class CheckSpec:
    """One registered check: its name, a one-line description and how to call it."""

    name: str
    description: str
    run: Callable[[Any, Any, CheckOptions], CheckResult]


def _audit(target: Any, device: Any, o: CheckOptions) -> CheckResult:
    from torchport.checks.audit import device_audit

    return device_audit(target, device=device, steps=o.audit_steps, expect_accelerator=o.expect_accelerator)


def _parity(target: Any, device: Any, o: CheckOptions) -> CheckResult:
    from torchport.checks.parity import parity

    if o.predict is not None:
        from torchport.checks.predict import predict_parity

        return predict_parity(target, o.predict, steps=o.steps, reference=o.reference)
    return parity(target, device=device, steps=o.steps, record=o.record, reference=o.reference)


def _amp(target: Any, device: Any, o: CheckOptions) -> CheckResult:
    from torchport.checks.amp import amp_behaviour

    return amp_behaviour(target, device=device, growth_interval=o.growth_interval)


def _data(target: Any, device: Any, o: CheckOptions) -> CheckResult:
    from torchport.checks.data import data_determinism

    return data_determinism(target, batches=o.data_batches, workers=o.workers,
                            reference=o.reference if o.reference and Path(o.reference).is_file() else None)


def _checkpoint(target: Any, device: Any, o: CheckOptions) -> CheckResult:
    from torchport.checks.checkpoint import checkpoint_portability

    return checkpoint_portability(target, steps=o.checkpoint_steps, resume_steps=o.checkpoint_steps,
                                  include_emulated=o.include_emulated)


def _distributed(target: Any, device: Any, o: CheckOptions) -> CheckResult:
    from torchport.checks.distributed import distributed_smoke

    return distributed_smoke(target, nproc=o.nproc, nnodes=o.nnodes, net=o.net, timeout=o.dist_timeout, barrier_timeout=o.barrier_timeout,
                             device=device)


#: The checks, in run order.
CHECKS: dict[str, CheckSpec] = {s.name: s for s in (
    CheckSpec("device-audit", "every tensor and op on the selected device; CPU fallbacks per op", _audit),
    CheckSpec("parity", "loss curve and module outputs match a reference from another platform", _parity),
    CheckSpec("amp", "autocast dtypes; overflow skips the step and backs off; scale grows; bf16 without scaler", _amp),
    CheckSpec("data-determinism", "same batches across runs, worker counts and platforms; epochs and ranks differ",
              _data),
    CheckSpec("checkpoint", "save on each platform, resume on each other in a fresh process", _checkpoint),
    CheckSpec("distributed", "torchrun: backend, all-reduce, barrier with timeout, identical initial weights",
              _distributed),
)}

#: Short names accepted by ``--only`` / ``--skip``.
ALIASES = {"audit": "device-audit", "device": "device-audit", "data": "data-determinism", "ckpt": "checkpoint",
           "dist": "distributed", "checkpoints": "checkpoint"}


def _resolve(name: str) -> str:
    key = name.strip().lower().replace("_", "-")
    key = ALIASES.get(key, key)
    if key not in CHECKS:
        known = list(CHECKS) + sorted(ALIASES)
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownCheckError(f"unknown check {name!r}; checks: {', '.join(CHECKS)} "
                                f"(aliases: {', '.join(sorted(ALIASES))}).{hint}")
    return key


def select_checks(only: Iterable[str] | None = None, skip: Iterable[str] | None = None) -> list[str]:
    """Check names to run, in registry order: ``only`` (default all) minus ``skip``; comma lists allowed.

    Raises:
        UnknownCheckError: a name that is neither a check nor an alias.
    """
    def names(items: Iterable[str] | None) -> set[str]:
        return {_resolve(n) for item in (items or []) for n in str(item).split(",") if n.strip()}

    wanted, unwanted = names(only), names(skip)
    return [n for n in CHECKS if (not wanted or n in wanted) and n not in unwanted]


def _crashed(name: str, exc: BaseException, started: float, platform: str | None) -> CheckResult:
    tb = traceback.extract_tb(exc.__traceback__)
    frame = tb[-1] if tb else None
    where = f"{frame.filename}:{frame.lineno} in {frame.name}" if frame else None
    return CheckResult(name=name, status=Status.FAIL, summary=f"the check crashed: {type(exc).__name__}: {exc}"[:300],
                       evidence=[Evidence(what="unexpected exception", measured=f"{type(exc).__name__}: {exc}"[:500],
                                          where=where, status=Status.FAIL,
                                          detail="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-1500:])],
                       seconds=time.perf_counter() - started, platform=platform)


def run_checks(target: Any = None, *, only: Iterable[str] | None = None, skip: Iterable[str] | None = None,
               options: CheckOptions | None = None, device: Any = None,
               on_result: Callable[[CheckResult], None] | None = None,
               on_start: Callable[[str], None] | None = None) -> Report:
    """Run the selected checks against ``target`` and collect a :class:`~torchport.checks.result.Report`.

    Args:
        target: :class:`~torchport.checks.target.CheckTarget`, ``"package.module:factory"`` or None (default).
        only, skip: check names or aliases (see :data:`CHECKS`, :data:`ALIASES`).
        options: :class:`CheckOptions`.
        device: torchport ``Target`` (default: :func:`torchport.current`).
        on_start, on_result: progress callbacks (the CLI's spinner and live lines).

    Returns:
        The report; a check that raises becomes a ``fail`` result naming the exception, the others still run.
    """
    from torchport.checks.target import describe, load_target
    from torchport.runtime.device import current

    options = options or CheckOptions()
    names = select_checks(only, skip)
    target = load_target(target)
    dev = device or current()
    started = time.perf_counter()
    report = Report(meta={"target": describe(target), "device": str(dev), "precision": target.precision,
                          "checks": names, "python": _platform.python_version(), "argv": list(sys.argv),
                          "options": dataclasses.asdict(options)})
    try:
        import torch

        report.meta["torch"] = str(torch.__version__)
    except Exception:  # pragma: no cover - torch is a dependency
        pass
    for name in names:
        if on_start is not None:
            on_start(name)
        t0 = time.perf_counter()
        try:
            result = CHECKS[name].run(target, dev, options)
        except CheckpointRefusedError:
            raise       # a file from elsewhere refused on purpose (--reference): a refusal, exit 5, not a crash
        except Exception as exc:  # one broken check must not hide the others
            result = _crashed(name, exc, t0, str(dev))
        if not result.seconds:
            result.seconds = time.perf_counter() - t0
        result.platform = result.platform or str(dev)
        report.results.append(result)
        if on_result is not None:
            on_result(result)
    report.meta["seconds"] = round(time.perf_counter() - started, 3)
    return report
