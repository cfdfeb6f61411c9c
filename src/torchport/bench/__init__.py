"""torchport.bench: FP32 vs AMP on the selected device (``torchport bench``) and run comparison.

* :func:`run_bench` + :class:`BenchConfig` -- time each precision over several windows.
* :class:`~torchport.workload.Workload` and ``PRESETS`` (``tiny``, ``small``, ``seed``).
* :mod:`torchport.bench.report` -- seed-style table, JSON, PNG, ``compare``.

The data-pipeline benchmark (``torchport bench data``) lives in ``data_bench``.
Nothing here imports torch until used.
"""

from __future__ import annotations

from torchport._lazy import lazy_exports


_EXPORTS = {
    "BenchConfig": "torchport.bench.amp_bench",
    "BenchReport": "torchport.bench.amp_bench",
    "PrecisionResult": "torchport.bench.amp_bench",
    "run_bench": "torchport.bench.amp_bench",
    "Workload": "torchport.workload",
    "PRESETS": "torchport.workload",
    "compare": "torchport.bench.report",
    "load": "torchport.bench.report",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
