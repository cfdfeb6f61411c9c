"""Honest stand-ins: what the calls that used to die with "no NVIDIA driver" now do, checked against the target
itself (the emulated npu's allocator, streams and snapshots; the CPU's documented answers), and the CUDA-call
fixture under the shim on both targets."""

from __future__ import annotations

import importlib.util
import io
import json
import pickle
import re
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import torch
from shim_helpers import require_emulator, run_cli

import torchport.shim as shim
from torchport.shim import RefusedCall

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cuda_surface_calls.py"
#: the checks of the fixture that are refused on purpose, per target (everything else must pass)
REFUSED = {"cpu": {"temperature", "record_memory_history", "current_blas_handle"}, "npu": {"temperature"}}


def _fixture_results() -> dict[str, dict]:
    """Run the fixture's checks in this process (its file is user code) and parse its JSON lines."""
    spec = importlib.util.spec_from_file_location("cuda_surface_calls", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    with redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module.main(set())
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return {d["call"]: d for d in lines if "call" in d}


def _check_fixture(target: str, results: dict[str, dict]) -> None:
    assert len(results) >= 40
    failed = {name: d["error"] for name, d in results.items() if not d["ok"]}
    assert set(failed) == REFUSED[target], failed
    assert all(e.startswith("RefusedCall: ") for e in failed.values()), failed


def test_fixture_on_the_cpu_target():
    shim.install("cpu")
    results = _fixture_results()
    _check_fixture("cpu", results)
    assert results["memory_fraction"]["value"] == 1.0            # the limit in force: none
    assert results["memory_fraction_oom"]["value"].startswith("not enforced")
    assert results["amp_custom_fwd"]["value"] == "torch.float32"  # cast_inputs ran the region in fp32 (not bf16)
    assert results["nvtx"]["value"] == 0 and results["legacy_storage_type"]["value"] == [4, "cpu"]


def test_fixture_on_the_emulated_npu(emulated_npu):
    require_emulator()
    shim.install()
    results = _fixture_results()
    _check_fixture("npu", results)
    assert results["memory_fraction"]["value"] == 0.5
    assert results["memory_fraction_oom"]["value"] == "OutOfMemoryError caught"
    assert results["amp_custom_fwd"]["value"] == "torch.float32"  # not fp16: custom_fwd took the npu's autocast
    assert results["legacy_storage_type"]["value"] == [4, "npu"] and results["legacy_tensor_type"]["value"] == "npu"
    assert results["get_device_name"]["value"] == torch.npu.get_device_name(0)


def test_npu_stand_ins_act_on_the_target(emulated_npu, tmp_path):
    require_emulator()
    shim.install()
    # the fraction lives in the target's allocator, which enforces it
    torch.cuda.set_per_process_memory_fraction(0.001)
    try:
        assert torch.npu.get_per_process_memory_fraction() == pytest.approx(0.001)
        with pytest.raises(torch.cuda.OutOfMemoryError, match="out of memory"):
            torch.empty(1 << 27, dtype=torch.uint8, device="cuda")
        torch.empty(1 << 10, dtype=torch.uint8, device="cuda")   # below the limit: fine
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    # streams: the target itself sees the stream the CUDA code selected
    s = torch.cuda.Stream()
    default = torch.npu.current_stream()
    with torch.cuda.StreamContext(s):
        assert torch.npu.current_stream() == s != default
    assert torch.npu.current_stream() == default
    torch.cuda.set_stream(s)
    assert torch.npu.current_stream() == s
    torch.cuda.set_stream(default)
    # snapshots come from the target allocator: the block just allocated is one of its segments
    torch.cuda.memory._record_memory_history(max_entries=100)
    block = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
    snap = torch.cuda.memory._snapshot()
    assert any(seg["total_size"] >= 3 << 20 for seg in snap["segments"]), snap["segments"]
    torch.cuda.memory._dump_snapshot(str(tmp_path / "s.pickle"))
    with open(tmp_path / "s.pickle", "rb") as f:
        assert sorted(pickle.load(f)) == sorted(torch.npu.memory._snapshot())
    del block
    torch.cuda.memory._record_memory_history(enabled=None)
    # the backend's own answers
    assert torch.cuda.utilization() == torch.npu.utilization()
    assert torch.cuda.can_device_access_peer(0, 0) is torch.npu.can_device_access_peer(0, 0)
    torch.cuda.init()
    assert torch.npu.is_initialized() and torch.cuda.is_initialized()
    assert torch.cuda.default_generators[0] is torch.npu.default_generators[0]
    assert torch.cuda.memory.memory_allocated is torch.cuda.memory_allocated   # one stand-in, both owners


def test_cpu_stand_ins_are_documented_answers():
    shim.install("cpu")
    with pytest.raises(TypeError, match="must be `float`"):
        torch.cuda.set_per_process_memory_fraction(1)          # torch.cuda's own check
    with pytest.warns(UserWarning, match="not enforced on cpu") as caught:
        torch.cuda.set_per_process_memory_fraction(0.25)
    assert caught[0].filename == __file__                     # attributed to the caller, not to the shim
    assert torch.cuda.get_per_process_memory_fraction() == 1.0
    assert any("not enforced" in n for n in shim.report().notes)
    torch.cuda.utilization()
    x = torch.randn(128, 128)
    for _ in range(30):
        x = torch.tanh(x @ x)
    busy = torch.cuda.utilization()
    assert 0 < busy <= 100                                     # this process's CPU use since the previous call
    s = torch.cuda.Stream()
    torch.cuda.set_stream(s)
    assert torch.cuda.current_stream() is s
    with torch.cuda.StreamContext(torch.cuda.Stream()) as inner:
        assert torch.cuda.current_stream() is inner
    assert torch.cuda.current_stream() is s
    assert torch.cuda.default_generators[0] is torch.default_generator
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.cuda.can_device_access_peer(1, 0)
    assert torch.cuda.list_gpu_processes().splitlines()[0] == "cpu"
    used = torch.cuda.device_memory_used()
    free, total = torch.cuda.mem_get_info()
    assert 0 < used <= total


def test_refusals_name_the_call_and_the_fix():
    shim.install("cpu")
    for call, fix in ((lambda: torch.cuda.temperature(), "NVML"),
                      (lambda: torch.cuda.memory._record_memory_history(), "torch.profiler.profile"),
                      (lambda: torch.cuda.GreenContext.create(num_sms=8), "set_device_limit"),
                      (lambda: torch.cuda.MemPool(), "drop the pool")):
        with pytest.raises(RefusedCall) as info:
            call()
        message = str(info.value)
        assert "\n" not in message and "cannot run on cpu" in message and fix in message
        assert re.match(r"torch\.cuda\.[\w.]+\(\)", message), message
    torch.cuda.memory._record_memory_history(enabled=None)    # turning history off is always accepted


def test_libraries_and_torch_keep_the_real_functions():
    shim.install("cpu")
    real = vars(torch.cuda)["is_initialized"].__wrapped__
    ns = {"f": torch.cuda.is_initialized}
    exec(compile("answer = f()", torch.cuda.__file__, "exec"), ns)   # torch asking for itself
    assert ns["answer"] is real() and torch.cuda.is_initialized() is True


def test_compat_for_fixed_files_does_what_the_shim_does(emulated_npu):
    """torchport.compat, the one entry point of fixed files, serves the registry's implementations."""
    require_emulator()
    import torchport
    from torchport.shim.surface import fix_expression

    assert shim.active() is None
    torchport.compat.set_per_process_memory_fraction(0.001)
    try:
        with pytest.raises(torch.cuda.OutOfMemoryError):
            torch.empty(1 << 27, dtype=torch.uint8, device="npu")
    finally:
        torchport.compat.set_per_process_memory_fraction(1.0)
    assert isinstance(torchport.compat.Stream(), torch.npu.Stream)
    assert torchport.compat.default_generators[0] is torch.npu.default_generators[0]
    assert torchport.compat.memory._snapshot()["segments"] == torch.npu.memory._snapshot()["segments"]
    assert torchport.compat.backends.cuda.cublas_workspace_size() == 0
    assert torchport.compat.nvtx.range_push("x") == 0 and torchport.compat.nvtx.range_pop() == 0
    with pytest.raises(RefusedCall, match=r"torch\.cuda\.temperature\(\) cannot run on npu:0"):
        torchport.compat.temperature()
    assert shim.standin("torch.backends.cudnn.benchmark") is torch.backends.cudnn.benchmark   # harmless: torch's
    with pytest.raises(KeyError, match="not a decided CUDA name"):
        shim.standin("torch.cuda.no_such_call")
    with pytest.raises(AttributeError, match="has no 'no_such_call'"):
        torchport.compat.no_such_call
    # the callee a rewrite writes: a public torchport name, keeping the call's arguments
    assert fix_expression("torch.cuda.memory._record_memory_history") == "torchport.compat.memory._record_memory_history"
    assert fix_expression("torch.backends.cuda.cufft_plan_cache") == "torchport.compat.backends.cuda.cufft_plan_cache"
    assert fix_expression("torch.backends.cudnn.benchmark") is None   # harmless: left as written


def test_run_prints_a_refusal_in_one_line(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import torch\nx = torch.ones(2).cuda()\nprint('before', x.device)\ntorch.cuda.power_draw()\n")
    proc = run_cli(["run", "--format", "none", "--device", "cpu", str(script)])
    assert proc.returncode == 1
    assert "before cpu" in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert errors == [f"torchport run: error: torch.cuda.power_draw() cannot run on cpu: it reads NVIDIA's NVML, "
                      f"which no other target has: remove the call or guard it with "
                      f"`if torchport.current().type == \"cuda\":` ({script}:4)"], proc.stderr
    assert "Traceback" not in proc.stderr
