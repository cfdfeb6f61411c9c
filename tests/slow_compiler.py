"""A ``torch.compile`` backend that is torch's eager behind a deliberate stall standing for compile time, and a
fixture that makes it the CPU backend's compiler: throughput or a profile that counted the compile would be
visibly off (bench, profile and the trainer's compile warm-up tests)."""

from __future__ import annotations

import dataclasses
import time

import pytest

STALL_S = 1.5


@pytest.fixture
def slow_compiler_cpu():
    """A fresh backend per test (Dynamo caches compiled code per backend: a shared one would compile once)."""
    import torch

    from torchport import backends
    from torchport.runtime import device as runtime_device

    def slow_eager(gm, example_inputs):
        """A torch.compile backend: eager, after a stall that stands for compile time."""
        time.sleep(STALL_S)
        return gm.forward

    torch._dynamo.reset()
    spec = backends.get("cpu")
    backends.register(dataclasses.replace(spec, compile_backend=slow_eager), replace=True)
    runtime_device.reset_selection()
    yield
    backends.register(spec, replace=True)
    runtime_device.reset_selection()
