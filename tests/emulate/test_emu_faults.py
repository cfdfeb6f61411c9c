"""Fault injection: unsupported-op CPU fallback, fp16 overflow modes, numeric perturbation."""

from __future__ import annotations

import warnings

import pytest
import torch

import torchport.emulate as emulate


@pytest.mark.emulated_npu(fallback_ops=["aten.nonzero"])
def test_fallback_op_warns_like_torch_npu_once(emulated_npu):
    x = torch.tensor([0.0, 1.0, 2.0], device="npu")
    with pytest.warns(UserWarning, match=r"CAUTION: The operator 'aten::nonzero' is not currently supported on the "
                                         r"NPU backend and will fall back to run on the CPU"):
        idx = torch.nonzero(x)
    assert idx.device.type == "npu" and idx.cpu().flatten().tolist() == [1, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.nonzero(x)  # warned once, like TORCH_WARN_ONCE
        x + 1  # other ops never warn
    assert emulate.fallback_stats() == {"aten::nonzero": 2}


def test_fallback_ops_can_be_set_and_cleared(emulated_npu):
    emulate.set_fallback_ops(["convolution"])
    conv = torch.nn.Conv2d(1, 1, 3).npu()
    with pytest.warns(UserWarning, match="aten::convolution"):
        conv(torch.ones(1, 1, 5, 5, device="npu"))
    emulate.clear_fallback_ops()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        conv(torch.ones(1, 1, 5, 5, device="npu"))
    with emulate.emulated(fallback_ops=["aten::mm"]):
        with pytest.warns(UserWarning, match="aten::mm"):
            torch.ones(2, 2, device="npu") @ torch.ones(2, 2, device="npu")


def test_overflow_inf_mode_is_ieee(emulated_npu):
    big = torch.full((2,), 60000.0, dtype=torch.float16, device="npu")
    assert torch.isinf((big * 2).cpu()).all()
    assert not torch.npu.get_npu_overflow_flag()


@pytest.mark.emulated_npu(overflow_mode="saturate")
def test_overflow_saturate_mode_clamps_and_flags(emulated_npu):
    big = torch.full((2,), 60000.0, dtype=torch.float16, device="npu")
    out = (big * 2).cpu()
    assert torch.isfinite(out).all() and out.max().item() == 65504.0
    assert torch.npu.get_npu_overflow_flag()
    torch.npu.clear_npu_overflow_flag()
    assert not torch.npu.get_npu_overflow_flag()


@pytest.mark.emulated_npu(overflow_mode="saturate")
def test_grad_scaler_uses_overflow_flag_in_saturate_mode(emulated_npu):
    p = torch.nn.Parameter(torch.ones(4, dtype=torch.float16, device="npu"))
    master = torch.nn.Parameter(torch.ones(4, device="npu"))
    opt = torch.optim.SGD([master], lr=1.0)
    scaler = torch.npu.amp.GradScaler(init_scale=2.0**16)
    loss = (p * 60000.0).sum()  # overflows in fp16 -> saturates, flag set
    scaler.scale(loss.float()).backward()
    master.grad = p.grad.float()  # finite (saturated) gradients
    assert torch.isfinite(master.grad.cpu()).all()
    scaler.step(opt)
    scaler.update()
    assert torch.equal(master.detach().cpu(), torch.ones(4))  # skipped because the flag was set
    assert scaler.get_scale() == 2.0**15


def test_invalid_overflow_mode_is_rejected():
    with pytest.raises(ValueError, match="overflow_mode"):
        emulate.set_overflow_mode("wrap")


def test_op_perturbation_changes_results_slightly(emulated_npu):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3)
    x = torch.randn(2, 3, 8, 8)
    ref = conv(x)
    conv_n = conv.npu()
    assert torch.equal(conv_n(x.npu()).detach().cpu(), ref.detach())
    emulate.set_perturbation({"aten.convolution": 1e-3})
    out = conv_n(x.npu()).detach().cpu()
    rel = ((out - ref.detach()).abs() / ref.detach().abs().clamp_min(1e-6)).max().item()
    assert 0 < rel <= 1.001e-3
    emulate.clear_perturbation()
    assert torch.equal(conv_n(x.npu()).detach().cpu(), ref.detach())


def test_module_perturbation(emulated_npu):
    lin = torch.nn.Linear(4, 4).npu()
    relu = torch.nn.ReLU()
    x = torch.randn(3, 4, device="npu")
    ref = lin(x).detach().cpu()
    emulate.set_perturbation({"torch.nn.Linear": 1e-2})
    assert not torch.equal(lin(x).detach().cpu(), ref)
    y = torch.randn(3, device="npu")
    assert torch.equal(relu(y).cpu(), torch.relu(y.cpu()))  # other module types untouched
    emulate.clear_perturbation()
    assert torch.equal(lin(x).detach().cpu(), ref)


@pytest.mark.emulated_npu(overflow_mode="saturate")
def test_saturation_applies_to_in_place_ops(emulated_npu):
    x = torch.full((3,), 40000.0, dtype=torch.float16, device="npu")
    x.mul_(4)
    assert x.cpu().tolist() == [65504.0] * 3


def test_op_perturbation_stays_within_its_amplitude(emulated_npu):
    """out * (1 + eps * U(-1, 1)) once per result: an out= result (how torch reaches addmm on a device)
    must not be perturbed twice."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 64).npu()
    x = torch.randn(16, 64, device="npu")
    clean = lin(x).detach().cpu()
    emulate.set_perturbation({"aten.addmm": 0.1})
    try:
        noisy = lin(x).detach().cpu()
    finally:
        emulate.clear_perturbation()
    rel = ((noisy - clean) / clean).abs()
    assert 0 < rel.max().item() <= 0.1 + 1e-5
