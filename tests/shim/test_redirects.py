"""Each redirect, on the CPU target (always present) -- the emulated-npu twin lives in test_emulated_npu.py."""

from __future__ import annotations

import inspect
import os
import socket
import warnings

import pytest
import torch
import torch.nn as nn

import torchport.shim as shim
from torchport.runtime.device import CPUFallbackWarning, NoAcceleratorError

HERE = os.path.basename(__file__)


def _line() -> int:
    """Line number of the caller's next line."""
    return inspect.currentframe().f_back.f_lineno + 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_device_arguments_land_on_cpu():
    s = shim.install("cpu")
    first_to = _line()
    a = torch.ones(2).to("cuda")
    b = torch.ones(2).to("cuda:0", torch.float64)
    c = torch.ones(2).to(device=torch.device("cuda", 0))
    d = torch.ones(2).to(torch.float16)  # no device: nothing to redirect
    e = torch.ones(2).cuda()
    f = torch.zeros(3, device="cuda")
    g = torch.randn(2, device=torch.device("cuda:0"))
    h = torch.ones(2).new_zeros(4, device="cuda")
    m = nn.Linear(2, 2).cuda()
    m2 = nn.Linear(2, 2).to(torch.device("cuda:0"))
    for t in (a, b, c, d, e, f, g, h, m.weight, m2.weight):
        assert t.device.type == "cpu"
    assert b.dtype == torch.float64 and d.dtype == torch.float16
    rec = s.report.records
    assert rec["torch.Tensor.to"].count == 3  # the dtype-only call is not a redirect
    assert rec["torch.Tensor.to"].first_call_site == f"{HERE}:{first_to}" or \
        rec["torch.Tensor.to"].first_call_site.endswith(f"{HERE}:{first_to}")
    assert rec["torch.Tensor.to"].example == "'cuda' -> cpu"
    for api in ("torch.Tensor.cuda", "torch.zeros", "torch.randn", "torch.Tensor.new_zeros", "torch.nn.Module.cuda",
                "torch.nn.Module.to"):
        assert rec[api].count == 1, api
    assert "torch.ones" not in rec  # torch.ones(2) had no device argument


def test_tensor_subclasses_with_their_own_to_are_covered():
    class Tagged(torch.Tensor):  # a subclass overriding .to would bypass a patch of torch.Tensor.to alone
        def to(self, *args, **kwargs):
            return super().to(*args, **kwargs)

    own_to = vars(Tagged)["to"]
    s = shim.install("cpu")
    t = torch.ones(2).as_subclass(Tagged)
    assert t.to("cuda").device.type == "cpu" and t.cuda().device.type == "cpu"
    assert s.report.records["torch.Tensor.to"].count >= 1
    shim.uninstall()
    assert vars(Tagged)["to"] is own_to


