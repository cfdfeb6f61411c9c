"""Check 5, checkpoint portability: save on platform A, resume on B, for every pair.

Platforms: every backend available here plus the emulated NPU (run in a subprocess with
``TORCHPORT_EMULATE=npu`` when it is not installed in this process). For each A:

1. train ``steps`` steps on A, fingerprint model / optimizer / scaler / scheduler / RNG,
   save with the target's ``save_checkpoint`` (default :func:`save_state`), then continue
   ``resume_steps`` steps: the reference continuation.
2. for each B, in a **fresh process that does not have A's backend** (no emulator, other
   accelerators hidden through their visible-devices variable): inspect where every
   stored tensor says it lives (storage location tags), try a plain
   ``torch.load(weights_only=True)``, load with the target's ``load_checkpoint`` (default
   :func:`load_state`), compare the restored components with A's fingerprints, continue
   ``resume_steps`` steps.

Verdicts: device-tagged tensors in the file fail (the file then needs the source backend or
a ``map_location``); a file ``weights_only=True`` refuses fails; any component not restored
fails, by name; the continuation must be bit-identical when A and B are the same platform.

The check runs with a loss scaler even for fp32 targets, so the scaler's state round trip
is always exercised.

Example::

    from torchport.checks import checkpoint_portability
    r = checkpoint_portability()           # cpu <-> npu (emulated) [<-> gpu]
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from torchport.checks.result import CheckResult, Evidence, Status

__all__ = ["checkpoint_portability", "save_state", "load_state", "fingerprints", "inspect_checkpoint"]

NAME = "checkpoint"
_AMP = {"init_scale": 2.0 ** 10, "growth_interval": 2}  # the scale changes within the saved steps


# ----------------------------------------------------------------------------- default save / load

def save_state(path: str | Path, state: Any) -> None:
    """Default ``save_checkpoint``: :mod:`torchport.runtime.checkpoint` capture + atomic save (CPU tensors)."""
    from torchport.runtime import checkpoint as ckpt

    ckpt.save(ckpt.capture(model=state.model, optimizer=state.optimizer, amp=state.amp, scheduler=state.scheduler,
                           progress={"step": state.step}), path)


def _error_line(exc: BaseException, limit: int = 400) -> str:
    """``Type: the informative line`` of an exception (torch.load's weights_only errors bury it)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    lines = [ln for ln in lines if "weights_only" not in ln or "Unsupported global" in ln] or lines[:0]
    key = next((ln for ln in lines if "Unsupported global" in ln or "WeightsUnpickler error" in ln), None)
    line = key or (lines[0] if lines else "")
    line = line.split(" Re-running `torch.load`")[0]      # never torch's advice to load it with weights_only=False
    return f"{type(exc).__name__}: {line}"[:limit]


def load_state(path: str | Path, state: Any) -> None:
    """Default ``load_checkpoint``: ``weights_only=True`` onto CPU, then restore in place."""
    from torchport.runtime import checkpoint as ckpt

    progress = ckpt.restore(ckpt.load(path), model=state.model, optimizer=state.optimizer, amp=state.amp,
                            scheduler=state.scheduler)
    state.step = int(progress.get("step", state.step))


# ----------------------------------------------------------------------------- fingerprints

def _h(t: Any) -> str:
    import torch

    t = t.detach().cpu().contiguous()
    data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return hashlib.sha256(f"{tuple(t.shape)}{t.dtype}".encode() + data).hexdigest()[:12]


def _flat(prefix: str, obj: Any, out: dict[str, str]) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        out[prefix] = _h(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _flat(f"{prefix}[{i}]", v, out)
    else:
        out[prefix] = repr(obj)


def fingerprints(state: Any) -> dict[str, dict[str, str]]:
    """Hashes of everything a resume must restore: ``{"model", "optimizer", "scaler", "scheduler", "rng"}``."""
    import numpy as np
    import torch

    fp: dict[str, dict[str, str]] = {k: {} for k in ("model", "optimizer", "scaler", "scheduler", "rng")}
    _flat("", state.model.state_dict(), fp["model"])
    _flat("", state.optimizer.state_dict(), fp["optimizer"])
    _flat("", state.amp.state_dict() if state.amp.scaler is not None else {}, fp["scaler"])
    if state.scheduler is not None:
        _flat("", state.scheduler.state_dict(), fp["scheduler"])
    fp["rng"]["torch"] = _h(torch.get_rng_state())
    fp["rng"]["python"] = hashlib.sha256(repr(random.getstate()).encode()).hexdigest()[:12]
    fp["rng"]["numpy"] = hashlib.sha256(repr(np.random.get_state()[1].tolist()).encode()).hexdigest()[:12]
    dev = state.device
    if dev.is_accelerator and dev.module is not None:
        fp["rng"][f"device:{dev.type}"] = _h(dev.module.get_rng_state())
    return fp


def _diff_fingerprints(saved: dict[str, dict[str, str]], restored: dict[str, dict[str, str]],
                       same_platform: bool) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for comp, keys in saved.items():
        got = restored.get(comp, {})
        bad = []
        for k, v in keys.items():
            if k.startswith("device:") and not same_platform:
                continue  # another device type's RNG cannot be restored there
            if got.get(k) != v:
                bad.append(f"{k} ({got.get(k, 'missing')} vs saved {v})" if len(v) < 40 else k)
        if bad:
            out[comp] = bad
    return out


def inspect_checkpoint(path: str | Path) -> dict[str, Any]:
    """Where each stored tensor says it lives, without needing that device.

    Returns:
        ``{"weights_only": "ok" | error, "locations": {location: count}, "device_tensors": [key (loc)],
        "tensors": n, "plain_load": "ok" | error}``; ``plain_load`` is ``torch.load(path,
        weights_only=True)`` without ``map_location``, which fails here when the file holds tensors of
        a device this process does not have.
    """
    import torch

    locs: dict[int, str] = {}

    def record(storage: Any, location: str) -> Any:
        locs[storage.data_ptr()] = location
        return storage

    out: dict[str, Any] = {"locations": {}, "device_tensors": [], "tensors": 0}
    try:
        obj = torch.load(path, map_location=record, weights_only=True)
        out["weights_only"] = "ok"
    except Exception as exc:
        out["weights_only"] = _error_line(exc)
        obj = None
    flat: list[tuple[str, Any]] = []

    def walk(prefix: str, o: Any) -> None:
        if isinstance(o, torch.Tensor):
            flat.append((prefix, o))
        elif isinstance(o, dict):
            for k, v in o.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(o, (list, tuple)):
            for i, v in enumerate(o):
                walk(f"{prefix}[{i}]", v)

    walk("", obj)
    out["tensors"] = len(flat)
    for key, t in flat:
        loc = locs.get(t.untyped_storage().data_ptr(), "cpu") if t.numel() else "cpu"
        out["locations"][loc] = out["locations"].get(loc, 0) + 1
        if loc != "cpu":
            out["device_tensors"].append(f"{key} ({loc})")
    try:
        torch.load(path, weights_only=True)
        out["plain_load"] = "ok"
    except Exception as exc:
        out["plain_load"] = _error_line(exc, 300)
    return out


# ----------------------------------------------------------------------------- the check

def checkpoint_portability(target: Any = None, *, steps: int = 2, resume_steps: int = 2,
                           include_emulated: bool = True, timeout: float = 180.0,
                           workdir: str | Path | None = None, sources: list[str] | None = None,
                           destinations: list[str] | None = None) -> CheckResult:
    """Save on every platform, load and resume on every platform (see module docstring).

    Args:
        target: :class:`~torchport.checks.target.CheckTarget`, spec string or None. Targets
            without an import spec (built in memory) can only be inspected in the fresh process.
        steps: steps trained before saving.
        resume_steps: steps continued after saving (A) and after loading (B).
        include_emulated: add the emulated NPU when it is not installed in this process.
        timeout: seconds per worker process before it is reported as hung.
        workdir: keep the checkpoints here (default: a temporary folder).
        sources, destinations: restrict the pairs to these backend names (default: all platforms).

    Returns:
        A :class:`~torchport.checks.result.CheckResult` named ``checkpoint``.
    """
    from torchport.checks._ckpt_jobs import platforms, run_save, run_worker_job
    from torchport.checks.target import load_target

    started = time.perf_counter()
    target = load_target(target)
    plats = platforms(include_emulated=include_emulated)
    tmp = None if workdir is not None else tempfile.TemporaryDirectory(prefix="torchport-ckpt-")
    wd = Path(workdir or tmp.name)
    wd.mkdir(parents=True, exist_ok=True)
    ev: list[Evidence] = [Evidence(what="platforms", measured=", ".join(p.label for p in plats), status=Status.PASS)]
    base_job = {"target": target.spec, "sys_path": [p for p in sys.path if p and os.path.isdir(p)],
                "steps": steps, "resume_steps": resume_steps}
    try:
        saved: list[dict[str, Any]] = []
        for a in plats:
            if sources is not None and a.name not in sources:
                continue
            if a.local:
                saved.append(run_save(target, a, wd, steps=steps, resume_steps=resume_steps))
                continue
            if not target.spec:
                ev.append(Evidence(what=f"save on {a.label}", measured="skipped", status=Status.SKIP,
                                   detail="needs a fresh process and the target has no import spec (--target pkg.mod:fn)"))
                continue
            out, err = run_worker_job({**base_job, "mode": "save", "workdir": str(wd),
                                        "platform": dataclasses.asdict(a)}, a, timeout)
            if err:
                ev.append(Evidence(what=f"save on {a.label}", measured="failed", where=a.label, status=Status.FAIL,
                                   detail=err))
            else:
                saved.append(out)
        for b in plats:
            if destinations is not None and b.name not in destinations:
                continue
            job = {**base_job, "mode": "load", "saved": saved, "platform": dataclasses.asdict(b)}
            job["target"] = target.spec
            out, err = run_worker_job(job, b, timeout)
            if err:
                ev.append(Evidence(what=f"fresh process on {b.label}", measured="failed", where=b.label,
                                   status=Status.FAIL, detail=err))
                continue
            for s, res in zip(saved, out):
                ev += _pair_evidence(s, res, same=(s["name"] == b.name))
    finally:
        if tmp is not None:
            tmp.cleanup()
    ev = _dedupe_inspections(ev)
    return CheckResult.from_evidence(NAME, ev, ok=f"{len(plats)}x{len(plats)} save/load pairs resume "
                                     f"({', '.join(p.label for p in plats)}); same-platform resume bit-identical",
                                     started=started)


def _pair_evidence(saved: dict[str, Any], res: dict[str, Any], *, same: bool) -> list[Evidence]:
    pair = f"{saved['platform']} -> {res['to']}"
    ins = res["inspection"]
    ev = []
    if not same and saved["name"] != "cpu":
        here = res.get("backends_here", [])
        ev.append(Evidence(what="loading process lacks the source backend", measured=f"backends there: {', '.join(here)}",
                           threshold=f"no {saved['name']}", where=pair,
                           status=Status.WARN if saved["name"] in here else Status.PASS,
                           detail="The source backend was importable in the fresh process, so the load did not prove "
                           "the file is independent of it." if saved["name"] in here else None))
    ok_wo = ins.get("weights_only") == "ok"
    ev.append(Evidence(what="loads with weights_only=True", measured=ins.get("weights_only"), threshold="ok",
                       where=pair, status=Status.PASS if ok_wo else Status.FAIL,
                       detail=None if ok_wo else "The file pickles objects beyond tensors and plain data; save "
                       "state_dicts and plain values only."))
    dev_t = ins.get("device_tensors", [])
    ev.append(Evidence(what=f"tensors stored with a device location (saved on {saved['platform']})",
                       measured=f"{len(dev_t)} of {ins.get('tensors', 0)}", threshold="0 (all cpu)",
                       where="; ".join(dev_t[:4]) + (f"; and {len(dev_t) - 4} more" if len(dev_t) > 4 else "") or None,
                       status=Status.FAIL if dev_t else Status.PASS,
                       detail=(f"plain torch.load(weights_only=True) on {res['to']}: {ins.get('plain_load')}. "
                               "Move tensors to CPU before saving (torchport.runtime.checkpoint.save does).")
                       if dev_t else None))
    if res.get("load_error"):
        ev.append(Evidence(what="checkpoint loads into a fresh run", measured=res["load_error"], where=pair,
                           status=Status.SKIP if str(res["load_error"]).startswith("skipped") else Status.FAIL))
        return ev
    diff = _diff_fingerprints(saved["fingerprints"], res["fingerprints"], same_platform=same)
    for comp in ("model", "optimizer", "scaler", "scheduler", "rng"):
        bad = diff.get(comp, [])
        missing = not res["fingerprints"].get(comp) and saved["fingerprints"].get(comp)
        ev.append(Evidence(what=f"{comp} state restored", measured="restored" if not bad else
                           f"{len(bad)} of {len(saved['fingerprints'].get(comp, {}))} entries differ",
                           threshold="identical to the saved state", where=f"{pair}: " + "; ".join(bad[:3]) if bad else pair,
                           status=Status.FAIL if bad else Status.PASS,
                           detail=(f"The resumed run does not get the saved {comp} state"
                                   + (" (absent from the checkpoint?)" if missing or comp == "scaler" else "")
                                   + "; include it in save_checkpoint and restore it in load_checkpoint.") if bad else None))
    a, b = saved["continuation"], res["continuation"]
    if same:
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        identical = first is None and saved["final"] == res["final"]
        ev.append(Evidence(what=f"resume continues bit-identically ({len(b)} steps)",
                           measured="identical" if identical else (f"loss differs from step {first}: {a[first]!r} vs {b[first]!r}"
                                                                  if first is not None else "weights differ after resuming"),
                           threshold="bit-identical on the same platform", where=pair,
                           status=Status.PASS if identical else Status.FAIL))
    else:
        delta = max((abs(x - y) for x, y in zip(a, b)), default=0.0)
        finite = all(v == v and abs(v) != float("inf") for v in b)
        ev.append(Evidence(what=f"resume across platforms ({len(b)} steps)", measured=f"max |dloss| {delta:.3g}",
                           threshold="finite (RNG streams differ across device types)", where=pair,
                           status=Status.PASS if finite else Status.FAIL))
    return ev


def _dedupe_inspections(ev: list[Evidence]) -> list[Evidence]:
    """The device-location finding is a property of the file: keep one per source platform."""
    seen: set[str] = set()
    out = []
    for e in ev:
        if e.what.startswith("tensors stored with a device location"):
            if e.what in seen:
                continue
            seen.add(e.what)
        out.append(e)
    return out
