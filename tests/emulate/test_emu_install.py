"""Install / uninstall lifecycle, the TORCHPORT_EMULATE autoload, registry integration, honesty checks."""

from __future__ import annotations

import sys
import types

import pytest
import torch

import torchport.emulate as emulate
from emu_helpers import run_python
from torchport import backends
from torchport.backends import npu as npu_backend
from torchport.runtime import device as runtime_device
from torchport.runtime.device import ConfigError


@pytest.mark.parametrize("value, expected", [("npu", 1), ("npu:3", 3), (" NPU:2 ", 2), ("", None), (None, None)])
def test_parse_env(value, expected):
    assert emulate.parse_env(value) == expected


@pytest.mark.parametrize("value", ["cuda", "npu:x", "npu:0", "npu:-1", "npu2"])
def test_parse_env_rejects_malformed_values_naming_the_variable(value):
    with pytest.raises(ConfigError, match="TORCHPORT_EMULATE"):
        emulate.parse_env(value)


def test_install_from_env_mapping():
    assert emulate.install_from_env({}) is False and not emulate.is_installed()
    assert emulate.install_from_env({"TORCHPORT_EMULATE": "npu:2"}) is True
    assert torch.npu.device_count() == 2
    emulate.uninstall()


def test_registry_and_device_selection():
    original = backends.get("npu")
    assert original is npu_backend.SPEC
    with emulate.emulated(devices=2):
        spec = backends.get("npu")
        assert spec.emulated and spec.label == "npu (emulated)" and spec.dist_backend == "hccl"
        assert spec.probe() and spec.device_count() == 2
        runtime_device.reset_selection()
        target = runtime_device.select_device()
        assert target.type == "npu" and str(target) == "npu (emulated):0"
        assert target.module is torch.npu
        facts = spec.doctor_facts()
        assert facts["emulated"] is True and facts["devices"] == 2
        assert torch.distributed.get_default_backend_for_device("npu") == "hccl"
    assert backends.get("npu") is original
    runtime_device.reset_selection()
    assert runtime_device.select_device(warn=False).type != "npu"


def test_uninstall_restores_what_install_touched():
    import torch.optim.optimizer as opt
    import torch.serialization as ser

    rebuild = torch._utils._rebuild_tensor
    registry = list(ser._package_registry)
    foreach_types = list(opt._foreach_supported_types)
    for _ in range(2):  # install twice in one process: the second install works too
        with emulate.emulated():
            x = torch.ones(2, device="npu")
            assert torch.Tensor.npu is not None and hasattr(torch.Tensor, "is_npu")
            assert torch.accelerator.is_available()
        assert not hasattr(torch.Tensor, "is_npu") and not hasattr(torch.nn.Module, "npu")
        assert torch._utils._rebuild_tensor is rebuild
        assert ser._package_registry == registry
        assert opt._foreach_supported_types == foreach_types
        assert "torch_npu" not in sys.modules
        assert not torch.npu.is_available() and torch.npu.device_count() == 0
        assert not torch.accelerator.is_available()  # torch.accelerator keeps working
        with pytest.raises(RuntimeError, match="uninstalled"):
            x + 1


def test_refuses_when_real_torch_npu_is_loaded(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    with pytest.raises(emulate.EmulationError, match="real torch_npu"):
        emulate.install()
    assert not emulate.is_installed()


def test_autoload_env_gives_any_process_the_device():
    code = (
        "import sys, torch\n"
        "import torch_npu\n"
        "x = torch.ones(3, device='npu:1', requires_grad=True)\n"
        "(x * 2).sum().backward()\n"
        "print(torch.npu.device_count(), torch_npu.__torchport_emulated__, x.grad.device)\n"
        "from torchport.runtime.doctor import collect\n"  # what `torchport doctor` reports
        "print(collect()['selected']['label'])\n"
    )
    proc = run_python(code, env={"TORCHPORT_EMULATE": "npu:2"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].split() == ["2", "True", "npu:1"]
    assert lines[1].startswith("npu (emulated)")


def test_autoload_does_nothing_when_unset():
    code = (
        "import sys, torch\n"
        "print(hasattr(torch, 'npu'), torch._C._get_privateuse1_backend_name(), 'torch_npu' in sys.modules)\n"
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "privateuseone", "False"]


def test_autoload_malformed_value_names_the_variable():
    proc = run_python("import torch", env={"TORCHPORT_EMULATE": "gpu:2"})
    assert proc.returncode != 0
    assert "TORCHPORT_EMULATE='gpu:2'" in proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU the engine has device queues already")
def test_install_after_backward_explains_the_fix():
    code = (
        "import torch\n"
        "x = torch.ones(2, requires_grad=True); x.sum().backward()\n"
        "import torchport.emulate as e\n"
        "try:\n"
        "    e.install()\n"
        "except e.EmulationError as err:\n"
        "    print('REFUSED', err)\n"
        "print('installed', e.is_installed())\n"
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert "REFUSED" in proc.stdout and "TORCHPORT_EMULATE=npu" in proc.stdout
    assert "installed False" in proc.stdout


_STEP = (
    "import torch, hashlib\n"
    "def cpu_step():\n"
    "    torch.manual_seed(0)\n"
    "    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),\n"
    "                            torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 4))\n"
    "    opt = torch.optim.Adam(m.parameters())\n"
    "    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))\n"
    "    with torch.autocast('cpu', dtype=torch.bfloat16):\n"
    "        loss = torch.nn.functional.cross_entropy(m(x), y)\n"
    "    loss.backward(); opt.step()\n"
    "    h = hashlib.sha256()\n"
    "    for p in m.state_dict().values(): h.update(p.detach().float().numpy().tobytes())\n"
    "    return h.hexdigest()\n"
)


def test_cpu_step_after_uninstall_is_bit_identical_to_never_installed():
    never = run_python(_STEP + "print(cpu_step())\n")
    after = run_python(
        _STEP
        + "import torchport.emulate as e\n"
        "e.install(devices=2, fallback_ops=['aten.mm'], overflow_mode='saturate', perturb={'aten.addmm': 1e-3})\n"
        "m = torch.nn.Linear(4, 4).npu(); m(torch.randn(2, 4, device='npu')).sum().backward()\n"
        "with torch.autocast('npu'):\n"
        "    m(torch.randn(2, 4, device='npu'))\n"
        "e.uninstall()\n"
        "print(cpu_step())\n"
    )
    assert never.returncode == 0 and after.returncode == 0, never.stderr + after.stderr
    assert never.stdout.strip() == after.stdout.strip()