def test_a_scripts_own_slow_cpu_autocast_runs_as_asked_with_one_warning(monkeypatch):
    from torchport.runtime import amp as amp_mod
    from torchport.runtime.amp import SlowPrecisionWarning

    monkeypatch.setenv("TORCHPORT_CPU_BF16", "none")
    monkeypatch.setattr(amp_mod, "_warned", set())
    shim.install("cpu")
    lin = nn.Linear(4, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with torch.autocast("cpu", dtype=torch.bfloat16):   # asked for bf16 on the CPU itself: not redirected
                y = lin(torch.randn(2, 4))
    assert y.dtype == torch.bfloat16                         # ran as asked
    slow = [str(w.message) for w in caught if issubclass(w.category, SlowPrecisionWarning)]
    assert len(slow) == 1, slow                              # one line, not one per autocast
    assert "torch.autocast('cpu', bf16) runs as asked" in slow[0] and "measured" in slow[0] and "fp32" in slow[0]


def test_non_cuda_arguments_pass_through_as_the_same_object():
    s = shim.install("cpu")
    dev = torch.device("cpu")
    for value in ("cpu", "meta", dev, torch.float16, 3.0, None, "npu:0"):
        assert s.map.map(value) is value
    assert s.map.map(1) == 1  # a bare int is a device only where the API says so
    assert s.map.map(1, allow_int=True) == dev


def test_cuda_namespace_on_a_cpu_target():
    shim.install("cpu")
    assert torch.cuda.is_available() is False  # nothing to accelerate: the script's CPU branch is the honest one
    assert torch.cuda.device_count() == 1  # as the fixed code's device_count(): mp.spawn runs one rank
    torch.cuda.set_device(0)
    assert torch.cuda.current_device() == 0
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.memory_allocated() == 0 and torch.cuda.max_memory_allocated() == 0
    assert torch.cuda.memory_stats() == {}
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    assert total >= free >= 0
    torch.cuda.manual_seed_all(7)  # on a CPU target "the device generator" is the CPU generator
    x = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(x, torch.rand(3))
    state = torch.cuda.get_rng_state()
    y = torch.rand(2)
    torch.cuda.set_rng_state(state)
    assert torch.equal(y, torch.rand(2))
    stream = torch.cuda.Stream()
    assert isinstance(stream, torch.cuda.Stream)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record()
        torch.ones(8) @ torch.ones(8)
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.device(0):
        assert torch.cuda.current_device() == 0


@pytest.mark.parametrize("native", [True, False], ids=["native-bf16-cpu", "avx2-cpu"])
def test_amp_follows_the_backend_policy(native, monkeypatch):
    monkeypatch.setenv("TORCHPORT_CPU_BF16", "native" if native else "none")
    s = shim.install("cpu")
    lin = nn.Linear(4, 4).cuda()
    x = torch.randn(2, 4).cuda()
    with torch.autocast("cuda"):
        y1 = lin(x)
    with torch.amp.autocast(device_type="cuda", dtype=torch.float16):
        y2 = lin(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecation of the cuda.amp spelling
        with torch.cuda.amp.autocast():
            y3 = lin(x)
        scaler = torch.cuda.amp.GradScaler()
    # A CPU with native bf16 runs the CUDA script's fp16 autocast as bf16; one without runs it in fp32
    # (autocast off: never slower than the fp32 script); either way the report says so and why.
    assert y1.dtype == y2.dtype == y3.dtype == (torch.bfloat16 if native else torch.float32)
    want = "using bf16" if native else "using fp32"
    assert any("fp16" in n and want in n and "TORCHPORT_CPU_BF16" in n for n in s.report.notes), s.report.notes
    assert scaler._device == "cpu" and scaler.is_enabled()
    assert torch.amp.GradScaler("cuda")._device == "cpu"
    loss = y3.float().sum()
    scaler.scale(loss).backward()
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    scaler.step(opt)
    scaler.update()
    for api in ("torch.autocast", "torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler", "torch.amp.GradScaler"):
        assert api in s.report.records, api
    with torch.autocast("cpu"):  # a non-CUDA autocast is not touched
        pass
    assert s.report.records["torch.autocast"].count == 2


def test_load_map_location_and_cuda_saved_checkpoints(tmp_path, monkeypatch):
    import torch.serialization as ser

    path = tmp_path / "ckpt.pt"
    with monkeypatch.context() as mp:  # write a checkpoint whose storages are tagged cuda:0, as on a GPU box
        mp.setattr(ser, "location_tag", lambda storage: "cuda:0")
        torch.save({"w": torch.arange(3.0), "b": torch.zeros(2)}, path)  # two CUDA-tagged storages
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(path)  # without the shim: the classic failure
    s = shim.install("cpu")
    assert torch.load(path)["w"].tolist() == [0.0, 1.0, 2.0]
    assert torch.load(path, map_location="cuda:0")["w"].device.type == "cpu"
    assert torch.load(path, map_location={"cuda:0": "cuda:1"})["w"].device.type == "cpu"
    assert torch.load(path, map_location="cpu")["w"].device.type == "cpu"
    # one count per redirected load (not per storage); the explicit "cpu" load redirected nothing
    assert s.report.records["torch.load"].count == 3


def test_process_group_and_ddp_on_cpu():
    import torch.distributed as dist

    s = shim.install("cpu")
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        assert dist.get_backend() == "gloo"
        model = nn.Linear(3, 1).cuda(0)
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0])
        assert ddp.device_ids is None  # a CPU module takes no device_ids
        ddp(torch.randn(4, 3).cuda()).sum().backward()
        assert model.weight.grad is not None
    finally:
        dist.destroy_process_group()
    assert s.report.records["torch.distributed.init_process_group"].example == "'nccl' -> gloo"
    assert "torch.nn.parallel.DistributedDataParallel" in s.report.records


