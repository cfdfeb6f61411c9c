"""Ascend's apex as ModelZoo scripts call it (issue 37 item 3), on the emulated NPU."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import torch


def test_amp_initialize_keeps_step_a_bound_method_for_schedulers_hooks_and_state_dict(emulated_npu):
    from apex import amp

    model = torch.nn.Linear(4, 2).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O1", loss_scale=128.0, combine_grad=True)
    assert opt.step.__self__ is opt and hasattr(opt.step, "__func__")
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)   # wraps step.__func__
    seen = []
    opt.register_step_pre_hook(lambda o, a, k: seen.append(1))
    before = model.weight.detach().cpu().clone()
    loss = model(torch.ones(3, 4).npu()).float().sum()
    with amp.scale_loss(loss, opt) as scaled:
        scaled.backward()
    opt.step()
    sched.step()
    assert seen == [1] and opt.param_groups[0]["lr"] == 0.05
    assert not torch.equal(before, model.weight.detach().cpu())
    assert "state" in opt.state_dict()


def test_register_functions_and_combine_tensors(emulated_npu):
    import types

    from apex import amp
    from apex.contrib.combine_tensors import combine_npu, is_combined_tensor_valid

    ns = types.SimpleNamespace(f=lambda a, b: (a.dtype, b.dtype), g=lambda a: a.dtype, h=lambda a, b: a.dtype)
    amp.register_half_function(ns, "f")
    amp.register_float_function(ns, "g")
    amp.register_promote_function(ns, "h")
    x16, x32 = torch.ones(2, dtype=torch.float16).npu(), torch.ones(2).npu()
    assert ns.f(x32, torch.ones(1).npu()) == (torch.float16, torch.float16)
    assert ns.g(x16) == torch.float32 and ns.h(x16, x32) == torch.float32
    a, b = torch.tensor([1.0, 2.0]).npu(), torch.tensor([[3.0], [4.0]]).npu()
    flat = combine_npu([a, b])
    assert flat.cpu().tolist() == [1.0, 2.0, 3.0, 4.0] and is_combined_tensor_valid(flat, [a, b])
    flat.mul_(2)                                   # the tensors are views of the buffer
    assert a.cpu().tolist() == [2.0, 4.0] and b.cpu().tolist() == [[6.0], [8.0]]


def test_import_apex_before_torch(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent("""
        from apex import amp
        import apex.optimizers
        import torch
        opt = apex.optimizers.NpuFusedSGD(torch.nn.Linear(2, 2).npu().parameters(), lr=0.1)
        print("ok", type(opt).__name__, callable(amp.initialize))
    """))
    env = dict(os.environ, TORCHPORT_EMULATE="npu", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "ok NpuFusedSGD True" in p.stdout, p.stderr[-2000:]


def test_npu_fused_clip_optimizer_grad_norm_fused(emulated_npu):
    """Ascend apex's NpuFusedOptimizerBase name (ModelZoo's ResNet1001 calls it): clips and returns the norm."""
    import apex

    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]).npu())
    opt = apex.optimizers.NpuFusedSGD([w], lr=0.1)
    w.grad = torch.tensor([3.0, 4.0]).npu()
    norm = opt.clip_optimizer_grad_norm_fused(1.0)
    assert abs(float(norm) - 5.0) < 1e-6                                  # the norm before clipping
    assert torch.allclose(w.grad.cpu(), torch.tensor([0.6, 0.8]), atol=1e-6)
    assert [m.tolist() for m in opt.get_optimizer_combined_grad_masks()] == [[1.0, 1.0]]
