"""Environment report behind ``torchport doctor``: backends, versions, visible devices, problems.

Example::

    from torchport.runtime.doctor import collect
    report = collect()
    for p in report["problems"]:
        print(p["problem"], "->", p["fix"])
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import sys
from typing import Any

__all__ = ["collect", "bug_report_block", "connect_error"]


def connect_error(host: str, port: int, timeout: float) -> OSError | None:
    """None when ``host:port`` accepts a TCP connection within ``timeout``, else why not -- the one endpoint probe
    of doctor's sections (the object store's endpoint, a cluster's rendezvous endpoint)."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return exc


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def collect() -> dict[str, Any]:
    """Gather everything ``torchport doctor`` shows, as JSON-ready data.

    Returns:
        ``{"versions" (python, torch, plugins, torchport, plus what backend records add), "platform",
        "backends": [...], "selected", "selection_error",
        "shim_active", "problems": [{"id", "backend", "problem", "fix"}]}``.
    """
    import torch

    from torchport import backends
    from torchport.backends.cpu_precision import ENV, ISA_ENVS   # what the CPU precision policy reads
    from torchport.runtime.device import select_device

    env = dict(os.environ)
    report: dict[str, Any] = {
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "torchvision": _version("torchvision"),
            **{spec.plugin: _version(spec.plugin.replace("_", "-")) or _version(spec.plugin)
               for spec in backends.specs() if spec.plugin},
            "torchport": _version("torchport"),
        },
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "env": {k: env[k] for k in ("TORCHPORT_DEVICE", "TORCHPORT_REQUIRE_ACCELERATOR", "TORCHPORT_EMULATE",
                                    "LOCAL_RANK", "RANK", "WORLD_SIZE", *ENV.values(), *ISA_ENVS) if k in env},
        "backends": [],
        "problems": [],
    }
    shim = False
    for spec in backends.specs():
        try:
            available = bool(spec.probe())
            count = spec.device_count() if available else 0
            facts = dict(spec.doctor_facts() or {})
        except Exception as exc:  # a broken backend must not break the report
            available, count, facts = False, 0, {"error": f"{type(exc).__name__}: {exc}"}
        problems = facts.pop("problems", []) or []
        report["versions"].update(facts.pop("versions", None) or {})   # e.g. a vendor toolkit's version
        for p in problems:
            report["problems"].append({"backend": spec.name, **p})
        shim = shim or bool(spec.shim_active())
        report["backends"].append({
            "name": spec.name,
            "label": spec.label,
            "available": available,
            "devices": count,
            "emulated": spec.emulated,
            "dist_backend": spec.dist_backend,
            "visible_devices_env": spec.visible_devices_env,
            "visible_devices": env.get(spec.visible_devices_env) if spec.visible_devices_env else None,
            "amp_auto": spec.amp.resolve_auto() if available else None,
            "amp_reason": spec.amp.reason() if available else None,   # why auto picks that (the CPU's policy)
            "pin_memory": spec.pin_memory,
            "facts": facts,
        })
    report["shim_active"] = shim
    try:
        target = select_device(warn=False)
        report["selected"] = {"device": str(target.device), "label": str(target), "reason": target.reason,
                              "accelerator": target.is_accelerator}
        report["selection_error"] = None
    except Exception as exc:
        report["selected"] = None
        report["selection_error"] = f"{type(exc).__name__}: {exc}"
        report["problems"].append({"backend": "-", "id": "selection-failed", "problem": str(exc),
                                   "fix": "see the message; `torchport doctor` lists what is available"})
    return report


def bug_report_block(report: dict[str, Any]) -> str:
    """A compact, copy-pasteable text block for bug reports."""
    v = report["versions"]
    lines = [
        "torchport doctor",
        f"- platform: {report['platform']}",
        *(f"- {k}: {val}" for k, val in v.items()),
        f"- selected: {report['selected']['label'] if report['selected'] else report['selection_error']}",
        "- backends: " + ", ".join(f"{b['label']}={'yes' if b['available'] else 'no'}({b['devices']})" for b in report["backends"]),
        *(f"- precision policy ({b['label']}): auto={b['amp_auto']} ({b['amp_reason']})" for b in report["backends"]
          if b.get("amp_reason")),
        f"- shim active: {report['shim_active']}",
        f"- env: {report['env']}",
        f"- problems: {[p['id'] for p in report['problems']] or 'none'}",
    ]
    return "\n".join(lines)
