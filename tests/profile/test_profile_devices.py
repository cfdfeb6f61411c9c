"""profile_loop on every available device (cpu, emulated npu, cuda when present)."""

from __future__ import annotations

import pytest

from torchport.workload import Workload, build_model, make_loader
from torchport.profile import profile_loop


def test_profile_loop_on_each_device(portable_device):
    import torch

    import torchport

    target = portable_device
    wl = Workload(model="tinycnn", batch=8, size=32, num_classes=10)
    loader, classes = make_loader(wl, target)
    model = build_model(wl, num_classes=classes).to(target.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    amp = torchport.Amp("auto", target)
    res = profile_loop(model, loader, opt, torch.nn.CrossEntropyLoss(), steps=3, warmup=1, amp=amp,
                       target=target, free_steps=1)
    assert res.device == str(target) and len(res.steps) == 3 and res.warmup_steps == 1
    assert res.precision == amp.precision
    assert set(res.phase_s) >= {"data", "copy", "forward", "backward", "optimizer"}
    assert sum(res.phase_s.values()) == pytest.approx(res.step_s, rel=1e-9)
    assert res.unprofiled_step_s > 0 and res.sync_cost_s is not None
    assert res.analysis.verdict in ("input-bound", "compute-bound", "copy-bound", "overhead-bound")
    assert target.backend.label in res.analysis.warning
    if target.is_accelerator:  # host -> device copies are real work there
        assert res.phase_s["copy"] > 0
