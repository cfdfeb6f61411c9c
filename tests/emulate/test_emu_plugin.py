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


USER_TEST = """
import torch

def test_user_code_on_the_npu():
    x = torch.ones(2, device="npu")
    assert type(x) is torch.Tensor and (x + 1).sum().item() == 4
"""

UNRELATED_TEST = """
import sys

def test_nothing_heavy_was_imported():
    assert "torch" not in sys.modules, "the torchport pytest plugin imported torch in an unrelated project"
"""


def _pytest_in(tmp_path, env_extra):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TORCHPORT_EMULATE"}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_a_user_project_runs_its_own_tests_on_the_emulated_npu(tmp_path):
    """TORCHPORT_EMULATE=npu pytest in a project of one plain test file (it once failed at collection:
    "Only a single TORCH_LIBRARY can be used to register the namespace triton")."""
    (tmp_path / "test_user.py").write_text(USER_TEST)
    proc = _pytest_in(tmp_path, {"TORCHPORT_EMULATE": "npu"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout


def test_plugin_imports_nothing_heavy_in_an_unrelated_project(tmp_path):
    (tmp_path / "test_unrelated.py").write_text(UNRELATED_TEST)
    proc = _pytest_in(tmp_path, {})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout
