"""benchmarks/tf32_vs_gpu.py (gpu_suite.sh step "tf32") checks itself: run here against a simulated GPU.

The "GPU" is the CPU; its TF32 is simulated by the emulation in one rounding (rz). The script must name that
rounding as the best match at 0 ulp, and must fail when the "GPU" does not round at all (TF32 not engaged).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from torchport.emulate import cuda_numerics

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tf32_vs_gpu.py"


def _load():
    spec = importlib.util.spec_from_file_location("tf32_vs_gpu", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _simulate_gpu(monkeypatch, mod, rounding):
    on_device: set = set()

    def to_device(self):
        t = self.clone()
        on_device.add(id(t))
        return t

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "simulated")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    monkeypatch.setattr(torch.Tensor, "cuda", to_device)
    real_ops = mod._ops

    def ops(g):
        out = {}
        for name, (fn, operands, family) in real_ops(g).items():
            def wrapped(*args, _fn=fn):
                if rounding and id(args[0]) in on_device and torch.backends.cudnn.allow_tf32:
                    with cuda_numerics(rounding):
                        return _fn(*args)
                return _fn(*args)
            out[name] = (wrapped, operands, family)
        return out

    monkeypatch.setattr(mod, "_ops", ops)


def test_the_matching_rounding_is_found_at_zero_ulp(monkeypatch, tmp_path, capsys):
    mod = _load()
    _simulate_gpu(monkeypatch, mod, "rz")
    assert mod.main(["--json", str(tmp_path / "t.json")]) == 0
    import json

    table = json.loads((tmp_path / "t.json").read_text())["ops"]
    assert set(table) == {"mm", "bmm", "addmm", "conv2d", "conv2d_grad_input", "conv2d_grad_weight"}
    for row in table.values():
        assert row["best"] == "rz" and row["cpu_rz"]["max"] == 0
        assert row["cpu_fp32"]["median"] > 0 and row["cpu_rne"]["median"] > 0   # the others are told apart
    assert "ulp distance to the GPU's TF32" in capsys.readouterr().out


def test_fails_when_tf32_does_not_engage(monkeypatch, capsys):
    mod = _load()
    _simulate_gpu(monkeypatch, mod, None)
    assert mod.main([]) == 1
    assert "TF32 did not engage" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["matmul", "cudnn"])
def test_flags_restored(monkeypatch, flag):
    mod = _load()
    _simulate_gpu(monkeypatch, mod, "rne")
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    mod.main([])
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
