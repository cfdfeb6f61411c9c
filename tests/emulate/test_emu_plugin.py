"""The pytest plugin's fixtures: portable_device and emulated_npu."""

import pytest
import torch


def test_portable_device_runs_a_step(portable_device):
    target = portable_device
    assert target.type in ("cpu", "npu", "cuda")
    model = torch.nn.Linear(4, 2).to(target.device)
    x = torch.randn(3, 4, device=target.device)
    loss = model(x).square().mean()
    loss.backward()
    assert model.weight.grad.device.type == target.type
    if target.type == "npu":
        assert target.backend.emulated and str(target) == "npu (emulated):0"
        assert target.module is torch.npu


def test_portable_device_npu_is_uninstalled_afterwards():
    import torchport.emulate as emulate

    assert not emulate.is_installed() or emulate.parse_env(__import__("os").environ.get("TORCHPORT_EMULATE"))


@pytest.mark.emulated_npu(devices=2)
def test_emulated_npu_marker(emulated_npu):
    assert emulated_npu.device_count() == 2
    assert torch.ones(1, device="npu:1").device == torch.device("npu", 1)
