"""``torchport bench data`` hook: the input-pipeline benchmark lives in :mod:`torchport.data.bench`.

The bench CLI attaches it with ``register_bench_data(bench_app)``.
"""

from __future__ import annotations

from torchport.data.bench import BenchConfig, register_bench_data, run_bench

__all__ = ["BenchConfig", "register_bench_data", "run_bench"]
