"""Chrome-trace export with the profiler that fits the backend.

* A vendor profiler, when the device module comes from a vendor package that ships
  one (the Ascend adapter's ``profiler`` module on Ascend): found by following
  ``target.module`` to its top-level package, never by naming a device.
* Otherwise ``torch.profiler`` with CPU activity plus the device's activity when
  ``torch.profiler.ProfilerActivity`` has one named like the device type (upper case).

Example::

    from torchport.profile.trace import chrome_trace
    with chrome_trace("traces/") as tracer:
        for _ in range(3):
            train_step()
            tracer.step()
    print(tracer.files)      # ['traces/trace.json'] -- open in chrome://tracing or ui.perfetto.dev
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
from typing import Any, Iterator

__all__ = ["Tracer", "chrome_trace", "profiler_plan"]


def _vendor_profiler(target: Any):
    """The vendor package's ``profiler`` module for this device, or None."""
    if getattr(target.backend, "emulated", False) or not target.is_accelerator:
        return None
    mod = target.module
    root = (getattr(mod, "__name__", "") or "").split(".", 1)[0]
    if not root or root in ("torch", "torchport"):
        return None
    name = f"{root}.profiler"
    try:
        if importlib.util.find_spec(name) is None:
            return None
        prof = importlib.import_module(name)
    except Exception:
        return None
    if all(hasattr(prof, a) for a in ("profile", "ProfilerActivity", "tensorboard_trace_handler")):
        return prof
    return None


def profiler_plan(target: Any = None) -> dict[str, Any]:
    """Which profiler and activities a trace on ``target`` uses (also shown by ``torchport profile``).

    Returns:
        ``{"profiler": "torch.profiler" | "<vendor>.profiler", "activities": [...names]}``.
    """
    import torch

    if target is None:
        from torchport.runtime.device import current

        target = current()
    vendor = _vendor_profiler(target)
    if vendor is not None:
        acts = ["CPU"] + ([target.type.upper()] if hasattr(vendor.ProfilerActivity, target.type.upper()) else [])
        return {"profiler": vendor.__name__, "activities": acts}
    acts = ["CPU"]
    if target.is_accelerator and hasattr(torch.profiler.ProfilerActivity, target.type.upper()):
        acts.append(target.type.upper())
    return {"profiler": "torch.profiler", "activities": acts}


class Tracer:
    """Handle yielded by :func:`chrome_trace`: call :meth:`step` after each step; ``files`` after exit."""

    def __init__(self, prof: Any, trace_dir: str, plan: dict[str, Any]) -> None:
        self._prof = prof
        self.trace_dir = trace_dir
        self.plan = plan
        self.files: list[str] = []

    def step(self) -> None:
        """Mark a step boundary in the trace."""
        self._prof.step()


@contextlib.contextmanager
def chrome_trace(trace_dir: str, target: Any = None, *, record_shapes: bool = False) -> Iterator[Tracer]:
    """Profile the block and write a Chrome trace into ``trace_dir``.

    Args:
        trace_dir: output folder (created).
        target: device target; default the current one.
        record_shapes: record operator input shapes (bigger trace).

    Yields:
        A :class:`Tracer`; its ``files`` list the written trace files after the block.
    """
    import torch

    if target is None:
        from torchport.runtime.device import current

        target = current()
    os.makedirs(trace_dir, exist_ok=True)
    plan = profiler_plan(target)
    vendor = _vendor_profiler(target)
    before = set(_walk(trace_dir))
    if vendor is not None:
        acts = [getattr(vendor.ProfilerActivity, a) for a in plan["activities"]]
        prof = vendor.profile(activities=acts, record_shapes=record_shapes,
                              on_trace_ready=vendor.tensorboard_trace_handler(trace_dir))
        tracer = Tracer(prof, trace_dir, plan)
        with prof:
            yield tracer
    else:
        acts = [getattr(torch.profiler.ProfilerActivity, a) for a in plan["activities"]]
        prof = torch.profiler.profile(activities=acts, record_shapes=record_shapes)
        tracer = Tracer(prof, trace_dir, plan)
        with prof:
            yield tracer
        prof.export_chrome_trace(os.path.join(trace_dir, "trace.json"))
    tracer.files = sorted(set(_walk(trace_dir)) - before) or sorted(_walk(trace_dir))


def _walk(root: str) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
