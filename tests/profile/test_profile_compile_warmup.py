"""torchport profile --compile: the compiling first step runs before the warm-up, timed apart, and is reported;
no profiled step holds it."""

from __future__ import annotations

import io

from slow_compiler import STALL_S, slow_compiler_cpu  # noqa: F401 - the fixture


def test_profile_compile_is_warm_up_and_reported(slow_compiler_cpu):
    from rich.console import Console

    from torchport.profile.loop import ProfileConfig, run_profile
    from torchport.profile.report import print_profile
    from torchport.workload import Workload

    cfg = ProfileConfig(workload=Workload(model="tinycnn", batch=4, size=32, num_classes=4), steps=2, warmup=0,
                        free_steps=0, device="cpu", compile=True)
    result = run_profile(cfg)
    assert result.settings["compile_s"] >= STALL_S and result.settings["compile_backend"] == "slow_eager"
    assert max(s.total_s for s in result.steps) < STALL_S / 2   # warmup=0, yet no profiled step holds the stall
    assert result.to_dict()["settings"]["compile_s"] == result.settings["compile_s"]
    buf = io.StringIO()
    print_profile(result, Console(file=buf, width=200))
    assert f"compile: {result.settings['compile_s']:.2f} s (backend slow_eager; first step" in buf.getvalue()
