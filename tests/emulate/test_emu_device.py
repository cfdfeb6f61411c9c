"""Devices, placement rules, the torch.npu surface, RNG and memory accounting of the emulated NPU."""

from __future__ import annotations

import sys

import pytest
import torch

import torchport.emulate as emulate


def test_tensors_live_on_npu_and_compute_like_cpu(npu2):
    x = torch.randn(3, 4)
    xn = x.to("npu")
    assert xn.device == torch.device("npu", 0) and xn.is_npu and xn.get_device() == 0
    assert torch.equal((xn @ xn.T).cpu(), x @ x.T)
    assert torch.zeros(2, device="npu:1").device == torch.device("npu", 1)
    assert torch.arange(5, device="npu").cpu().tolist() == [0, 1, 2, 3, 4]
    assert torch.tensor([1.0, 2.0], device="npu:1").device.index == 1
    moved = xn.to("npu:1")
    assert moved.device.index == 1 and torch.equal(moved.cpu(), x)
    assert moved.to("npu:0").device.index == 0  # explicit npu:0 from npu:1 moves (C++ sees both as 0)
    assert "device='npu:0'" in repr(xn)


def test_cpu_copy_is_a_copy(emulated_npu):
    xn = torch.ones(3, device="npu")
    host = xn.cpu()
    host.add_(1)
    assert xn.cpu().tolist() == [1.0, 1.0, 1.0]
    assert xn.data_ptr() != host.data_ptr()


def test_mixing_devices_fails_as_on_hardware(npu2):
    a = torch.ones(3, device="npu:0")
    b = torch.ones(3, device="npu:1")
    with pytest.raises(RuntimeError, match="same device.*npu:0 and npu:1"):
        a + b
    with pytest.raises(RuntimeError, match="same device.*npu:0 and cpu"):
        a + torch.ones(3)
    assert (a + torch.tensor(2.0)).cpu().tolist() == [3.0] * 3  # CPU scalars are fine
    assert (a * 2).device == a.device
    a.copy_(torch.full((3,), 5.0))  # copies may cross devices
    b.copy_(a)
    assert b.cpu().tolist() == [5.0] * 3
    idx = torch.tensor([0, 2])  # host index tensors are allowed, as with CUDA
    assert a[idx].device == a.device


def test_backward_on_second_device(npu2):
    torch.npu.set_device(1)
    w = torch.randn(4, 3, device="npu:1", requires_grad=True)
    loss = (w * w).sum()
    loss.backward()
    assert w.grad.device == torch.device("npu", 1)
    assert torch.allclose(w.grad.cpu(), 2 * w.detach().cpu())


def test_device_module_surface(npu2):
    npu = torch.npu
    assert npu.is_available() and npu.device_count() == 2
    torch.empty(1, device="npu")  # the first use initialises the runtime (torch_npu's lazy init)
    assert npu.is_initialized()
    assert npu.get_device_name(0) == "Ascend910B3 (emulated)"
    assert npu.get_device_properties(1).total_memory == 64 * 1024**3
    assert npu.is_bf16_supported() and torch.bfloat16 in npu.get_amp_supported_dtype()
    npu.set_device("npu:1")
    assert npu.current_device() == 1
    with npu.device(0):
        assert npu.current_device() == 0
        assert torch.empty(1, device="npu").device.index == 0
    assert npu.current_device() == 1
    assert torch.empty(1, device="npu").device.index == 1
    with pytest.raises(AssertionError, match="Invalid device id"):
        npu.set_device(5)
    npu.synchronize()
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    start.record()
    torch.ones(10, device="npu").sum()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    s = npu.Stream()
    with npu.stream(s):
        assert npu.current_stream().query()
    free, total = npu.mem_get_info()
    assert 0 < free <= total
    assert torch.get_device_module("npu") is npu


