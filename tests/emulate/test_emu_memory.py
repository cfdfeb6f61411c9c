"""The emulated NPU's memory as torch_npu's: allocator statistics, limits, pinned cache, storages, legacy save.

Small re-creations of torch_npu's own tests (test_npu.py memory tests, test_per_process_memory_fraction.py,
test_accelerator.py memory tests, test_storage.py, test_serialization.py); ``tools/torch_npu_suite.py``
runs the originals at a pinned commit.
"""

import collections
import io
import os
import subprocess
import sys
import textwrap

import pytest
import torch

GiB = 1024**3


@pytest.fixture
def alloc_conf(emulated_npu, monkeypatch):
    """Set ``PYTORCH_NPU_ALLOC_CONF`` and have the allocator read it again (the card reads it once per
    process); the variable is removed and re-read afterwards."""
    from torchport.emulate._state import STATE

    def set_conf(value: str) -> None:
        monkeypatch.setenv("PYTORCH_NPU_ALLOC_CONF", value)
        STATE.native.reload_alloc_conf()

    yield set_conf
    monkeypatch.delenv("PYTORCH_NPU_ALLOC_CONF", raising=False)
    STATE.native.reload_alloc_conf()
    torch.empty(1, device="npu")  # re-read: full card again


def test_torch_accelerator_memory_api_reads_the_device_allocator(emulated_npu):
    assert torch._C._accelerator_isAllocatorInitialized()
    torch.accelerator.reset_peak_memory_stats()
    base = torch.accelerator.memory_allocated()
    assert base == torch.npu.memory_allocated()
    x = torch.randn(256, device="npu")  # 1 KiB
    assert torch.accelerator.memory_allocated() == torch.npu.memory_allocated() == base + 1024
    stats = torch.accelerator.memory_stats()
    for key in ("allocated_bytes.all.peak", "reserved_bytes.small_pool.current", "active_bytes.large_pool.freed",
                "requested_bytes.all.allocated", "num_alloc_retries", "num_ooms", "num_sync_all_streams",
                "num_device_alloc", "num_device_free"):
        assert key in stats, key
    assert stats == {k: v for k, v in torch.npu.memory_stats().items() if k != "num_oom_rejections"}
    del x
    torch.accelerator.empty_cache()
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == base == torch.accelerator.memory_allocated()
    free, total = torch.accelerator.get_memory_info()
    assert total == 64 * GiB == torch.npu.get_device_properties(0).total_memory
    assert free == total - 1 * GiB - base  # the card's runtime holds some memory: free < total, always
    assert torch.npu.mem_get_info() == (free, total)


def test_memory_stats_are_per_device(npu2):
    before = npu2.memory_stats(0)
    y = torch.empty(4096, device="npu:1")  # noqa: F841
    assert npu2.memory_stats(0) == before
    assert npu2.memory_allocated(1) >= 16384 and torch.accelerator.memory_allocated(1) == npu2.memory_allocated(1)


def test_memory_stats_agree_with_the_snapshot_per_pool(emulated_npu):
    """torch_npu's test_memory_stats check: every segment/block counter equals the snapshot's sums."""
    keep = [torch.empty(1, device="npu"), torch.empty(10, 20, device="npu"), torch.empty(200, 300, 20, device="npu"),
            torch.empty(0, device="npu")]
    expected: dict = collections.defaultdict(int)
    for seg in torch.npu.memory_snapshot():
        if seg["device"] != 0:
            continue
        pool = seg["segment_type"] + "_pool"
        for p in ("all", pool):
            expected[f"segment.{p}.current"] += 1
            expected[f"allocated_bytes.{p}.current"] += seg["allocated_size"]
            expected[f"reserved_bytes.{p}.current"] += seg["total_size"]
            expected[f"active_bytes.{p}.current"] += seg["active_size"]
            expected[f"allocation.{p}.current"] += sum(b["state"] == "active_allocated" for b in seg["blocks"])
    stats = torch.npu.memory_stats(0)
    assert expected["segment.large_pool.current"] >= 1 and expected["segment.small_pool.current"] >= 2
    assert {k: stats[k] for k in expected} == dict(expected)
    assert stats["allocated_bytes.all.current"] % 512 == 0  # blocks rounded to 512 bytes, as on the card
    del keep


