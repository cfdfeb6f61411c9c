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


INNER = """
import torch
import torchport.emulate as emulate

def test_a_uses_npu(portable_device):
    assert emulate.is_installed() == (portable_device.type == "npu")

def test_b_afterwards():
    assert not emulate.is_installed(), "portable_device[npu] left the emulator installed"
    assert not hasattr(torch, "npu") or not getattr(torch, "npu").is_available()
"""


def test_portable_device_npu_is_uninstalled_afterwards(tmp_path):
    """The fixture's own teardown uninstalls the emulator (run in a fresh session: this directory's autouse
    fixture would otherwise uninstall it and hide a broken teardown)."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if k != "TORCHPORT_EMULATE"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "test_inner.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "3 passed" in proc.stdout, proc.stdout[-2000:]          # a[cpu], a[npu], then b


@pytest.mark.emulated_npu(devices=2)
def test_emulated_npu_marker(emulated_npu):
    assert emulated_npu.device_count() == 2
    assert torch.ones(1, device="npu:1").device == torch.device("npu", 1)
