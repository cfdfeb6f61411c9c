"""torchport.bench: FP32 vs AMP on the selected device (``torchport bench``) and run comparison.

* :func:`run_bench` + :class:`BenchConfig` -- time each precision over several windows.
* :class:`~torchport.bench.workload.Workload` and ``PRESETS`` (``tiny``, ``small``, ``seed``).
* :mod:`torchport.bench.report` -- seed-style table, JSON, PNG, ``compare``.

The data-pipeline benchmark (``torchport bench data``) lives in ``data_bench``.
Nothing here imports torch until used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BenchConfig": "torchport.bench.amp_bench",
    "BenchReport": "torchport.bench.amp_bench",
    "PrecisionResult": "torchport.bench.amp_bench",
    "run_bench": "torchport.bench.amp_bench",
    "Workload": "torchport.bench.workload",
    "PRESETS": "torchport.bench.workload",
    "compare": "torchport.bench.report",
    "load": "torchport.bench.report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'torchport.bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
