"""torchport.profile: where a training step's time goes, and what to do about the dominant term.

* :class:`StepProfiler` -- wrap your own loop (``prof.iterate(loader)``, ``prof.phase("forward")``).
* :func:`profile_loop` -- profile a model / loader / optimizer you already built.
* :func:`run_profile` + :class:`ProfileConfig` -- the ``torchport profile`` setup from a config.
* :func:`analyze` -- dominant term, verdict and advice from phase times.
* :func:`chrome_trace` -- a Chrome trace with the backend's profiler.

Nothing here imports torch until used.
"""

from __future__ import annotations

from torchport._lazy import lazy_exports


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

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
