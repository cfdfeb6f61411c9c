"""torchport.tune: knobs declared on backend records, applied by the selected backend only."""

from __future__ import annotations

import pytest
import torch

import torchport
from torchport.backends import cpu, cuda
from torchport.errors import ConfigError
from torchport.runtime.device import Target
from torchport.runtime.tuning import known_knobs


def test_cpu_ignores_every_knob():
    before = torch.backends.cudnn.benchmark
    assert torchport.tune(Target(cpu.SPEC), cudnn_benchmark=not before, jit_compile=False) == {
        "cudnn_benchmark": False, "jit_compile": False}
    assert torch.backends.cudnn.benchmark is before


def test_cuda_record_sets_its_knobs():
    saved = torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32 = False, False
        applied = torchport.tune(Target(cuda.SPEC), cudnn_benchmark=True, matmul_allow_tf32=True, jit_compile=False)
        assert applied == {"cudnn_benchmark": True, "matmul_allow_tf32": True, "jit_compile": False}
        assert torch.backends.cudnn.benchmark is True and torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32 = saved


def test_unknown_knob_is_an_error_listing_the_known_ones():
    with pytest.raises(ConfigError, match="unknown knob.*cudnn_benhcmark.*known: .*cudnn_benchmark"):
        torchport.tune(Target(cpu.SPEC), cudnn_benhcmark=True)
    assert known_knobs()["jit_compile"] == ["npu"]
