"""torchport bench --compile: the compiling first step is timed apart (compile_s), never in a window, and printed."""

from __future__ import annotations

import io

from slow_compiler import STALL_S, slow_compiler_cpu  # noqa: F401 - the fixture


def test_bench_compile_is_warm_up_and_reported(slow_compiler_cpu):
    from rich.console import Console

    from torchport.bench.amp_bench import BenchConfig, run_bench
    from torchport.bench.report import print_bench
    from torchport.workload import Workload

    cfg = BenchConfig(workload=Workload(model="tinycnn", batch=4, size=32, num_classes=4), precisions=("fp32",),
                      windows=2, steps_per_window=2, warmup=0, device="cpu", compile=True)
    lines: list[str] = []
    report = run_bench(cfg, progress=lines.append).to_dict()
    res = report["results"]["fp32"]
    assert res["compile_s"] >= STALL_S and res["compile_backend"] == "slow_eager"
    assert max(res["windows_ms"]) < STALL_S * 1000 / 2       # warmup=0, yet no window holds the stall
    assert report["settings"]["compile"] is True
    assert any(ln.startswith("fp32 (fp32): compile: ") for ln in lines)
    buf = io.StringIO()
    print_bench(report, Console(file=buf, width=200))
    assert f"fp32: compile: {res['compile_s']:.2f} s (backend slow_eager; first step, warm-up" in buf.getvalue()


def test_bench_without_compile_has_no_compile_time():
    from torchport.bench.amp_bench import BenchConfig, run_bench
    from torchport.workload import Workload

    cfg = BenchConfig(workload=Workload(model="tinycnn", batch=4, size=32, num_classes=4), precisions=("fp32",),
                      windows=1, steps_per_window=1, warmup=0, device="cpu")
    assert run_bench(cfg).to_dict()["results"]["fp32"]["compile_s"] is None
