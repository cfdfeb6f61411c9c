"""torchport.profile: where a training step's time goes, and what to do about the dominant term.

* :class:`StepProfiler` -- wrap your own loop (``prof.iterate(loader)``, ``prof.phase("forward")``).
* :func:`profile_loop` -- profile a model / loader / optimizer you already built.
* :func:`run_profile` + :class:`ProfileConfig` -- the ``torchport profile`` setup from a config.
* :func:`analyze` -- dominant term, verdict and advice from phase times.
* :func:`chrome_trace` -- a Chrome trace with the backend's profiler.

Nothing here imports torch until used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "StepProfiler": "torchport.profile.profiler",
    "StepRecord": "torchport.profile.profiler",
    "ProfileResult": "torchport.profile.profiler",
    "sync_cost": "torchport.profile.profiler",
    "PHASES": "torchport.profile.analysis",
    "Analysis": "torchport.profile.analysis",
    "analyze": "torchport.profile.analysis",
    "ProfileConfig": "torchport.profile.loop",
    "profile_loop": "torchport.profile.loop",
    "run_profile": "torchport.profile.loop",
    "chrome_trace": "torchport.profile.trace",
    "print_profile": "torchport.profile.report",
    "write_json": "torchport.profile.report",
    "write_png": "torchport.profile.report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'torchport.profile' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
