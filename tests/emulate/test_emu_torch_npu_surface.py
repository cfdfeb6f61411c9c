"""The torch_npu stand-in's surface that torch_npu's own tests and third-party libraries reach
(issue 21, items 2 and 5), re-created in small tests of our own: nothing of Ascend/pytorch's
test files is here (``tools/torch_npu_suite.py`` runs those at a pinned commit)."""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
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


# -- item 5: every name transformers / accelerate / timm / Lightning take from torch_npu at load time

#: the libraries whose installed sources are grepped, and what they import from torch_npu at the versions
#: measured (transformers 5.24, accelerate 1.15, timm 1.0.31, lightning 2.6.6): checked even where a
#: library is not installed
THIRD_PARTY = ("transformers", "accelerate", "timm", "lightning", "pytorch_lightning", "lightning_fabric")
KNOWN_NAMES = {("torch_npu", "npu_fusion_attention"), ("torch_npu.optim", "NpuFusedAdamW"), ("torch_npu", None)}

_FROM = re.compile(r"^[ \t]*from[ \t]+(torch_npu(?:\.\w+)*)[ \t]+import[ \t]+(?:\(([^)]*)\)|([^\n(#]+))", re.M)
_ATTR = re.compile(r"\btorch_npu((?:\.\w+)+)")
_IMPORT = re.compile(r"^[ \t]*import[ \t]+(torch_npu(?:\.\w+)*)", re.M)


def torch_npu_names(source: str) -> set:
    """``(module, name)`` pairs a source file takes from torch_npu (name None: the module itself)."""
    names = set()
    for mod, in_parens, on_line in _FROM.findall(source):
        for name in (in_parens or on_line).replace("\n", " ").split(","):
            name = name.strip().split(" as ")[0].strip()
            if name:
                names.add((mod, name))
    for mod in _IMPORT.findall(source):
        names.add((mod, None))
    for chain in _ATTR.findall(source):
        parts = chain.strip(".").split(".")
        if parts[0] == "npu":  # torch_npu.npu is torch.npu: its names are checked against torch.npu below
            continue
        names.add(("torch_npu", parts[0]))
    return names


def installed_third_party_names() -> set:
    found = set()
    for lib in THIRD_PARTY:
        spec = importlib.util.find_spec(lib)
        if spec is None or not spec.submodule_search_locations:
            continue
        for root in spec.submodule_search_locations:
            for path in pathlib.Path(root).rglob("*.py"):
                text = path.read_text(errors="replace")
                if "torch_npu" in text:
                    found |= torch_npu_names(text)
    return found


def test_name_grep_finds_each_form():
    src = ("from torch_npu import npu_fusion_attention, npu_rms_norm as rms\n"
           "    from torch_npu.optim import (NpuFusedAdamW,\n        NpuFusedSGD)\n"
           "import torch_npu.profiler\nx = torch_npu.npu_format_cast(t, 29)\ny = torch_npu.npu.current_device()\n"
           "z = is_torch_npu_available()\n")
    assert torch_npu_names(src) == {
        ("torch_npu", "npu_fusion_attention"), ("torch_npu", "npu_rms_norm"), ("torch_npu.optim", "NpuFusedAdamW"),
        ("torch_npu.optim", "NpuFusedSGD"), ("torch_npu.profiler", None), ("torch_npu", "npu_format_cast"),
        ("torch_npu", "optim"), ("torch_npu", "profiler")}


def test_every_torch_npu_name_third_party_libraries_import_exists(npu):
    names = KNOWN_NAMES | installed_third_party_names()
    missing = []
    for mod, name in sorted(names, key=str):
        try:
            module = importlib.import_module(mod)
            if name is not None:
                getattr(module, name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{mod}.{name}: {exc}")
    assert not missing, missing


def test_npu_fusion_attention_matches_sdpa(npu):
    import torch_npu

    torch.manual_seed(0)
    b, s, n, d = 2, 5, 4, 8
    q, k, v = (torch.randn(b, s, n, d) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                           is_causal=True).transpose(1, 2)
    qn, kn, vn = (t.npu().requires_grad_() for t in (q, k, v))
    out = torch_npu.npu_fusion_attention(qn, kn, vn, n, "BSND", scale=d ** -0.5, sparse_mode=3,
                                         atten_mask=torch.ones(s, s, dtype=torch.bool).triu(1).npu())
    assert out[0].device.type == "npu" and len(out) == 7
    torch.testing.assert_close(out[0].cpu(), ref, rtol=1e-5, atol=1e-5)
    out[0].sum().backward()
    assert qn.grad is not None and qn.grad.device.type == "npu"
    # explicit mask (True = masked out), BSH layout, grouped-query keys (2 kv heads)
    mask = torch.rand(s, s) > 0.7
    mask.fill_diagonal_(False)
    kg, vg = k[:, :, :2], v[:, :, :2]
    ref2 = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), kg.transpose(1, 2), vg.transpose(1, 2), attn_mask=~mask, enable_gqa=True).transpose(1, 2)
    out2 = torch_npu.npu_fusion_attention(q.reshape(b, s, n * d).npu(), kg.reshape(b, s, 2 * d).npu(),
                                          vg.reshape(b, s, 2 * d).npu(), n, "BSH", atten_mask=mask.npu(),
                                          scale=d ** -0.5)[0]
    torch.testing.assert_close(out2.cpu().view(b, s, n, d), ref2, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="npu_fusion_attention: input_layout 'TND'"):
        torch_npu.npu_fusion_attention(qn, kn, vn, n, "TND")


def test_transformers_llama_config_imports_under_the_emulator(tmp_path):
    """``from transformers import LlamaConfig`` with TORCHPORT_EMULATE=npu (transformers then imports
    npu_fusion_attention); transformers comes with the dev extra."""
    code = ("import torch, transformers.integrations.npu_flash_attention as m\n"
            "from transformers import LlamaConfig\n"
            "print(LlamaConfig().model_type, m.npu_fusion_attention.__module__)\n")
    env = dict(os.environ, TORCHPORT_EMULATE="npu", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-2:] == ["llama", "torch_npu._fusion_attention"]


def test_tensor_type_takes_the_legacy_npu_types(npu):
    x = torch.ones(2, device="npu")
    for legacy, dtype in ((torch.npu.HalfTensor, torch.float16), (torch.npu.BFloat16Tensor, torch.bfloat16),
                          (torch.npu.LongTensor, torch.int64)):
        y = x.type(legacy)
        assert (y.dtype, y.device.type) == (dtype, "npu") and isinstance(y, legacy)
    assert torch.ones(2).type(torch.npu.FloatTensor).device.type == "npu"
    assert repr(torch.npu.HalfTensor) == "<class 'torch_npu.npu.HalfTensor'>"


def test_transfer_to_npu_redirects_the_rest_of_torch_cuda(tmp_path):
    """After ``transfer_to_npu``: the APIs torch_npu's own transfer tests exercise name the npu, and
    ``with torch.device(...)`` is still honoured (it was silently ignored: tensors landed on cpu)."""
    script = tmp_path / "t.py"
    script.write_text(
        "import json, torch\nfrom torch_npu.contrib import transfer_to_npu\n"
        "out = {}\n"
        "out['module'] = torch.get_device_module('cuda:0') is torch.npu\n"
        "out['event'] = torch.Event('cuda:0').device.type\n"
        "out['gens'] = torch.cuda.default_generators == torch.npu.default_generators != ()\n"
        "torch.cuda.set_per_process_memory_fraction(0.5, torch.device('cuda:0'))\n"
        "out['fraction'] = torch.npu.get_per_process_memory_fraction(0)\n"
        "before = torch.npu.memory_allocated(0)\n"
        "ptr = torch.cuda.caching_allocator_alloc(1 << 20, 'cuda:0')\n"
        "out['alloc'] = torch.npu.memory_allocated(0) - before\n"
        "torch.cuda.caching_allocator_delete(ptr)\n"
        "out['util'] = isinstance(torch.cuda.utilization(torch.device('cuda:0')), int)\n"
        "out['fft'] = torch.fft.fftfreq(5, device='cuda:0').device.type\n"
        "out['amp'] = torch.cuda.amp.GradScaler is torch.npu.amp.GradScaler\n"
        "out['snapshot'] = 'segments' in torch.cuda.memory._snapshot()\n"
        "ctx = {}\n"
        "for dev in ('meta', 'npu', 'cuda'):\n"
        "    with torch.device(dev):\n"
        "        ctx[dev] = [torch.nn.Linear(2, 2).weight.device.type, torch.tensor(1).device.type]\n"
        "out['ctx'] = ctx\n"
        "import torchport.shim\ntorchport.shim.uninstall()\n"
        "out['restored'] = [torch.get_device_module('npu') is torch.npu, torch.Event.__module__]\n"
        "print(json.dumps(out))\n")
    env = dict(os.environ, TORCHPORT_EMULATE="npu", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = __import__("json").loads(proc.stdout.strip().splitlines()[-1])
    assert out["module"] and out["event"] == "npu" and out["gens"]
    assert out["fraction"] == 0.5 and out["alloc"] >= 1 << 20 and out["util"]
    assert out["fft"] == "npu" and out["amp"] and out["snapshot"]
    assert out["ctx"] == {"meta": ["meta", "meta"], "npu": ["npu", "npu"], "cuda": ["npu", "npu"]}
    assert out["restored"] == [True, "torch"]


def test_profiler_writes_torch_npus_output_folder(npu, tmp_path, monkeypatch):
    import torch_npu

    model = torch.nn.Linear(8, 8).npu()

    def run(activities=None, **kw):
        worker = f"w{len(list(tmp_path.iterdir()))}"
        handler = torch_npu.profiler.tensorboard_trace_handler(str(tmp_path), worker_name=worker)
        with torch_npu.profiler.profile(activities=activities, on_trace_ready=handler, **kw) as prof:
            model(torch.randn(4, 8).npu()).sum().backward()
            prof.add_metadata("k", "v")
            prof.add_metadata_json("j", "[1, 2]")
            prof.step()
        (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith(worker + "_") and p.name.endswith("_ascend_pt")]
        return folder

    folder = run(profile_memory=True)
    out = folder / "ASCEND_PROFILER_OUTPUT"
    names = {p.name for p in out.iterdir()}
    assert {"trace_view.json", "operator_details.csv", "kernel_details.csv", "task_time.csv",
            "operator_memory.csv", "memory_record.csv"} <= names
    assert "aten::addmm" in (out / "operator_details.csv").read_text()
    meta = __import__("json").loads((folder / "profiler_metadata.json").read_text())
    assert meta["k"] == "v" and meta["j"] == [1, 2]
    cpu_only = run(activities=[torch_npu.profiler.ProfilerActivity.CPU]) / "ASCEND_PROFILER_OUTPUT"
    assert (cpu_only / "operator_details.csv").is_file() and not (cpu_only / "kernel_details.csv").exists()
    # raw data under ASCEND_WORK_PATH, parsed offline
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path / "work"))
    prof = torch_npu.profiler._KinetoProfile()
    prof.start()
    model(torch.randn(4, 8).npu())
    prof.stop()
    torch_npu.profiler.profiler.analyse(str(tmp_path / "work" / "profiling_data"))
    (raw,) = (tmp_path / "work" / "profiling_data").iterdir()
    assert (raw / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").is_file()


def test_streams_carry_torch_npus_identity(npu):
    s = torch.npu.Stream(priority=-1)
    assert s.device_type == 20 and s.device_index == 0
    again = torch.npu.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert again == s and hash(again) == hash(s)
    for bad in (dict(stream_id=0, device_index=5, device_type=20),
                dict(stream_id=0, device_index=0, device_type=1), dict(stream_id=-1, device_index=0, device_type=20)):
        with pytest.raises(RuntimeError, match="Stream"):
            torch.npu.Stream(**bad)
    assert torch.npu.current_stream() == torch.npu.default_stream() and torch.npu.default_stream().stream_id == 0
    with torch.npu.stream(s):
        assert torch.npu.current_stream() == s  # a fresh object per call, as on the card
    assert torch.npu.current_stream() == torch.npu.default_stream()


def test_stream_ids_follow_torch_npus_pools(npu):
    import torch_npu

    # the class in bits 5+ (3 normal pool, 4 high priority, 2 sync-launch), the index in bits 0-4
    assert {torch.npu.Stream(priority=p).stream_id >> 5 for p in (0, 1)} == {3}
    assert {torch.npu.Stream(priority=p).stream_id >> 5 for p in (-1, -2)} == {4}
    assert len({torch.npu.Stream().stream_id for _ in range(32)}) == 32  # round robin over a pool of 32
    sync = torch.npu.Stream(is_sync_launch=True)
    assert sync.stream_id >> 5 == 2 and torch.npu.SyncLaunchStream().stream_id >> 5 == 2
    # ids the card never handed out are rejected when a stream is rebuilt, with the card's message
    for bad_id, message in ((99999, "I didn't recognize the stream type"), (sync.stream_id + 4, "Invalid sync launch"),
                            (1, "non-zero index")):
        with pytest.raises(RuntimeError, match=message) as info:
            torch.npu.Stream(stream_id=bad_id, device_index=0, device_type=20)
        assert "ERR00001 PTA invalid parameter" in str(info.value)
    # every stream has its own handle, the same for a rebuilt stream; the current one is torch.accelerator's
    user = torch.npu.Stream()
    assert user != torch.npu.current_stream() and user.npu_stream not in (0, torch.npu.default_stream().npu_stream)
    with torch.npu.stream(user):
        assert torch.accelerator.current_stream() == user
        assert torch_npu._C._npu_getCurrentRawStream(0) == user.npu_stream
    assert torch.npu.current_stream() == torch.npu.default_stream()


def test_external_streams_on_emulated_runtime_streams(npu):
    import torch_npu

    rt = torch_npu.npu.npurt()
    handle = ctypes.c_void_p(0)
    assert rt.npuStreamCreate(ctypes.addressof(handle)) == 0 and handle.value
    ext = torch_npu.npu.ExternalStream(handle.value)
    assert ext.npu_stream == handle.value and ext == torch_npu.npu.ExternalStream(handle.value)
    assert isinstance(ext, torch_npu.npu.Stream) and ext.stream_id & (1 << 30)
    with torch.npu.stream(ext):  # ops run while it is current
        x = torch.ones(4, device="npu")
        assert torch.npu.current_stream().npu_stream == handle.value and (x + 1).sum().item() == 8
    # what the card leaves to the stream's owner is rejected with its messages
    with pytest.raises(RuntimeError, match="NPUStream::synchronize"):
        ext.synchronize()
    with pytest.raises(RuntimeError, match="Cannot query"):
        ext.query()
    with pytest.raises(RuntimeError, match="not supported in record_stream"):
        x.record_stream(ext)
    with pytest.raises(RuntimeError, match="not supported in NPUEvent::record"):
        torch.npu.Event().record(ext)
    with pytest.raises(RuntimeError, match="Priority was explicitly set"):
        torch_npu.npu.ExternalStream(handle.value, priority=-1)
    assert rt.npuStreamDestroy(handle.value) == 0 and rt.npuStreamDestroy(handle.value) != 0


def test_torch_event_on_npu_times_work(npu):
    start, end = torch.Event(enable_timing=True), torch.Event(enable_timing=True)  # the C++ guard's events
    start.record()
    torch.randn(200, 200, device="npu") @ torch.randn(200, 200, device="npu")
    end.record()
    assert start.elapsed_time(end) > 0
    with pytest.raises(ValueError, match="enable_timing=True"):
        torch.Event().elapsed_time(torch.Event())


def test_manual_seed_reseeds_the_npu_and_its_state_leads_with_the_seed(npu):
    torch.manual_seed(3)
    cpu_state = torch.get_rng_state()
    assert int(torch.npu.get_rng_state()[0]) == 3 == int(cpu_state[0])  # the card's (seed, offset) layout first
    torch.npu.manual_seed(2)
    assert int(torch.npu.get_rng_state()[0]) == 2 and torch.equal(torch.get_rng_state(), cpu_state)
    state = torch.npu.get_rng_state()
    first = torch.randn(4, device="npu")
    torch.npu.set_rng_state(state)
    assert torch.equal(torch.randn(4, device="npu"), first)
    torch.npu.set_rng_state(state[:16])  # a state saved on a card: its seed comes back
    assert torch.npu.initial_seed() == 2
    with pytest.raises(RuntimeError, match="wrong size"):
        torch.npu.set_rng_state(state[:20])


def test_contiguous_rejects_formats_the_card_cannot_copy_to(npu):
    x = torch.randn(1, 16, 5, 5).npu()
    x.set_(x.untyped_storage(), 0, x.size(), (20, 25, 5, 1))  # still contiguous: size[0] is 1
    assert x.contiguous() is x and x.contiguous(memory_format=torch.preserve_format) is x
    for fmt in (torch.channels_last, torch.channels_last_3d):
        with pytest.raises(RuntimeError, match="ERR01007 OPS feature not supported"):
            x.contiguous(memory_format=fmt)
    cl = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last).npu()
    assert cl.contiguous(memory_format=torch.channels_last) is cl  # already in the format: accepted
    y = torch.randn(2, 3, 4, 4, device="npu", requires_grad=True)
    y.permute(0, 2, 1, 3).contiguous().sum().backward()  # the plain format still copies, with gradients
    assert torch.equal(y.grad, torch.ones_like(y))


