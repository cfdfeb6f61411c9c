"""Check 3, AMP behaviour: autocast, loss scaling and the loop around them do what they promise.

Evidence gathered, on the selected device with the target's model:

1. **autocast** -- active inside ``amp.autocast()`` with the expected dtype; Linear/Conv
   outputs in the low precision, the loss in float32, master weights stay float32.
2. **forced overflow** -- one gradient gets an ``inf`` after backward: the scaler must skip
   the step (parameters and optimizer state bit-identical), back the scale off by its
   backoff factor, reset its growth tracker, and the loop must not step the LR scheduler;
   an ``overflow`` :class:`~torchport.runtime.amp.ScaleEvent` is recorded.
3. **growth** -- after ``growth_interval`` clean steps the scale grows by its growth factor
   (a ``growth`` event).
4. **bf16** -- runs without a scaler where bf16 is usable.

Where the backend's policy has no fp16 scaler (CPU), the scaler is forced on for the
mechanics test, on the low precision the backend runs. A scaler supplied by the target
(``build_scaler``) is the one tested: a disabled scaler fails here.

Example::

    from torchport.checks import amp_behaviour
    r = amp_behaviour(growth_interval=3)
    r.series["loss scale"]     # [1024.0, 512.0, 512.0, 512.0, 1024.0]: backoff then growth
"""

from __future__ import annotations

import math
import time
from typing import Any

from torchport.checks.result import CheckResult, Evidence, Status

__all__ = ["amp_behaviour"]

NAME = "amp"
_INIT_SCALE = 2.0 ** 10


def _autocast_state(device_type: str) -> tuple[bool, Any]:
    import torch

    try:
        return torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)
    except TypeError:  # torch < 2.4: per-device query functions
        return torch.is_autocast_enabled(), None


def _low_precision(dev: Any, target_precision: str) -> str | None:
    """The precision whose autocast we test: the target's when it is a low one, else the backend's."""
    policy = dev.backend.amp
    if target_precision in ("fp16", "bf16") and policy.runs(target_precision):
        return target_precision
    return policy.low()


def _scaler_precision(dev: Any) -> str | None:
    policy = dev.backend.amp
    if "fp16" in policy.low_precision and policy.fp16_needs_scaler:
        return "fp16"
    return next((p for p in policy.low_precision if policy.runs(p)), None)


def _policy_evidence(dev: Any) -> list[Evidence]:
    """What ``precision="auto"`` picks here and why (the CPU's capability policy); nothing where the backend
    table is the whole reason. Behaviour is checked in the low precision either way: slow is not broken."""
    policy = dev.backend.amp
    why = policy.reason()
    if why is None:
        return []
    return [Evidence(what="precision policy (auto)", measured=policy.resolve_auto(), threshold=None,
                     status=Status.PASS, detail=why)]