def test_memory_summary_has_torch_npus_header(emulated_npu):
    stats = torch.npu.memory_stats()
    lines = ["=" * 75, " " * 18 + "PyTorch NPU memory summary, device ID 0" + " " * 18, "-" * 75,
             " " * 12 + f"NPU OOMs: {stats['num_ooms']:<13d} | " + " " * 7 +
             f"npuMalloc retries: {stats['num_alloc_retries']:<9d}  ", "=" * 75,
             "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    head = "".join(f"|{line}|\n" for line in lines)
    assert torch.npu.memory_summary().startswith(head)


def test_impossible_allocation_is_an_out_of_memory_error(emulated_npu):
    t = torch.zeros(4, device="npu")
    with pytest.raises(torch.OutOfMemoryError, match=r"^NPU out of memory\. Tried to allocate more than 1EB memory\."):
        torch.empty(1024 * 1024 * 1024 * 8000000000, dtype=torch.int8, device="npu")
    t.fill_(1)
    assert t.tolist() == [1.0] * 4


def test_the_fraction_is_checked_before_the_host_and_the_card_holds_64_gib(emulated_npu):
    """A card-sized block the host cannot hold is granted (mapped lazily); past the fraction the card's
    OutOfMemoryError comes before any host allocation."""
    base = torch.npu.memory_allocated()
    big = torch.empty(40 * GiB, dtype=torch.int8, device="npu")  # more than this host's memory
    assert torch.npu.memory_allocated() == base + 40 * GiB
    del big
    torch.npu.set_per_process_memory_fraction(0.5, 0)
    try:
        with pytest.raises(torch.OutOfMemoryError, match=r"Tried to allocate 32\.00 GiB \(NPU 0; 64\.00 GiB total "
                                                         r"capacity; .*; 32\.00 GiB allowed; "):
            torch.empty(32 * GiB + 1024, dtype=torch.int8, device="npu")
        assert torch.npu.memory_stats()["num_ooms"] >= 1 and torch.npu.memory_allocated() == base
    finally:
        torch.npu.set_per_process_memory_fraction(1.0, 0)


RANGE = r"per_process_memory_fraction is invalid, set it in \[0\.0, 1\.0\]"


@pytest.mark.parametrize("conf,error,message", [
    ("per_process_memory_fraction:2.0", RuntimeError, RANGE),
    ("per_process_memory_fraction:-0.1", RuntimeError, RANGE),
    ("per_process_memory_fraction:", RuntimeError, r"Index out of bounds in ConfigTokenizer"),
    ("no_such_key:1", ValueError, r"Unrecognized key 'no_such_key' in NPU allocator config"),
])
def test_alloc_conf_rejects_what_the_card_rejects(alloc_conf, conf, error, message):
    alloc_conf(conf)
    for _ in range(2):  # every allocation, until the variable is fixed
        with pytest.raises(error, match=message):
            torch.empty(1024, device="npu")


def test_alloc_conf_fraction_limits_every_device(alloc_conf):
    alloc_conf("expandable_segments:True,per_process_memory_fraction:0.1")
    assert torch.npu.get_per_process_memory_fraction(0) == pytest.approx(0.1)
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.empty(int(64 * GiB * 0.2), dtype=torch.int8, device="npu")
    alloc_conf("per_process_memory_fraction:0.1,throw_on_npumalloc_oom:True")
    with pytest.raises(torch.OutOfMemoryError, match="Allocation was preemptively rejected because it would exceed "
                                                     "per_process_memory_fraction limit"):
        torch.empty(int(64 * GiB * 0.2), dtype=torch.int8, device="npu")
    assert torch.npu.memory_stats()["num_oom_rejections"] >= 1


def test_alloc_conf_is_read_when_a_fresh_process_first_allocates(tmp_path):
    """torch_npu's pattern: the variable is set after import, before the first allocation."""
    code = textwrap.dedent("""
        import os, torch, torchport.emulate as E
        E.install()
        os.environ["PYTORCH_NPU_ALLOC_CONF"] = "per_process_memory_fraction:0.25"
        try:
            torch.empty(20 * 1024**3, dtype=torch.int8, device="npu")
        except torch.OutOfMemoryError as e:
            print("OOM", "16.00 GiB allowed" in str(e))
        print("fraction", torch.npu.get_per_process_memory_fraction())
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHPORT_EMULATE", "PYTORCH_NPU_ALLOC"))}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "OOM True" in proc.stdout and "fraction 0.25" in proc.stdout


def test_pinned_host_blocks_are_cached_and_reused(emulated_npu):
    t = torch.FloatTensor([1]).pin_memory()
    ptr = t.data_ptr()
    del t
    t = torch.FloatTensor([2]).pin_memory()
    assert t.data_ptr() == ptr and t.is_pinned()
    dev = torch.npu.FloatTensor([0])
    dev.copy_(t, non_blocking=True)
    del t
    torch.FloatTensor([3]).pin_memory()  # may take the block: the copy is already done
    assert dev.tolist() == [2.0]
    torch.npu.host_empty_cache()
    torch.accelerator.memory.empty_host_cache()


def test_typed_storages_move_to_the_npu_and_match_the_legacy_storage_types(emulated_npu):
    y = torch.randn(5, 5).storage()
    for name in ("float", "half", "long", "short", "int", "bool", "char", "byte"):
        s = getattr(y.npu(), name)()
        assert isinstance(s, getattr(torch.npu, name.title() + "Storage")), name
        assert not isinstance(getattr(y, name)(), getattr(torch.npu, name.title() + "Storage"))
        assert isinstance(getattr(torch.randn(2).npu(), name)(), getattr(torch.npu, name.title() + "Tensor"))
    assert y.npu().is_npu and y.npu().device == torch.device("npu:0")
    assert torch.UntypedStorage(8).npu().device.type == "npu"
    fs = torch.npu.FloatStorage(4)
    assert fs.device.type == "npu" and fs.dtype == torch.float32 and fs.size() == 4
    with pytest.raises(RuntimeError, match="from_buffer: Not available for NPU storage"):
        torch.npu.ByteStorage.from_buffer(bytearray(b"ab"))


def test_legacy_save_of_npu_tensors_is_refused_as_on_the_card(emulated_npu):
    with pytest.raises(RuntimeError, match=r"^The npu storage desc is unavailable: the tensor's storage is not an "
                                           r"NPUStorageImpl\.$"):
        torch.save(torch.randn(5).npu(), io.BytesIO(), _use_new_zipfile_serialization=False)
    buf = io.BytesIO()
    x = torch.randn(5)
    torch.save(x, buf, _use_new_zipfile_serialization=False)  # CPU tensors: legacy is fine
    buf.seek(0)
    y = torch.load(buf, map_location={"cpu": "npu:0"}, weights_only=False)
    assert y.device == torch.device("npu:0") and torch.equal(y.cpu(), x)
    buf = io.BytesIO()
    torch.save(x.npu(), buf)  # the zip format keeps npu tensors
    buf.seek(0)
    assert torch.load(buf).device.type == "npu"


def test_double_cast_on_the_npu_gives_float32_as_on_the_card(emulated_npu):
    x = torch.randn(3, device="npu", requires_grad=True)
    with pytest.warns(UserWarning, match="Device do not support double dtype now, dtype cast replace with float"):
        d = x.double()
    assert d.dtype == torch.float32 and x.to(torch.float64).dtype == torch.float32
    assert x.detach().to(torch.float64).storage().dtype == torch.float32  # torch_npu's test_storage asserts it
    assert x.to("cpu", torch.float64).dtype == torch.float64  # a move with the cast keeps float64
    assert torch.randn(2, dtype=torch.float64).npu().dtype == torch.float64
    d.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_torch_npu_testcase_compares_storages_element_by_element(emulated_npu):
    from torch_npu.testing.testcase import TestCase

    tc = TestCase()
    cpu = torch.tensor([1.0, 2.0, 3.0])
    tc.assertEqual(cpu.untyped_storage(), cpu.npu().untyped_storage())  # bytes, across devices
    tc.assertEqual(cpu.double().storage(), cpu.npu().storage())  # numbers, without their dtype
    with pytest.raises(AssertionError):
        tc.assertEqual(cpu.storage(), torch.tensor([1.0, 2.0, 4.0]).npu().storage())