def test_accelerator_device_functions_are_torchs_over_the_guard(npu):
    with pytest.raises(ValueError, match="doesn't match the current accelerator"):
        torch.accelerator.set_device_index("cpu")
    with torch.accelerator.device_index(0):
        assert torch.accelerator.current_device_index() == torch.npu.current_device() == 0
    with pytest.raises(RuntimeError, match="Invalid device ordinal"):
        torch.accelerator.set_device_index(100)


def test_the_card_rejects_what_the_emulator_now_rejects(npu, monkeypatch):
    with pytest.raises(RuntimeError, match="expected one of 0,1,2"):
        torch.npu.set_sync_debug_mode(3)
    with pytest.raises(OverflowError, match="can't convert negative value to unsigned int"):
        torch.npu.set_op_timeout_ms(-1)
    with pytest.raises(OverflowError, match="Overflow when unpacking"):
        torch.npu.set_op_timeout_ms(2**32)
    with pytest.raises(AssertionError, match="Invalid peer device id"):
        torch.npu.can_device_access_peer(0, -1)
    assert torch.npu.can_device_access_peer(0, 1) and not torch.npu.can_device_access_peer(0, 0)
    assert torch.npu.get_device_properties(0).major is None and torch.npu.get_device_capability() is None
    monkeypatch.setenv("TORCH_NPU_DEVICE_CAPABILITY", "9.0")
    assert torch.npu.get_device_capability(0) == (9, 0)