def _autocast_evidence(target: Any, dev: Any, precision: str) -> list[Evidence]:
    import torch

    from torchport.checks.target import LoaderSpec, build_state, iter_batches, split_batch
    from torchport.runtime.batch import to_device

    ev: list[Evidence] = []
    state = build_state(target, dev, precision=precision, scaler=False)
    amp = state.amp
    inputs, targets, _ = split_batch(next(iter(iter_batches(target, LoaderSpec(seed=target.seed,
                                                                                batch_size=target.batch_size), 1))))
    inputs, targets = to_device((inputs, targets), dev.device)
    dtypes: list[tuple[str, Any]] = []
    kinds = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    handles = [m.register_forward_hook(lambda mod, a, out, n=n: dtypes.append((n, getattr(out, "dtype", None))))
               for n, m in state.model.named_modules() if isinstance(m, kinds)]
    try:
        with amp.autocast():
            enabled, adtype = _autocast_state(dev.type)
            out = state.model(inputs)
            loss = state.loss_fn(out, targets)
    finally:
        for h in handles:
            h.remove()
    ev.append(Evidence(what=f"autocast active inside amp.autocast() ({precision})", measured=enabled, threshold=True,
                       where=f"device type {dev.type}", status=Status.PASS if enabled else Status.FAIL))
    if adtype is not None:
        ev.append(Evidence(what="autocast dtype", measured=str(adtype).replace("torch.", ""),
                           threshold=str(amp.dtype).replace("torch.", ""),
                           status=Status.PASS if adtype == amp.dtype else Status.FAIL))
    wrong = [f"model.{n} -> {str(d).replace('torch.', '')}" for n, d in dtypes if d != amp.dtype]
    ev.append(Evidence(what="Linear/Conv outputs in the autocast dtype", measured=f"{len(dtypes) - len(wrong)}/{len(dtypes)}",
                       threshold=f"all {str(amp.dtype).replace('torch.', '')}", where="; ".join(wrong[:4]) or None,
                       status=Status.FAIL if wrong else Status.PASS,
                       detail="A module forced to float32 inside autocast (or run outside it) loses the speed-up."
                       if wrong else None))
    ev.append(Evidence(what="loss dtype under autocast", measured=str(loss.dtype).replace("torch.", ""),
                       threshold="float32", status=Status.PASS if loss.dtype == torch.float32 else Status.WARN,
                       detail=None if loss.dtype == torch.float32 else
                       "Reductions in 16-bit lose precision; compute the loss in float32 (out.float())."))
    master = [n for n, p in state.model.named_parameters() if p.dtype != torch.float32]
    ev.append(Evidence(what="master weights stay float32", measured=len(master), threshold="== 0",
                       where=", ".join(master[:4]) or None, status=Status.FAIL if master else Status.PASS))
    return ev


