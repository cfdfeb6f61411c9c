import dataclasses
import warnings

import pytest
import torch

import torchport
from torchport import backends
from torchport.backends import BackendUnavailable, UnknownBackendError
from torchport.runtime.device import ConfigError, CPUFallbackWarning, NoAcceleratorError, select_device


@pytest.fixture
def fake_accelerator():
    """A fake 2-device accelerator registered as 'xpu' (the device module is faked at the registry boundary)."""
    original = backends.get("xpu")
    fake = dataclasses.replace(original, probe=lambda: True, device_count=lambda: 2, module=lambda: torch.cpu)
    previous = backends.register(fake, replace=True)
    yield fake
    backends.unregister("xpu", restore=previous)


def test_auto_on_cpu_warns_loudly():
    with pytest.warns(CPUFallbackWarning, match="running on CPU"):
        t = select_device()
    assert t.type == "cpu" and not t.is_accelerator and t.reason == "auto"


def test_require_accelerator_argument():
    with pytest.raises(NoAcceleratorError, match="require-accelerator"):
        select_device(require_accelerator=True)


def test_require_accelerator_env(monkeypatch):
    monkeypatch.setenv("TORCHPORT_REQUIRE_ACCELERATOR", "1")
    with pytest.raises(NoAcceleratorError):
        select_device()


def test_malformed_env_names_the_variable(monkeypatch):
    monkeypatch.setenv("TORCHPORT_REQUIRE_ACCELERATOR", "maybe")
    with pytest.raises(ConfigError, match="TORCHPORT_REQUIRE_ACCELERATOR"):
        select_device()
    monkeypatch.delenv("TORCHPORT_REQUIRE_ACCELERATOR")
    monkeypatch.setenv("LOCAL_RANK", "one")
    with pytest.raises(ConfigError, match="LOCAL_RANK"):
        select_device()
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.setenv("TORCHPORT_DEVICE", "cpu:x")
    with pytest.raises(ConfigError, match="TORCHPORT_DEVICE"):
        select_device()


def test_env_device_override(monkeypatch):
    monkeypatch.setenv("TORCHPORT_DEVICE", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # explicit cpu: no fallback warning
        t = select_device()
    assert t.type == "cpu" and t.reason == "TORCHPORT_DEVICE"


def test_unknown_device_lists_backends():
    with pytest.raises(UnknownBackendError, match="known backends: .*npu"):
        select_device("tpu")


def test_npu_without_torch_npu_says_what_to_install():
    with pytest.raises(BackendUnavailable) as err:
        select_device("npu")
    msg = str(err.value)
    assert "torch-npu" in msg and "set_env.sh" in msg and "TORCHPORT_EMULATE" in msg


def test_auto_picks_accelerator_and_local_rank(fake_accelerator, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "3")
    t = select_device()
    assert t.type == "xpu" and t.index == 1  # 3 % 2 devices
    assert t.device == torch.device("xpu", 1)
    assert torchport.current() is t


def test_explicit_index_out_of_range(fake_accelerator):
    with pytest.raises(BackendUnavailable, match="xpu:5 does not exist.*ZE_AFFINITY_MASK"):
        select_device("xpu:5")


def test_priority_npu_over_cuda(monkeypatch):
    """npu > cuda when both are present."""
    specs = {n: backends.get(n) for n in ("npu", "cuda")}
    prev = [backends.register(dataclasses.replace(s, probe=lambda: True, device_count=lambda: 1), replace=True)
            for s in specs.values()]
    try:
        assert select_device().type == "npu"
    finally:
        for name, p in zip(specs, prev):
            backends.unregister(name, restore=p)


def test_shim_active_still_reports_real_device(monkeypatch):
    """A transfer_to_npu-style shim makes torch.cuda.is_available() lie; selection is not fooled."""
    def fake_is_available():
        return True

    fake_is_available.__module__ = "torch_npu.contrib.transfer_to_npu"
    monkeypatch.setattr(torch.cuda, "is_available", fake_is_available)
    assert backends.get("cuda").shim_active()
    assert not backends.get("cuda").probe()
    with pytest.warns(CPUFallbackWarning):
        assert select_device().type == "cpu"


def test_cpu_fallback_warning_points_at_the_users_line(monkeypatch):
    """The warning names the line that asked for the device, not torchport's own frames."""
    import warnings

    import torchport
    from torchport.runtime import device as device_mod

    monkeypatch.delenv("TORCHPORT_DEVICE", raising=False)
    monkeypatch.delenv("TORCHPORT_REQUIRE_ACCELERATOR", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        device_mod.select_device(warn=True)
    fallback = [w for w in caught if issubclass(w.category, torchport.CPUFallbackWarning)]
    assert fallback and fallback[0].filename == __file__, [(w.filename, w.lineno) for w in caught]