def test_custom_ops_and_device_answers_as_on_the_card(npu):
    import torch_npu

    x = torch_npu.empty_with_format((2, 3), dtype=torch.float32, device="npu")
    assert x.device.type == "npu" and x.shape == (2, 3) and torch_npu.get_storage_size(x) == 6
    assert torch_npu.get_storage_size(torch.ones(4, 4, device="npu")[1]) == 16
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 8, 4, dtype=torch.float16) for _ in range(3))
    ref = torch.softmax((q @ k.transpose(2, 3)).float() * 0.5, -1).half() @ v
    out = torch_npu.npu_prompt_flash_attention(q.npu(), k.npu(), v.npu(), num_heads=2, input_layout="BNSD",
                                               scale_value=0.5)
    torch.testing.assert_close(out.cpu(), ref, rtol=2e-3, atol=2e-3)
    with pytest.raises(ValueError, match="Expected a npu device, but got: cpu"):
        torch.npu.synchronize("cpu")
    uid = torch.npu.get_device_properties(1).uuid
    assert len(str(uid)) == 36 and uid != torch.npu.get_device_properties(0).uuid
    assert torch.npu.FloatTensor().shape == (0,)
    assert isinstance(torch.accelerator.get_device_capability()["supported_dtypes"], set)


# -- item 3 in CI: the key patterns of transformers' Trainer and timm's train.py on the npu
#    (benchmarks/third_party_npu.py runs the libraries' own entry points)

def test_tiny_llama_and_timm_resnet_train_on_the_npu_like_on_cpu(npu):
    import timm
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    cpu_model = LlamaForCausalLM(cfg)
    npu_model = LlamaForCausalLM(cfg)
    npu_model.load_state_dict(cpu_model.state_dict())
    npu_model.to("npu")
    cpu_loss = cpu_model(input_ids=ids, labels=ids).loss
    torch.npu.reset_peak_memory_stats()
    npu_loss = npu_model(input_ids=ids.npu(), labels=ids.npu()).loss
    torch.testing.assert_close(npu_loss.cpu(), cpu_loss, rtol=1e-5, atol=1e-5)
    scaler = torch.npu.amp.GradScaler()
    with torch.autocast("npu", dtype=torch.float16):  # Trainer(fp16=True) through accelerate
        out = npu_model(input_ids=ids.npu(), labels=ids.npu())
    assert out.logits.dtype == torch.float16
    scaler.scale(out.loss).backward()
    assert npu_model.lm_head.weight.grad.device.type == "npu" and torch.npu.max_memory_allocated() > 0
    assert abs(out.loss.item() - cpu_loss.item()) < 5e-2

    net = timm.create_model("resnet18", num_classes=2)
    x = torch.randn(2, 3, 32, 32)
    ref = net(x)
    net_npu = timm.create_model("resnet18", num_classes=2)
    net_npu.load_state_dict(net.state_dict())
    net_npu = net_npu.to("npu").to(memory_format=torch.channels_last)  # timm train.py --channels-last
    got = net_npu(x.npu().to(memory_format=torch.channels_last))
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-4, atol=1e-4)