def test_backend_string_mapping():
    from types import SimpleNamespace

    from torchport.shim._mapping import DeviceMap

    # xpu: a device type every torch build knows, so torch.device("xpu", 1) exists without the hardware.
    acc = DeviceMap(SimpleNamespace(type="xpu", is_accelerator=True, index=1), "xccl")
    cpu = DeviceMap(SimpleNamespace(type="cpu", is_accelerator=False, index=0), "gloo")
    assert acc.map_backend("nccl") == "xccl" and cpu.map_backend("nccl") == "gloo"
    assert acc.map_backend("cuda:nccl,cpu:gloo") == "xpu:xccl,cpu:gloo"
    assert cpu.map_backend("cuda:nccl,cpu:gloo") == "cpu:gloo"
    assert acc.map_backend("gloo") == "gloo" and acc.map_backend(None) is None
    assert str(acc.map("cuda")) == "xpu:1"  # bare "cuda" = the current device (LOCAL_RANK's)
    assert str(acc.map("cuda:0")) == "xpu:0" and str(acc.map(torch.device("cuda", 2))) == "xpu:2"
    assert str(acc.map(3, allow_int=True)) == "xpu:3"
    acc.set_current(0)
    assert str(acc.map("cuda")) == "xpu:0"
    assert acc.map_type("cuda") == "xpu" and acc.map_type("cpu") == "cpu"
    assert acc.map_location({"cuda:1": "cuda:0", "cpu": "cpu"}) == {"cuda:1": "xpu:0", "cpu": "cpu"}


def test_dataloader_pin_policy_and_data_parallel():
    from torch.utils.data import DataLoader, TensorDataset

    s = shim.install("cpu")
    loader = DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2, pin_memory=True)
    assert loader.pin_memory is False  # the cpu backend does not pin
    assert DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2).pin_memory is False
    assert s.report.records["torch.utils.data.DataLoader"].count == 1
    dp = nn.DataParallel(nn.Linear(2, 2).cuda())
    assert dp.device_ids == [] and dp(torch.randn(3, 2).cuda()).shape == (3, 2)
    assert any("DataParallel" in n for n in s.report.notes)


def test_no_accelerator_warns_exactly_once(monkeypatch):
    from torchport import backends

    if any(sp.is_accelerator and sp.probe() for sp in backends.specs()):
        pytest.skip("an accelerator is present here")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = shim.install()
        torch.ones(2).cuda()
        torch.zeros(2, device="cuda")
        torch.cuda.synchronize()
        shim.uninstall()
    fallbacks = [w for w in caught if issubclass(w.category, CPUFallbackWarning)]
    assert len(fallbacks) == 1, [str(w.message) for w in caught]
    assert "--require-accelerator" in str(fallbacks[0].message)
    assert not [w for w in caught if "torchport" in str(w.filename)]  # and nothing else from us
    assert s.cpu_fallback and "NO ACCELERATOR" in s.report.to_text()
    monkeypatch.setenv("TORCHPORT_REQUIRE_ACCELERATOR", "1")
    with pytest.raises(NoAcceleratorError, match="require-accelerator"):
        shim.install()
    assert shim.active() is None  # nothing half-installed
    assert torch.cuda.is_available.__module__.startswith("torch.cuda")


def test_explicit_cpu_is_not_a_fallback():
    with warnings.catch_warnings():
        warnings.simplefilter("error", CPUFallbackWarning)
        s = shim.install("cpu")
    assert not s.cpu_fallback


def test_refuses_to_stack_on_transfer_to_npu(monkeypatch):
    def foreign_is_available():  # what transfer_to_npu leaves behind: torch.cuda.is_available from elsewhere
        return True

    foreign_is_available.__module__ = "torch_npu.contrib.transfer_to_npu"
    monkeypatch.setattr(torch.cuda, "is_available", foreign_is_available)
    with pytest.raises(shim.ShimError, match="transfer_to_npu"):
        shim.install("cpu")
