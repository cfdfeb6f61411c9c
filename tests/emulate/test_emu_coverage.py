"""Default CPU-fallback set = operators torch_npu 2.14.0 does not implement for the NPU (from the
wheel's op-plugin metadata): they warn with torch_npu's text once each; implemented ones do not."""

from __future__ import annotations

import warnings

import pytest
import torch

import torchport.emulate as E


def test_unimplemented_op_warns_like_torch_npu_once(emulated_npu):
    x = torch.tensor([[1.0, 2.0, 2.0], [3.0, 3.0, 1.0]], device="npu")
    with pytest.warns(UserWarning, match=r"^CAUTION: The operator 'aten::mode' is not currently supported on the "
                                         r"NPU backend and will fall back to run on the CPU\. This may have "
                                         r"performance implications\.$"):
        values, _ = torch.mode(x, dim=1)
    assert values.device.type == "npu" and values.cpu().tolist() == [2.0, 3.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.mode(x, dim=1)  # once per op
        torch.nn.functional.conv2d(torch.ones(1, 1, 3, 3, device="npu"), torch.ones(1, 1, 2, 2, device="npu"))
    assert E.fallback_stats()["aten::mode"] == 2


def test_coverage_can_be_switched_off(emulated_npu):
    E.set_coverage(False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.mode(torch.ones(2, 3, device="npu"), dim=1)
    finally:
        E.set_coverage(True)


def test_typical_training_ops_are_all_implemented_on_the_npu():
    from torchport.emulate._coverage import npu_ops, would_fall_back

    assert len(npu_ops()) > 600
    a = torch.ops.aten
    for op in (a.convolution.default, a.convolution_backward.default, a.native_batch_norm.default,
               a.addmm.default, a._log_softmax.default, a.nll_loss_forward.default, a.max_pool2d_with_indices.default,
               a._foreach_add_.List, a.relu.default, a.threshold_backward.default):
        assert not would_fall_back(op), op
    assert would_fall_back(a.mode.default) and would_fall_back(a.linalg_eig.default)