def test_stream_and_event_reprs_name_torch_npu(npu):
    event = torch.npu.Event()
    torch.npu.current_stream().record_event(event)
    assert "torch_npu.npu.Event" in repr(event) and "torch_npu.npu.Stream" in repr(torch.npu.current_stream())


@pytest.mark.slow
def test_suite_harness_counts_each_file_and_hidden_tests(tmp_path):
    """tools/torch_npu_suite.py on a tiny repository: per-file counts from JUnit, a file that does not
    import counts its tests as failed, reasons come from the reasons table, the source is read at a commit."""
    repo = tmp_path / "repo"
    (repo / "test" / "npu").mkdir(parents=True)
    (repo / "test" / "npu" / "test_a.py").write_text(
        "import torch\nfrom torch_npu.testing.testcase import TestCase\n\n"
        "class T(TestCase):\n    def test_ok(self):\n"
        "        self.assertEqual(torch.ones(1).npu().device.type, 'npu')\n\n"
        "    def test_bad(self):\n        raise ValueError('boom')\n")
    (repo / "test" / "npu" / "test_b.py").write_text(
        "import torch_npu.no_such_module\n\ndef test_one():\n    pass\n\ndef test_two():\n    pass\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (repo / "test" / "npu" / "test_a.py").write_text("raise SystemExit('not the pinned commit')\n")  # worktree ignored
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
    try:
        import torch_npu_suite as suite
    finally:
        sys.path.pop(0)
    reasons = tmp_path / "reasons.json"
    reasons.write_text('{"test/npu/test_a.py::T::test_bad": "a reason of ours"}')
    suite.REASONS_FILE = reasons
    out = tmp_path / "out"
    assert suite.main([str(repo), "--commit", commit, "--out", str(out), "--devices", "1",
                       "--file", "test/npu/test_a.py", "--file", "test/npu/test_b.py"]) == 0
    data = __import__("json").loads((out / "torch_npu_suite.json").read_text())
    a, b = data["files"]
    assert (a["passed"], a["failed"], a["imported"]) == (1, 1, True)
    assert (b["passed"], b["failed"], b["imported"]) == (0, 2, False)
    md = (out / "torch_npu_suite.md").read_text()
    assert "pass rate: 1/4 = 25.0%" in md and "a reason of ours" in md and "No module named" in md


def test_npu_runtime_initialises_on_first_use_and_refuses_a_forked_child(tmp_path):
    """torch_npu's process model: ASCEND_RT_VISIBLE_DEVICES is read until the first use of the npu (within
    the emulated card count), fixed afterwards; a child forked after that cannot touch the npu (the host
    memory would survive the fork, so without this the child silently worked where the card refuses)."""
    script = tmp_path / "t.py"
    script.write_text(
        "import json, multiprocessing, os, torch, torch_npu\n"
        "out = {'init0': torch.npu.is_initialized(), 'n0': torch.npu.device_count()}\n"
        "os.environ['ASCEND_RT_VISIBLE_DEVICES'] = '1'\n"
        "out['one'] = torch.npu.device_count()\n"
        "os.environ['ASCEND_RT_VISIBLE_DEVICES'] = '0,5'\n"   # 5 is past the emulated cards: trimmed
        "out['trim'] = torch.npu.device_count()\n"
        "torch.empty(2, device='npu')\n"
        "os.environ['ASCEND_RT_VISIBLE_DEVICES'] = '0,1'\n"
        "out['init1'] = torch.npu.is_initialized()\n"
        "out['fixed'] = [torch.npu.device_count(), torch_npu._C._npu_getDeviceCount()]\n"
        "def child(q):\n"
        "    try:\n"
        "        torch.tensor([2]).to('npu:0')\n"
        "        q.put('used the npu')\n"
        "    except RuntimeError as exc:\n"
        "        q.put([str(exc), torch.npu._is_in_bad_fork()])\n"
        "q = multiprocessing.get_context('fork').Queue()\n"
        "p = multiprocessing.get_context('fork').Process(target=child, args=(q,))\n"
        "p.start(); p.join(120)\n"
        "out['child'] = q.get(timeout=5)\n"
        "print(json.dumps(out))\n")
    env = dict(os.environ, TORCHPORT_EMULATE="npu:2", OMP_NUM_THREADS="1")
    env.pop("ASCEND_RT_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = __import__("json").loads(proc.stdout.strip().splitlines()[-1])
    assert out["init0"] is False and out["n0"] == 2 and out["one"] == 1 and out["trim"] == 1
    assert out["init1"] is True and out["fixed"] == [1, 1]
    assert out["child"] == ["Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, "
                            "you must use the 'spawn' start method", True]


def test_device_count_follows_a_reconfigured_card_count_after_first_use():
    # the initialised runtime's count is fixed against ASCEND_RT_VISIBLE_DEVICES changes, not against the
    # emulator being reconfigured (emulated(devices=N) inside an installed session)
    with emulate.emulated(devices=1):
        torch.empty(1, device="npu")
        assert torch.npu.is_initialized() and torch.npu.device_count() == 1
        with emulate.emulated(devices=3):
            assert torch.npu.device_count() == 3 and torch.empty(1, device="npu:2").device.index == 2
        assert torch.npu.device_count() == 1


def test_device_and_stream_core_limits_are_stored_and_checked_like_the_cards(npu, monkeypatch):
    monkeypatch.setattr(torch.npu.set_device_limit, "called", False)
    monkeypatch.setattr(torch.npu, "_device_limits", {})
    for bad in ("0", 0.0, None, True):
        with pytest.raises(TypeError, match="device must be an int"):
            torch.npu.get_device_limit(bad)
        with pytest.raises(TypeError, match="device must be an int"):
            torch.npu.set_device_limit(bad)
        torch.npu.set_device_limit.called = False
    assert torch.npu.get_device_limit(1) == {"cube_core_num": 20, "vector_core_num": 40}  # the 910B3's cores
    with pytest.raises(RuntimeError, match=r"cube_core_num must be an int in \[1, 20\]"):
        torch.npu.set_device_limit(1, cube_num=21)
    torch.npu.set_device_limit.called = False
    torch.npu.set_device_limit(1, cube_num=8)
    assert torch.npu.get_device_limit(1) == {"cube_core_num": 8, "vector_core_num": 40}
    assert torch.npu.get_device_limit(0) == {"cube_core_num": 20, "vector_core_num": 40}
    with pytest.raises(RuntimeError, match="only set this interface once"):
        torch.npu.set_device_limit(0, cube_num=4)
    s = torch.npu.Stream(device=1)
    torch.npu.set_stream_limit(s, vector_num=10)
    assert torch.npu.get_stream_limit(s) == {"cube_core_num": 8, "vector_core_num": 10}
    torch.npu.reset_stream_limit(s)
    assert torch.npu.get_stream_limit(s) == torch.npu.get_device_limit(1)
    with pytest.raises(AssertionError, match="stream should be torch_npu.npu.Stream"):
        torch.npu.get_stream_limit(object())


def test_blas_handle_and_aclnn_version_answer_as_torch_npu_does(npu):
    import torch_npu

    with pytest.warns(UserWarning, match="NPU does not use blas handle"):
        assert torch_npu.npu.current_blas_handle() is None
    with pytest.warns(UserWarning, match="aclnn.version isn't implemented"):
        assert torch_npu.npu.aclnn.version() is None


def test_erase_stream_checks_its_arguments_like_the_card(npu):
    import torch_npu

    t = torch.ones(8, device="npu")
    s = torch.npu.Stream()
    t.record_stream(s)
    torch_npu.erase_stream(t, s)  # nothing cached to erase: memory goes back to the host at once
    with pytest.raises(TypeError, match="stream should be torch_npu.npu.Stream"):
        torch_npu.erase_stream(t, 3)
    with pytest.raises(TypeError, match="tensor should be torch.Tensor"):
        torch_npu.erase_stream([t], s)


def test_the_current_stream_is_per_thread_as_on_the_card(npu):
    import threading

    s = torch.npu.Stream()
    assert s != torch.npu.default_stream()
    seen = []
    with torch.npu.stream(s):
        t = threading.Thread(target=lambda: seen.append(torch.npu.current_stream()))
        t.start()
        t.join()
        assert torch.npu.current_stream() == s
    assert seen == [torch.npu.default_stream()]
