"""Device audit: healthy on every portable device; seeded placement defects fail, located."""

from __future__ import annotations

import pytest

from checks_targets import buffer_on_cpu, find_problem, healthy, loss_weight_on_cpu
from torchport.checks import Status, device_audit


def test_healthy_target_passes_everywhere(portable_device):
    r = device_audit(healthy(), device=portable_device, steps=2, expect_accelerator=portable_device.is_accelerator)
    # On CPU nothing can be off the device: the audit says it cannot tell (skip), never a PASS that proves nothing.
    want = Status.PASS if portable_device.is_accelerator else Status.SKIP
    assert r.status is want, r.summary
    if want is Status.SKIP:
        assert r.summary.startswith("inconclusive on CPU (cannot tell)") and r.ok
    ops = next(e for e in r.evidence if e.what.startswith("ops inspected"))
    assert ops.measured > 100  # forward, backward and optimizer ops were all seen


def test_cpu_when_an_accelerator_is_expected_fails(cpu):
    r = device_audit(healthy(), device=cpu, steps=1, expect_accelerator=True)
    assert r.status is Status.FAIL
    assert "accelerator expected but the job is on CPU" in r.summary


def test_plain_tensor_attribute_is_a_warning_on_cpu(cpu):
    # On CPU the defect cannot break anything yet; the audit still points at it.
    r = device_audit(buffer_on_cpu(), device=cpu, steps=1, expect_accelerator=False)
    assert r.status is Status.WARN
    assert find_problem(r, "model.0.mean").status is Status.WARN


def test_buffer_left_on_cpu_fails_with_module_and_op(emulated_npu):
    from torchport.runtime.device import select_device

    r = device_audit(buffer_on_cpu(), device=select_device("npu"), steps=1)
    assert r.status is Status.FAIL
    op = find_problem(r, "aten.sub.Tensor")
    assert op.where.startswith("model.0 ") and "forward" in op.where
    assert find_problem(r, "model.0.mean").status is Status.FAIL
    assert "model.0" in r.summary and "aten.sub" in r.summary


def test_loss_weight_left_on_cpu_fails_naming_the_tensor(emulated_npu):
    from torchport.runtime.device import select_device

    r = device_audit(loss_weight_on_cpu(), device=select_device("npu"), steps=1)
    assert r.status is Status.FAIL
    assert "loss.weight (cpu, [10])" in find_problem(r, "loss tensors").where
    assert find_problem(r, "nll_loss").where.startswith("loss ")


@pytest.mark.emulated_npu(fallback_ops=["aten.convolution"])
def test_cpu_fallback_is_listed_per_op(emulated_npu):
    from torchport.runtime.device import select_device

    r = device_audit(healthy(), device=select_device("npu"), steps=1)
    assert r.status is Status.FAIL
    fb = find_problem(r, "falls back to CPU")
    assert fb.where.startswith("aten::convolution")
    assert "model.0.0 (forward)" in fb.where and "model.1.0 (forward)" in fb.where  # every conv, located
    assert "fall back to run on the CPU" in fb.detail
    allowed = device_audit(healthy(), device=select_device("npu"), steps=1, allow_fallback=["aten::convolution"])
    assert allowed.status is Status.PASS, allowed.summary
