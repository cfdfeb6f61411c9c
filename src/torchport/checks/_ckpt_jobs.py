"""Platforms and the save / load jobs of the checkpoint-portability check.

A job runs either in this process (platforms available here) or in a fresh worker process
(``python -m torchport.checks._ckpt_worker``) whose environment has only the destination
platform: see :meth:`Platform.env`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from torchport.checks.checkpoint import _AMP, _error_line, _flat, fingerprints, inspect_checkpoint, save_state

__all__ = ["Platform", "platforms", "run_save", "run_load", "run_worker_job"]


# ----------------------------------------------------------------------------- platforms

@dataclasses.dataclass(frozen=True)
class Platform:
    """A place to save or load: a backend name, whether it is emulated, whether this process has it."""

    name: str
    label: str
    emulated: bool
    local: bool
    devices: int = 1  #: emulated platforms: cards to emulate (same as here, so per-device RNG states fit)

    def env(self) -> dict[str, str]:
        """Environment for a fresh process that has this platform and no other accelerator."""
        from torchport import backends
        from torchport.emulate import ENV_VAR

        env = dict(os.environ)
        env.pop(ENV_VAR, None)
        env["TORCHPORT_DEVICE"] = self.name
        for spec in backends.specs():
            if spec.is_accelerator and spec.name != self.name and spec.visible_devices_env:
                env[spec.visible_devices_env] = ""  # hide the other accelerators
        if not self.emulated:
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # no out-of-tree backend plugin autoloaded
        return env  # an emulated platform is installed by the worker itself (install_worker_platform)

    def install(self) -> None:
        """In a worker process: install the emulator when this platform is emulated (after ``import torch``)."""
        if self.emulated:
            import torch  # noqa: F401  (torch first: installing during torch's own import can deadlock)

            from torchport.emulate import install

            install(self.devices)

    def target(self) -> Any:
        """A torchport ``Target`` for this platform (device index 0) without changing the selection."""
        from torchport import backends
        from torchport.runtime.device import Target

        return Target(backend=backends.get(self.name), index=0, reason="argument")


def _emulated_device_name() -> str | None:
    """The device type the emulator provides (its public ``DEVICE`` constant when it has one)."""
    import importlib

    emulate = importlib.import_module("torchport.emulate")
    name = getattr(emulate, "DEVICE", None)
    if name is None:
        try:
            name = getattr(importlib.import_module("torchport.emulate._backend"), "_NAME", None)
        except Exception:
            name = None
    return name


def platforms(*, include_emulated: bool = True) -> list[Platform]:
    """Every backend available here, plus the emulated NPU (as a subprocess platform) when not installed."""
    import importlib.util

    from torchport import backends

    out = [Platform(s.name, s.label, s.emulated, True, max(1, s.device_count())) for s in backends.specs() if s.probe()]
    if include_emulated and importlib.util.find_spec("torchport.emulate") is not None:
        emulated_name = _emulated_device_name()
        if emulated_name and not any(p.name == emulated_name for p in out):
            out.append(Platform(emulated_name, f"{emulated_name} (emulated)", True, False))
    return sorted(out, key=lambda p: (p.name != "cpu", p.name))


# ----------------------------------------------------------------------------- jobs (run here or in a worker)

def _model_hash(state: Any) -> str:
    fp: dict[str, str] = {}
    _flat("", state.model.state_dict(), fp)
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:12]


def run_save(target: Any, platform: Platform, workdir: str | Path, *, steps: int, resume_steps: int) -> dict[str, Any]:
    """Train ``steps`` on ``platform``, fingerprint, save, continue ``resume_steps`` (the reference continuation)."""
    from torchport.checks.target import LoaderSpec, build_state, detach_batch, iter_batches, train_step
    from torchport.runtime.seed import seed_everything

    dev = platform.target()
    seed_everything(target.seed)
    state = build_state(target, dev, scaler=None if target.build_scaler is not None else True, amp_kwargs=dict(_AMP))
    batches = [detach_batch(b) for b in iter_batches(target, LoaderSpec(seed=target.seed, batch_size=target.batch_size),
                                                     steps + resume_steps)]
    for b in batches[:steps]:
        train_step(state, b)
    fp = fingerprints(state)
    path = Path(workdir) / f"ckpt-{platform.name}.pt"
    (target.save_checkpoint or save_state)(str(path), state)
    cont = [train_step(state, b).loss for b in batches[steps:]]
    return {"platform": platform.label, "name": platform.name, "path": str(path), "fingerprints": fp,
            "continuation": cont, "final": _model_hash(state), "device": str(dev)}


def run_load(target: Any, platform: Platform, saved: list[dict[str, Any]], *, steps: int,
             resume_steps: int) -> list[dict[str, Any]]:
    """In a fresh process on ``platform``: inspect, load and resume every checkpoint in ``saved``."""
    from torchport import backends
    from torchport.checks.target import LoaderSpec, build_state, detach_batch, iter_batches, train_step
    from torchport.runtime.seed import seed_everything


    here = [spec.name for spec in backends.specs() if spec.probe()]
    results = []
    for s in saved:
        res: dict[str, Any] = {"from": s["platform"], "to": platform.label, "inspection": inspect_checkpoint(s["path"]),
                               "backends_here": here}
        results.append(res)
        if target is None:
            res["load_error"] = "skipped: the target has no import spec, so a fresh process cannot rebuild it"
            continue
        seed_everything(target.seed + 1)  # a fresh run differs everywhere a resume must restore state
        dev = platform.target()
        state = build_state(target, dev, scaler=None if target.build_scaler is not None else True,
                            amp_kwargs=dict(_AMP))
        batches = [detach_batch(b) for b in iter_batches(target, LoaderSpec(seed=target.seed,
                                                                             batch_size=target.batch_size),
                                                         steps + resume_steps)][steps:]
        try:
            (target.load_checkpoint or _load_state())(s["path"], state)
        except Exception as exc:
            res["load_error"] = _error_line(exc)
            continue
        res["load_error"] = None
        res["fingerprints"] = fingerprints(state)
        res["continuation"] = [train_step(state, b).loss for b in batches]
        res["final"] = _model_hash(state)
    return results


def run_worker_job(job: dict[str, Any], platform: Platform, timeout: float) -> tuple[Any, str | None]:
    """Run ``job`` in ``python -m torchport.checks._ckpt_worker`` on ``platform``; ``(result, error)``."""
    with tempfile.TemporaryDirectory(prefix="torchport-ckpt-job-") as tmp:
        jf, of = Path(tmp) / "job.json", Path(tmp) / "out.json"
        jf.write_text(json.dumps(job))
        try:
            proc = subprocess.run([sys.executable, "-m", "torchport.checks._ckpt_worker", str(jf), str(of)],
                                  env=platform.env(), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"worker on {platform.label} did not finish within {timeout:.0f}s"
        if proc.returncode != 0 or not of.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return None, f"worker on {platform.label} exited {proc.returncode}: {' | '.join(tail)}"
        return json.loads(of.read_text()), None




def _load_state():
    from torchport.checks.checkpoint import load_state

    return load_state
