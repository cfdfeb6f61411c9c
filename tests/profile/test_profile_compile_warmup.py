"""torchport profile --compile: the compiling first step runs before the warm-up, timed apart, and is reported;
no profiled step holds it."""

from __future__ import annotations

import dataclasses
import io
import time

import pytest

STALL_S = 1.0


def slow_eager(gm, example_inputs):
    time.sleep(STALL_S)
    return gm.forward


@pytest.fixture
def slow_compiler_cpu():
    from torchport import backends
    from torchport.runtime import device as runtime_device

    spec = backends.get("cpu")
    backends.register(dataclasses.replace(spec, compile_backend=slow_eager), replace=True)
    runtime_device.reset_selection()
    yield
    backends.register(spec, replace=True)
    runtime_device.reset_selection()


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
