"""npu tensors behave like a real device's tensors, not like a costume (issue 21).

Each test is one behaviour that differs between a Python wrapper subclass and a PrivateUse1
TensorImpl over host memory; all of them failed on the wrapper-subclass emulator.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch


def test_npu_tensors_are_plain_tensors(emulated_npu):
    x = torch.ones(2, device="npu")
    assert type(x) is torch.Tensor
    assert type(x + 1) is torch.Tensor and type(x.cpu().npu()) is torch.Tensor
    assert type(torch.nn.Parameter(x)) is torch.nn.Parameter


@pytest.mark.parametrize("move", ["to", "npu"])
def test_parameter_objects_survive_a_move_and_an_earlier_optimizer_trains(emulated_npu, move):
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 1)
    w, b = m.weight, m.bias
    opt = torch.optim.SGD(m.parameters(), lr=0.1)  # built before the move (accelerate's prepare order)
    m = m.to("npu") if move == "to" else m.npu()
    assert m.weight is w and m.bias is b
    assert type(m.weight) is torch.nn.Parameter and m.weight.device.type == "npu"
    before = m.weight.detach().cpu().clone()
    loss = m(torch.ones(3, 4, device="npu")).square().sum()
    loss.backward()
    opt.step()
    assert not torch.equal(m.weight.detach().cpu(), before), "the optimizer updated orphaned tensors"
    m.cpu()
    assert m.weight is w and m.weight.device.type == "cpu"


def test_record_stream(emulated_npu):
    x = torch.ones(3, device="npu")
    x.record_stream(torch.npu.current_stream())
    assert x.sum().item() == 3


@pytest.mark.parametrize("name,dtype", [("HalfTensor", torch.float16), ("FloatTensor", torch.float32),
                                        ("LongTensor", torch.int64), ("BFloat16Tensor", torch.bfloat16)])
def test_legacy_tensor_types(emulated_npu, name, dtype):
    legacy = getattr(torch.npu, name)
    y = torch.arange(3.0).type(legacy)
    assert y.dtype == dtype and y.device.type == "npu"
    assert isinstance(y, legacy)
    assert y.type() == f"torch.npu.{name}"


def test_data_assignment_moves_a_tensor(emulated_npu):
    x = torch.ones(2, requires_grad=True)
    x.data = x.data.npu()
    assert x.device.type == "npu" and x.requires_grad
    assert (x * 2).sum().item() == 4


def test_untyped_storage_on_the_device_does_not_crash():
    code = textwrap.dedent("""
        import torch, torchport.emulate as e
        e.install()
        s = torch.UntypedStorage(20, device="npu:0")
        print("RESULT", s.device, s.nbytes())
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "RESULT npu:0 20" in proc.stdout


def test_out_of_memory_is_torch_out_of_memory_error(emulated_npu):
    torch.npu.set_per_process_memory_fraction(1e-6)  # ~68 KiB of the emulated 64 GiB
    try:
        with pytest.raises(torch.OutOfMemoryError, match="NPU out of memory"):
            torch.empty(1 << 20, device="npu")
        assert torch.npu.memory_stats()["num_ooms"] >= 1
    finally:
        torch.npu.set_per_process_memory_fraction(1.0)


def test_memory_stats_has_the_caching_allocator_key_set(emulated_npu):
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    x = torch.empty(1024, device="npu")  # 4 KiB
    stats = torch.npu.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
                "allocated_bytes.all.freed", "reserved_bytes.all.current", "active_bytes.all.current",
                "allocation.all.current", "segment.all.current", "num_alloc_retries", "num_ooms",
                "allocated_bytes.large_pool.current", "allocated_bytes.small_pool.current"):
        assert key in stats, key
    assert stats["allocated_bytes.all.current"] == base + 4096
    assert stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"]
    del x
    assert torch.npu.memory_allocated() == base
    assert torch.npu.max_memory_allocated() >= base + 4096


