"""Check 1, device audit: during a short run, is everything on the selected device?

What it measures (each an :class:`~torchport.checks.result.Evidence` item):

* the job's device — "accelerator expected but the job is on CPU" fails;
* parameters, buffers, gradients, optimizer state, loss-module tensors, model inputs:
  every tensor with at least one dimension lives on the selected device;
* plain tensor attributes of modules (not registered as buffers: ``.to()`` skips them);
* every aten op, forward and backward, that touches a CPU tensor or mixes devices,
  with module, phase and op (a ``TorchDispatchMode``, see :mod:`~torchport.checks.probes`);
* backend CPU-fallback warnings, per op.

Example::

    from torchport.checks import device_audit
    result = device_audit(steps=2)          # default target on the selected device
    print(result.status, result.summary)    # fail  op touches a CPU tensor at model.norm [aten.sub.Tensor, forward] ...
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from torchport.checks.result import CheckResult, Evidence, Status

__all__ = ["device_audit", "placement_problems"]

NAME = "device-audit"
_MAX_ITEMS = 12  # evidence items per finding kind before "... and N more"


def _expect_accelerator(explicit: bool | None) -> tuple[bool, list[str]]:
    from torchport import backends
    from torchport.env import env_flag

    available = [s.label for s in backends.specs() if s.is_accelerator and s.probe()]
    if explicit is not None:
        return explicit, available
    return env_flag("TORCHPORT_REQUIRE_ACCELERATOR") or bool(available), available


def _tensors_of(prefix: str, obj: Any) -> Iterable[tuple[str, Any]]:
    """``(name, tensor)`` for tensors nested in dicts/lists/tuples (optimizer state)."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors_of(f"{prefix}.{k}", v)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors_of(f"{prefix}[{i}]", v)