def test_torch_npu_stub_only_while_installed():
    with emulate.emulated():
        import torch_npu

        assert torch_npu.__torchport_emulated__ is True
        assert torch_npu.npu is torch.npu and torch_npu.npu.device_count() == 1
    assert "torch_npu" not in sys.modules
    with pytest.raises(ImportError):
        import torch_npu  # noqa: F401,F811


def test_rng_is_per_device_and_seedable(npu2):
    torch.npu.manual_seed_all(123)
    a = torch.randn(5, device="npu:0").cpu()
    b = torch.randn(5, device="npu:1").cpu()
    assert torch.equal(a, b)  # same seed on both devices
    torch.npu.manual_seed(123)
    assert torch.equal(torch.randn(5, device="npu").cpu(), a)
    state = torch.npu.get_rng_state()
    r1 = torch.rand(3, device="npu").cpu()
    torch.npu.set_rng_state(state)
    assert torch.equal(torch.rand(3, device="npu").cpu(), r1)
    torch.manual_seed(7)  # torch.manual_seed seeds the emulated devices too
    c = torch.randn(4, device="npu").cpu()
    torch.manual_seed(7)
    assert torch.equal(torch.randn(4, device="npu").cpu(), c)
    host_before = torch.random.get_rng_state()
    torch.nn.functional.dropout(torch.ones(100, device="npu"), 0.5)
    assert torch.equal(torch.random.get_rng_state(), host_before)  # device RNG, not the host's


def test_memory_accounting_counts_live_storage(npu2):
    npu = torch.npu
    npu.reset_peak_memory_stats(0)
    base = npu.memory_allocated(0)
    x = torch.empty(1024, device="npu:0")  # 4 KiB
    assert npu.memory_allocated(0) - base == 4096
    v = x.view(32, 32)  # views share storage
    assert npu.memory_allocated(0) - base == 4096
    y = torch.empty(256, dtype=torch.float16, device="npu:1")
    assert npu.memory_allocated(1) >= 512
    del x, v
    assert npu.memory_allocated(0) == base
    assert npu.max_memory_allocated(0) - base == 4096
    npu.reset_peak_memory_stats(0)
    assert npu.max_memory_allocated(0) == base
    assert npu.memory_reserved(1) >= npu.memory_allocated(1)
    stats = npu.memory_stats(1)
    assert stats["allocated_bytes.all.current"] == npu.memory_allocated(1)
    del y


def test_module_npu_parameters_and_state(emulated_npu):
    m = torch.nn.Linear(4, 2).npu()
    assert isinstance(m.weight, torch.nn.Parameter) and m.weight.device.type == "npu"
    m.half()
    assert m.weight.dtype == torch.float16 and m.weight.device.type == "npu"
    m.float().cpu()
    assert m.weight.device.type == "cpu"


def test_pin_memory_and_non_blocking(emulated_npu):
    host = torch.randn(8, 3)
    pinned = host.pin_memory()
    assert pinned.is_pinned() and not host.is_pinned()
    dev = pinned.to("npu", non_blocking=True)
    assert torch.equal(dev.cpu(), host)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(host), batch_size=4, pin_memory=True)
    assert all(b[0].is_pinned() for b in loader)


def test_torch_accelerator_api_routes_to_the_emulated_device(npu2):
    acc = torch.accelerator
    assert acc.current_accelerator().type == "npu" and acc.device_count() == 2
    acc.set_device_index(1)
    assert acc.current_device_index() == 1 == torch.npu.current_device()
    acc.reset_peak_memory_stats()
    x = torch.empty(256, device="npu")  # noqa: F841  (1 KiB on npu:1)
    assert acc.memory_allocated() == torch.npu.memory_allocated(1) >= 1024
    assert acc.max_memory_allocated(1) >= 1024 and acc.get_memory_info()[1] == 64 * 1024**3
    acc.synchronize()
    acc.empty_cache()
    with acc.device_index(0):
        assert torch.empty(1, device="npu").device.index == 0