def test_fallback_results_share_memory_like_device_kernels(emulated_npu):
    a = torch.arange(6.0, device="npu")
    v = a.view(2, 3)
    v.add_(1)  # in place through the CPU fallback, on the npu bytes
    assert a.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    out = torch.empty(0, device="npu")
    r = torch.add(a, a, out=out)  # out= resized by the CPU kernel
    assert r is out and out.shape == (6,) and out.device.type == "npu"
    assert out.cpu().tolist() == [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    assert a.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()


def test_non_blocking_copy_to_host_is_pinned(emulated_npu):
    x = torch.arange(4.0, device="npu")
    c = x.to("cpu", non_blocking=True)
    assert c.is_pinned() and c.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert torch.ones(2).pin_memory().is_pinned() and not torch.ones(2).is_pinned()


@pytest.mark.emulated_npu(devices=2)
def test_data_parallel_over_two_npus_matches_one_device(emulated_npu):
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2).npu()
    dp = torch.nn.DataParallel(torch.nn.Linear(3, 2).npu(), device_ids=[0, 1])
    dp.module.load_state_dict(ref.state_dict())
    x = torch.randn(8, 3, device="npu")
    y_ref, y = ref(x), dp(x)
    assert y.device == torch.device("npu", 0)
    torch.testing.assert_close(y.cpu(), y_ref.cpu())
    y.square().sum().backward()
    y_ref.square().sum().backward()
    torch.testing.assert_close(dp.module.weight.grad.cpu(), ref.weight.grad.cpu())


@pytest.mark.emulated_npu(devices=2)
def test_data_parallel_scatters_host_inputs_and_gathers_to_the_host(emulated_npu):
    # torch_npu replaces torch's CUDA-only C++ scatter/gather (initCommMethods): a CPU input scatters to
    # the npus (DataParallel's forward, the backward of a gather to the CPU) instead of failing on the stream
    import torch.nn.parallel as parallel

    x = torch.arange(16.0, dtype=torch.double).view(4, 4).requires_grad_()
    parts = parallel.scatter(x, (0, 1))
    assert [p.device for p in parts] == [torch.device("npu", 0), torch.device("npu", 1)]
    assert torch.equal(parts[1].cpu(), x[2:].detach())
    parts[0].backward(torch.full_like(parts[0], 2))
    assert x.grad.tolist() == [[2.0] * 4] * 2 + [[0.0] * 4] * 2
    ins = (torch.ones(2, 3, device="npu:0", requires_grad=True), torch.ones(2, 3, device="npu:1", requires_grad=True))
    out = parallel.gather(ins, -1)
    assert out.device.type == "cpu" and out.shape == (4, 3)
    out.backward(torch.arange(12.0).view(4, 3))  # a host gradient scattered back to both npus
    assert ins[1].grad.device == torch.device("npu", 1) and ins[1].grad.cpu().tolist() == [[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]
    model = torch.nn.DataParallel(torch.nn.Linear(3, 2).npu(), device_ids=[0, 1])
    assert model(torch.ones(4, 3)).device == torch.device("npu", 0)   # a host batch, as in a user's loop


def _weight_casts(device: str, cached_tensor: bool) -> int:
    """How often autocast casts a float32 weight to float16 in a forward plus a backward that autocasts again
    (torch's cast-cache tests, with the end-of-region cache clearing switched off as they do)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return torch.nn.functional.linear(x, w)

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            with torch.autocast(device, dtype=torch.float16):
                return torch.matmul(grad, w), torch.matmul(x.t(), grad).t()

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.ops.aten._to_copy.default and args[0] is weight and kwargs.get("dtype") is torch.float16:
                Count.n += 1
            return func(*args, **kwargs)

    data = torch.randn(2, 3, device=device)
    weight = torch.nn.Parameter(torch.randn(4, 3, device=device))
    clear, torch.clear_autocast_cache = torch.clear_autocast_cache, lambda: None
    try:
        if cached_tensor:   # torch._C._add_cached_tensor: autocast must not cache this one's casts
            torch._C._set_cached_tensors_enabled(True)
            torch._C._add_cached_tensor(weight)
        with Count():
            with torch.autocast(device, dtype=torch.float16):
                out = Linear.apply(data, weight).sum()
            out.backward()
    finally:
        torch.clear_autocast_cache = clear
        torch._C._set_cached_tensors_enabled(False)
        clear()
    return Count.n


@pytest.mark.parametrize("cached_tensor", [False, True])
def test_autocast_casts_a_weight_once_per_region_like_torch(emulated_npu, cached_tensor):
    # torch's cached_cast (what torch_npu's autocast kernels use): one cast shared by forward and backward,
    # none cached for a torch._C._add_cached_tensor tensor; the emulator cast the weight every time
    assert _weight_casts("npu", cached_tensor) == _weight_casts("cpu", cached_tensor) == (2 if cached_tensor else 1)