def _snapshot(state: Any) -> dict[str, Any]:
    """Copies (not views) of parameters, optimizer state and scheduler state."""
    import torch

    def copy(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return obj.detach().clone().cpu()
        if isinstance(obj, dict):
            return {k: copy(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(copy(v) for v in obj)
        return obj

    names = {i: f"model.{n}" for i, (n, _) in enumerate(state.model.named_parameters())}
    optim = {names.get(k, str(k)): v for k, v in copy(state.optimizer.state_dict()["state"]).items()}
    return {"params": {f"model.{n}": p.detach().clone().cpu() for n, p in state.model.named_parameters()},
            "optim": optim, "sched": copy(state.scheduler.state_dict()) if state.scheduler is not None else None}


def _changed(before: Any, after: Any, prefix: str = "") -> list[str]:
    import torch

    if isinstance(before, torch.Tensor):
        same = isinstance(after, torch.Tensor) and before.shape == after.shape and torch.equal(
            before.cpu(), after.cpu())
        return [] if same else [prefix or "tensor"]
    if isinstance(before, dict):
        out = []
        for k in before:
            out += _changed(before[k], after.get(k) if isinstance(after, dict) else None, f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if before == after else [prefix]


def _scaler_evidence(target: Any, dev: Any, precision: str,
                     growth_interval: int) -> tuple[list[Evidence], dict[str, list[float]]]:
    import torch

    from torchport.checks.target import LoaderSpec, build_state, iter_batches, train_step, where_defined

    ev: list[Evidence] = []
    own = target.build_scaler is None
    state = build_state(target, dev, precision=precision, scaler=True if own else None,
                        amp_kwargs={"init_scale": _INIT_SCALE, "growth_interval": growth_interval})
    scaler, amp = state.amp.scaler, state.amp
    origin = where_defined(target.build_scaler) if not own else f"torchport.Amp({precision!r}) on {dev}"
    enabled = scaler is not None and bool(getattr(scaler, "is_enabled", lambda: True)())
    ev.append(Evidence(what="loss scaler present and enabled", measured=enabled, threshold=True, where=origin,
                       status=Status.PASS if enabled else Status.FAIL,
                       detail=None if enabled else "A disabled GradScaler steps on inf/NaN gradients. torch.amp."
                       "GradScaler() without a device defaults to one device type and silently disables itself "
                       "elsewhere; build it with the selected device (torchport.Amp does)."))
    if scaler is not None and hasattr(scaler, "set_growth_interval") and not own:
        scaler.set_growth_interval(growth_interval)
    if state.scheduler is None:  # the loop's promise is what is tested: give it a scheduler to (not) step
        state.scheduler = torch.optim.lr_scheduler.LambdaLR(state.optimizer, lambda e: 0.5 ** e)
    batches = iter_batches(target, LoaderSpec(seed=target.seed, batch_size=target.batch_size), growth_interval + 3)
    timeline: list[float] = []

    def scale_now() -> float:
        return float(scaler.get_scale()) if enabled else 1.0

    def tracker() -> int | None:
        try:
            return int(scaler._get_growth_tracker())
        except Exception:
            return None

    skipped: list[float] = []
    train_step(state, next(batches))  # warm-up: optimizer state exists, growth tracker at 1
    timeline.append(scale_now())
    skipped.append(0.0)
    before, scale0, tracker0 = _snapshot(state), scale_now(), tracker()
    poisoned: list[str] = []

    def inject(st: Any) -> None:
        for n, p in st.model.named_parameters():
            if p.grad is not None:
                p.grad.view(-1)[0] = math.inf
                poisoned.append(f"model.{n}")
                return

    out = train_step(state, next(batches), before_step=inject)
    timeline.append(scale_now())
    skipped.append(0.0 if out.stepped else 1.0)
    after = _snapshot(state)
    changed_p = _changed(before["params"], after["params"])
    changed_o = _changed(before["optim"], after["optim"])
    where = f"inf injected into {poisoned[0] if poisoned else '?'}.grad at step {state.step}"
    ev.append(Evidence(what="overflow step skipped", measured=not out.stepped, threshold=True, where=where,
                       status=Status.PASS if not out.stepped else Status.FAIL))
    nonfinite = [n for n, p in state.model.named_parameters() if not bool(torch.isfinite(p).all())]
    ev.append(Evidence(what="parameters bit-identical after the skipped step", measured=f"{len(changed_p)} changed",
                       threshold="0 changed", where=", ".join(changed_p[:4]) or None,
                       status=Status.FAIL if changed_p else Status.PASS,
                       detail=(f"now non-finite: {', '.join(nonfinite[:4])}" if nonfinite else None)))
    ev.append(Evidence(what="optimizer state bit-identical after the skipped step", measured=f"{len(changed_o)} changed",
                       threshold="0 changed", where=", ".join(changed_o[:4]) or None,
                       status=Status.FAIL if changed_o else Status.PASS))
    backoff = float(scaler.get_backoff_factor()) if enabled else 0.5
    ev.append(Evidence(what="scale backs off on overflow", measured=f"{scale0:g} -> {scale_now():g}",
                       threshold=f"x{backoff:g} = {scale0 * backoff:g}",
                       status=Status.PASS if enabled and scale_now() == scale0 * backoff else Status.FAIL))
    t_after = tracker()
    ev.append(Evidence(what="growth tracker resets on overflow", measured=f"{tracker0} -> {t_after}", threshold="0",
                       status=Status.PASS if enabled and t_after == 0 else Status.FAIL))
    sched_changed = _changed(before["sched"], after["sched"]) if before["sched"] is not None else []
    ev.append(Evidence(what="LR scheduler not stepped on the skipped step", measured=f"{len(sched_changed)} fields changed",
                       threshold="0", where=", ".join(sched_changed[:3]) or None,
                       status=Status.FAIL if sched_changed else Status.PASS))
    last = amp.events[-1] if amp.events else None
    ok_event = last is not None and last.reason == "overflow" and last.skipped and last.step == amp.steps
    ev.append(Evidence(what="overflow event recorded", measured=repr(last) if last else "no events",
                       threshold=f"ScaleEvent(step={amp.steps}, reason='overflow', skipped=True)",
                       status=Status.PASS if ok_event else Status.FAIL))
    # growth: growth_interval clean steps after the reset double the scale
    backed = scale_now()
    grew_at = None
    for i in range(growth_interval):
        skipped.append(0.0 if train_step(state, next(batches)).stepped else 1.0)
        timeline.append(scale_now())
        if scale_now() > backed and grew_at is None:
            grew_at = i + 1
    growth = float(scaler.get_growth_factor()) if enabled else 2.0
    ev.append(Evidence(what=f"scale grows after growth_interval={growth_interval} clean steps",
                       measured=f"{backed:g} -> {scale_now():g}" + (f" after {grew_at} steps" if grew_at else ""),
                       threshold=f"x{growth:g} after exactly {growth_interval}",
                       status=Status.PASS if enabled and grew_at == growth_interval and scale_now() == backed * growth
                       else Status.FAIL))
    grow_events = [e for e in amp.events if e.reason == "growth"]
    ev.append(Evidence(what="growth event recorded", measured=len(grow_events), threshold=">= 1",
                       status=Status.PASS if grow_events else Status.FAIL))
    return ev, {"loss scale": timeline, "skipped": skipped}


def _bf16_evidence(target: Any, dev: Any) -> list[Evidence]:
    from torchport.checks.target import LoaderSpec, build_state, iter_batches, train_step

    if not dev.backend.amp.runs("bf16"):
        return [Evidence(what="bf16 without a scaler", measured="bf16 not usable here", status=Status.SKIP)]
    state = build_state(target, dev, precision="bf16", scaler=False)
    out = train_step(state, next(iter(iter_batches(target, LoaderSpec(seed=target.seed, batch_size=target.batch_size), 1))))
    ev = [Evidence(what="bf16 step runs without a scaler", measured=f"loss {out.loss:.4g}, scaler {state.amp.scaler}",
                   threshold="finite loss, no scaler", status=Status.PASS if math.isfinite(out.loss) and
                   state.amp.scaler is None else Status.FAIL)]
    if target.precision == "bf16" and target.build_scaler is not None:
        ev.append(Evidence(what="target builds a loss scaler for bf16", measured=True, threshold=False,
                           status=Status.WARN, detail="bf16 has fp32's exponent range and needs no loss scaling."))
    return ev


def amp_behaviour(target: Any = None, *, device: Any = None, growth_interval: int = 3) -> CheckResult:
    """Run the AMP evidence (see module docstring) for ``target`` on ``device``.

    Args:
        target: :class:`~torchport.checks.target.CheckTarget`, spec string or None.
        device: torchport ``Target`` (default: the current one).
        growth_interval: clean steps before the scale grows (kept small so the check is fast).

    Returns:
        A :class:`~torchport.checks.result.CheckResult` named ``amp`` with the ``loss scale``
        series (warm-up step, overflow step, growth steps) for the HTML timeline.
    """
    from torchport.checks.target import load_target
    from torchport.runtime.device import current
    from torchport.runtime.seed import seed_everything

    started = time.perf_counter()
    target = load_target(target)
    dev = device or current()
    seed_everything(target.seed)
    ev: list[Evidence] = _policy_evidence(dev)
    low = _low_precision(dev, target.precision)
    if low is None:
        ev.append(Evidence(what="autocast", measured=f"no low precision usable on {dev.backend.label}", status=Status.SKIP))
    else:
        ev += _autocast_evidence(target, dev, low)
    timeline: dict[str, list[float]] = {}
    sp = _scaler_precision(dev) if target.precision not in ("fp16", "bf16") else target.precision
    if sp is None:
        ev.append(Evidence(what="loss scaling", measured=f"no low precision usable on {dev.backend.label}",
                           status=Status.SKIP))
    else:
        sev, timeline = _scaler_evidence(target, dev, sp, growth_interval)
        ev += sev
    ev += _bf16_evidence(target, dev)
    return CheckResult.from_evidence(NAME, ev, ok=f"autocast {low}, overflow skipped + backoff + growth verified "
                                     f"({sp} with scaler) on {dev}", platform=str(dev),
                                     series=timeline, started=started)
