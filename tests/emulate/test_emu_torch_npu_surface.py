"""The torch_npu stand-in's surface that torch_npu's own tests and third-party libraries reach
(issue 21, items 2 and 5), re-created in small tests of our own: nothing of Ascend/pytorch's
test files is here (``tools/torch_npu_suite.py`` runs those at a pinned commit)."""

from __future__ import annotations

import importlib
import unittest

import pytest
import torch

import torchport.emulate as emulate


@pytest.fixture
def npu():
    with emulate.emulated(devices=2) as mod:
        yield mod


def test_submodules_torch_npu_tests_import(npu):
    import torch_npu
    from torch_npu.npu.amp import GradScaler, autocast
    from torch_npu.npu.amp.autocast_mode import autocast as autocast2
    from torch_npu.profiler.analysis.prof_common_func._cann_package_manager import CannPackageManager
    from torch_npu.testing.common_distributed import skipIfUnsupportMultiNPU, with_comms  # noqa: F401
    from torch_npu.testing.common_utils import SupportedDevices, create_common_tensor  # noqa: F401
    from torch_npu.testing.testcase import TestCase, run_tests  # noqa: F401
    from torch_npu.utils._path_manager import PathManager  # noqa: F401
    from torch_npu.utils.collect_env import get_cann_version

    amp = importlib.import_module("torch_npu.npu.amp")
    assert amp is torch.npu.amp is torch_npu.npu.amp and hasattr(amp, "__path__")
    assert autocast2 is autocast and GradScaler is torch.npu.amp.GradScaler
    assert get_cann_version() < "8.0" and not CannPackageManager.is_support_default_export_db()


def _run_case(case_cls, name):
    result = unittest.TestResult()
    case_cls(name).run(result)
    return result


def test_testcase_rtol_equal_passes_close_and_fails_far(npu):
    from torch_npu.testing.testcase import TestCase

    class T(TestCase):
        def test_close(self):
            x = torch.ones(100)
            self.assertRtolEqual(x, (x * (1 + 1e-6)).npu())
            self.assertRtolEqual(torch.ones(3, dtype=torch.float16), torch.ones(3, dtype=torch.float16).npu())
            self.assertEqual(torch.ones(2).npu(), torch.ones(2) + 1e-4, prec=1e-3)

        def test_far(self):
            self.assertRtolEqual(torch.ones(100), torch.full((100,), 1.01).npu())

        def test_dtype(self):
            self.assertRtolEqual(torch.ones(3), torch.ones(3, dtype=torch.float64))

        def test_nan_places(self):
            self.assertRtolEqual(torch.tensor([1.0, float("nan")]), torch.tensor([float("nan"), 1.0]))

    assert _run_case(T, "test_close").wasSuccessful()
    for bad in ("test_far", "test_dtype", "test_nan_places"):
        result = _run_case(T, bad)
        assert len(result.failures) == 1, bad


def test_supported_devices_and_multi_npu_skips(npu):
    from torch_npu.testing.common_distributed import skipIfUnsupportMultiNPU
    from torch_npu.testing.common_utils import SupportedDevices

    class T(unittest.TestCase):
        @SupportedDevices(["Ascend910B"])
        def test_910b(self):
            pass

        @SupportedDevices(["Ascend950"])
        def test_950(self):
            pass

        @skipIfUnsupportMultiNPU(2)
        def test_two(self):
            pass

        @skipIfUnsupportMultiNPU(8)
        def test_eight(self):
            pass

    assert not _run_case(T, "test_910b").skipped
    assert _run_case(T, "test_950").skipped
    assert not _run_case(T, "test_two").skipped
    assert _run_case(T, "test_eight").skipped


def _overflow_run(scaler_cls, device):
    """Two optimizers, both unscaled (as for clipping), inf only in the second's gradients."""
    a = torch.nn.Parameter(torch.ones(2, device=device))
    b = torch.nn.Parameter(torch.ones(2, device=device))
    opt_a, opt_b = torch.optim.SGD([a], lr=1.0), torch.optim.SGD([b], lr=1.0)
    scaler = scaler_cls(init_scale=4.0)
    loss = a.sum() + b.sum()
    scaler.scale(loss).backward()
    b.grad.fill_(float("inf"))
    scaler.unscale_(opt_a)
    scaler.unscale_(opt_b)
    scaler.step(opt_a)
    scaler.step(opt_b)
    scaler.update()
    stepped_a = not torch.equal(a.detach().cpu(), torch.ones(2))
    # the next iteration, without overflow, steps again
    opt_a.zero_grad()
    opt_b.zero_grad()
    scaler.scale(a.sum() + b.sum()).backward()
    scaler.step(opt_a)
    scaler.step(opt_b)
    scaler.update()
    return stepped_a, not torch.equal(a.detach().cpu(), torch.ones(2)), scaler.get_scale()


def test_grad_scaler_one_overflow_skips_every_optimizer(npu):
    stepped_first, stepped_later, scale = _overflow_run(torch.npu.amp.GradScaler, "npu")
    assert not stepped_first  # torch_npu skips opt_a too (torch's scaler would step it)
    assert stepped_later and scale == 2.0