def placement_problems(state: Any, device: Any) -> dict[str, list[str]]:
    """Tensors of a :class:`~torchport.checks.target.TrainState` that are not on ``device``.

    Returns:
        ``{"parameters": [...], "buffers": [...], "gradients": [...], "optimizer state": [...],
        "loss tensors": [...], "plain tensor attributes": [...]}``; each entry is
        ``"name (device, shape)"``. 0-dim CPU tensors (step counters) are allowed.
    """
    import torch

    def off(t: Any) -> bool:
        return t.device != device and not (t.device.type == "cpu" and t.dim() == 0)

    def fmt(name: str, t: Any) -> str:
        return f"{name} ({t.device}, {list(t.shape)})"

    model, loss_fn = state.model, state.loss_fn
    out: dict[str, list[str]] = {k: [] for k in ("parameters", "buffers", "gradients", "optimizer state",
                                                  "loss tensors", "plain tensor attributes")}
    pnames = {id(p): f"model.{n}" for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        if off(p):
            out["parameters"].append(fmt(f"model.{n}", p))
        if p.grad is not None and off(p.grad):
            out["gradients"].append(fmt(f"model.{n}.grad", p.grad))
    for n, b in model.named_buffers():
        if off(b):
            out["buffers"].append(fmt(f"model.{n}", b))
    for p, st in state.optimizer.state.items():
        for name, t in _tensors_of(f"optimizer[{pnames.get(id(p), '?')}]", st):
            if off(t):
                out["optimizer state"].append(fmt(name, t))
    if isinstance(loss_fn, torch.nn.Module):
        for n, t in list(loss_fn.named_parameters()) + list(loss_fn.named_buffers()):
            if off(t):
                out["loss tensors"].append(fmt(f"loss.{n}", t))
    roots = [("model", model)] + ([("loss", loss_fn)] if isinstance(loss_fn, torch.nn.Module) else [])
    for prefix, root in roots:
        for mname, mod in root.named_modules():
            registered = set(mod._parameters) | set(mod._buffers)
            for attr, val in vars(mod).items():
                if isinstance(val, torch.Tensor) and attr not in registered and not attr.startswith("__"):
                    where = f"{prefix}.{mname}.{attr}" if mname else f"{prefix}.{attr}"
                    out["plain tensor attributes"].append(fmt(where, val) + (" [wrong device]" if off(val) else ""))
    return out


def _input_hook(findings: list[str], device: Any):
    import torch
    from torch.utils._pytree import tree_flatten

    def hook(mod, args, kwargs):
        flat, _ = tree_flatten((args, kwargs))
        for i, t in enumerate(x for x in flat if isinstance(x, torch.Tensor)):
            if t.device != device and not (t.device.type == "cpu" and t.dim() == 0):
                findings.append(f"input {i} ({t.device}, {list(t.shape)})")
    return hook


def device_audit(target: Any = None, *, device: Any = None, steps: int = 2, expect_accelerator: bool | None = None,
                 allow_fallback: Iterable[str] = ()) -> CheckResult:
    """Run ``steps`` training steps of ``target`` under the device probes and judge placement.

    Args:
        target: a :class:`~torchport.checks.target.CheckTarget`, ``"package.module:factory"``,
            or None for the default target.
        device: a torchport ``Target``; default :func:`torchport.current`.
        steps: training steps to observe (2 is enough: the second one sees optimizer state).
        expect_accelerator: fail when the job is on CPU; default: True when
            ``TORCHPORT_REQUIRE_ACCELERATOR`` is set or any accelerator is available here.
        allow_fallback: op names whose CPU fallback is accepted (reported as pass).

    Returns:
        A :class:`~torchport.checks.result.CheckResult` named ``device-audit``.
    """
    from torchport.checks.probes import DeviceProbe, ModuleTracker, capture_fallbacks
    from torchport.checks.target import LoaderSpec, build_state, iter_batches, load_target, train_step
    from torchport.runtime.device import current
    from torchport.runtime.seed import seed_everything

    started = time.perf_counter()
    target = load_target(target)
    dev = device or current()
    ev: list[Evidence] = []
    expected, available = _expect_accelerator(expect_accelerator)
    if dev.is_accelerator:
        ev.append(Evidence(what="job device", measured=str(dev), threshold="an accelerator", status=Status.PASS))
    elif expected:
        ev.append(Evidence(what="accelerator expected but the job is on CPU", measured=str(dev),
                           threshold="an accelerator", where=f"available: {', '.join(available) or 'none'}",
                           status=Status.FAIL, detail="Select the device with torchport.select_device() / "
                           "TORCHPORT_DEVICE, and run `torchport doctor` to see why no accelerator was picked."))
    else:
        # Nothing can be off the device when the device is the CPU: a PASS here would prove nothing.
        ev.append(Evidence(what="inconclusive on CPU (cannot tell)", measured=str(dev),
                           threshold="an accelerator when one is present", status=Status.SKIP,
                           detail="no accelerator here: tensors left on CPU cannot be told apart from correctly "
                           "placed ones; run this check on the target device (or the emulated NPU)"))
    seed_everything(target.seed)
    state = build_state(target, dev)
    device_t = dev.device
    inputs_off: list[str] = []
    handle = state.model.register_forward_pre_hook(_input_hook(inputs_off, device_t), with_kwargs=True)
    grads_off: list[str] = []
    tracker = ModuleTracker({"model": state.model, "loss": state.loss_fn})
    probe = DeviceProbe(device_t, tracker)

    def before_step(st: Any) -> None:
        grads_off.extend(placement_problems(st, device_t)["gradients"])
        probe.phase = "optimizer"

    error: Exception | None = None
    done = 0
    try:
        with capture_fallbacks() as fallbacks:
            for batch in iter_batches(target, LoaderSpec(seed=target.seed, batch_size=target.batch_size), steps):
                probe.phase = "forward"
                with tracker, probe:
                    train_step(state, batch, before_step=before_step)
                done += 1
    except Exception as exc:  # a real device refuses mixed devices: report where it happened
        error = exc
    finally:
        handle.remove()
    if error is not None:
        last = probe.findings[-1].where if probe.findings else (tracker.current or "unknown")
        ev.append(Evidence(what=f"training step {done} raised {type(error).__name__}", measured=str(error)[:300],
                           where=last, status=Status.FAIL,
                           detail="The op/module named in 'where' is the last one the probe flagged before the error."))
    placed = placement_problems(state, device_t)
    placed["gradients"] = sorted(set(grads_off))
    plain = placed.pop("plain tensor attributes")
    for what, items in placed.items():
        ev.append(_listing(f"{what} not on {device_t}", items, fail=True))
    ev.append(Evidence(what=f"model inputs not on {device_t}", measured=len(set(inputs_off)), threshold="== 0",
                       where="; ".join(sorted(set(inputs_off))[:4]) or None,
                       status=Status.FAIL if inputs_off else Status.PASS))
    for item in plain[:_MAX_ITEMS]:
        wrong = item.endswith("[wrong device]")
        ev.append(Evidence(what="tensor held as a plain module attribute (not moved by .to())",
                           measured=item.split(" (")[1].split(",")[0], threshold=str(device_t), where=item.split(" (")[0],
                           status=Status.FAIL if wrong else Status.WARN,
                           detail="Register it with self.register_buffer(name, tensor) so model.to(device) moves it."))
    ev.extend(_op_evidence(probe, device_t))
    allowed = set(allow_fallback)
    for op, info in sorted(fallbacks.items()):
        sites = probe.op_sites.get(op, {})
        calls = sum(sites.values())
        places = ", ".join(f"{k} x{v}" for k, v in list(sites.items())[:4]) + (" ..." if len(sites) > 4 else "")
        ev.append(Evidence(what="op falls back to CPU", threshold="none",
                           measured=f"{calls} call(s) in {steps} step(s); {info['count']} warning(s)",
                           where=f"{op} ({info['backend']} backend)" + (f" in {places}" if places else ""),
                           status=Status.PASS if op in allowed else Status.FAIL, detail=info["message"]))
    ev.append(Evidence(what="ops inspected (forward, backward, optimizer)", measured=probe.ops_seen,
                       threshold=None, status=Status.PASS))
    ev.append(Evidence(what="CPU-fallback ops", measured=len(fallbacks), threshold="== 0",
                       where=", ".join(sorted(fallbacks)) or None,
                       status=Status.FAIL if set(fallbacks) - allowed else Status.PASS))
    return CheckResult.from_evidence(NAME, ev, ok=f"{done} steps on {dev}: every tensor and op on {device_t}; "
                                     f"{probe.ops_seen} ops inspected, no CPU fallback", platform=str(dev),
                                     started=started)


def _listing(what: str, items: list[str], *, fail: bool) -> Evidence:
    bad = Status.FAIL if fail else Status.WARN
    shown = "; ".join(items[:4]) + (f"; and {len(items) - 4} more" if len(items) > 4 else "")
    return Evidence(what=what, measured=len(items), threshold="== 0", where=shown or None,
                    status=bad if items else Status.PASS)


_KIND_TEXT = {
    "cpu-input": ("op on the device reads a CPU tensor", Status.FAIL,
                  "Move the tensor to the device once (register_buffer / .to(device) at setup), not per step."),
    "mixed-devices": ("op mixes tensors of several devices", Status.FAIL,
                      "All operands of one op must live on the same device."),
    "cpu-op": ("op runs on CPU inside the model", Status.FAIL,
               "A tensor created without device= stays on CPU; pass device=x.device to the factory call."),
    "h2d-copy": ("host-to-device copy inside forward (every step)", Status.WARN,
                 "Create or move the tensor once at setup (register_buffer), not on every forward."),
}


def _op_evidence(probe: Any, device: Any) -> list[Evidence]:
    out: list[Evidence] = []
    by_kind: dict[str, list[Any]] = {}
    for f in probe.findings:
        by_kind.setdefault(f.kind, []).append(f)
    for kind, items in by_kind.items():
        what, status, fix = _KIND_TEXT[kind]
        for f in items[:_MAX_ITEMS]:
            out.append(Evidence(what=what, measured=f"{f.count}x, devices {', '.join(f.devices)}; CPU shapes {f.shapes}",
                                threshold=f"all on {device}", where=f.where, status=status, detail=fix))
        if len(items) > _MAX_ITEMS:
            out.append(Evidence(what=f"{what} (more)", measured=len(items) - _MAX_ITEMS, where="not listed",
                                status=status))
    return out

