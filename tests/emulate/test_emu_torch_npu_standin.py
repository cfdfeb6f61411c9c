"""The torch_npu stand-in as real Ascend scripts use it, each pattern in a fresh interpreter
(TORCHPORT_EMULATE set, no torchport import in the script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path


def _run(tmp_path: Path, code: str, devices: str = "npu") -> dict:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, TORCHPORT_EMULATE=devices, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_find_spec_and_import_torch_npu_before_torch(tmp_path):
    out = _run(tmp_path, """
        import importlib.util, json, sys
        spec = importlib.util.find_spec("torch_npu")       # how transformers/accelerate detect an NPU
        import torch_npu                                   # before torch
        import torch
        soc_attr = torch_npu.npu.utils.get_soc_version()   # attribute access, no submodule import
        import torch_npu.npu.utils as utils
        from torch_npu.npu import amp, memory, random, streams
        x = torch.ones(2, 3).npu()
        y = torch_npu.npu_format_cast(x, 29)
        print(json.dumps({
            "spec": spec is not None and spec.name == "torch_npu", "path": bool(torch_npu.__path__),
            "torch_first_in_modules": "torch" in sys.modules, "npu_is_torch_npu": torch_npu.npu is torch.npu,
            "soc": utils.get_soc_version(), "soc_c": torch_npu._C._npu_get_soc_version(),
            "soc_attr": soc_attr,
            "utils_alias": torch.npu.utils is utils, "fmt": [torch_npu.get_npu_format(x), torch_npu.get_npu_format(y)],
            "equal": torch.equal(x.cpu(), y.cpu()), "name": torch.npu.get_device_name(0),
            "mem": memory.memory_allocated() > 0, "seed": random.initial_seed(),
            "stream": type(streams.Stream()).__name__,
            "fused": type(torch_npu.optim.NpuFusedSGD(torch.nn.Linear(2, 2).npu().parameters(), lr=0.1)).__name__,
        }))
    """)
    assert out["spec"] and out["path"] and out["torch_first_in_modules"] and out["npu_is_torch_npu"]
    assert out["soc"] == out["soc_c"] == out["soc_attr"] == 223 and out["utils_alias"]
    assert out["fmt"] == [2, 29] and out["equal"]
    assert out["name"].startswith("Ascend910B3") and out["mem"] and out["stream"] == "Stream"
    assert out["fused"] == "NpuFusedSGD"


def test_torch_npu_absent_without_emulation(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import importlib.util; print(importlib.util.find_spec('torch_npu'))\n")
    env = {k: v for k, v in os.environ.items() if k != "TORCHPORT_EMULATE"}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "None", proc.stderr[-2000:]


def test_transfer_to_npu_on_a_cuda_only_script(tmp_path):
    out = _run(tmp_path, """
        import json, warnings
        import torch
        import torch_npu
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from torch_npu.contrib import transfer_to_npu
        import torch.distributed as dist

        # an unmodified CUDA training snippet
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torch.nn.Linear(4, 2).cuda()
        x = torch.randn(8, 4, device="cuda:0")
        scaler = torch.cuda.amp.GradScaler()
        with torch.cuda.amp.autocast():
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(torch.optim.SGD(model.parameters(), lr=0.1))
        scripted = torch.jit.script(model)
        import torchport.shim
        report = torchport.shim.report()
        print(json.dumps({
            "device": str(device), "param": str(next(model.parameters()).device), "x": str(x.device),
            "is_cuda": x.is_cuda, "nccl": dist.is_nccl_available(), "jit_identity": scripted is model,
            "jit_warned": any("torch.jit.script" in str(w.message) for w in caught),
            # legacy types check dtype and device, as on hardware: an npu double tensor is not a FloatTensor
            "double": isinstance(torch.cuda.DoubleTensor(2), torch.npu.DoubleTensor)
                      and not isinstance(torch.cuda.DoubleTensor(2), torch.npu.FloatTensor),
            "gen": str(torch.Generator("cuda").device),
            "redirects": sorted(report.records),
            "loss": f"{loss:.4f}",
        }))
    """)
    assert out["device"] == "cuda" and out["param"] == "npu:0" and out["x"] == "npu:0"
    assert out["is_cuda"] is True and out["nccl"] is True
    assert out["jit_identity"] and out["jit_warned"] and out["double"] and out["gen"].startswith("npu")
    assert "torch.Tensor.is_cuda" in out["redirects"] or "torch.nn.Module.cuda" in out["redirects"]
    assert float(out["loss"]) >= 0


def test_profiler_writes_a_trace(tmp_path):
    out = _run(tmp_path, """
        import glob, json, os
        import torch, torch_npu
        cfg = torch_npu.profiler._ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level1,
                                                     aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization)
        model = torch.nn.Linear(8, 8).npu()
        with torch_npu.profiler.profile(
                activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
                schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=1, repeat=1, skip_first=1),
                on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./prof"),
                record_shapes=True, experimental_config=cfg) as prof:
            for _ in range(3):
                model(torch.randn(4, 8).npu()).sum().backward()
                prof.step()
        files = glob.glob("prof/*_ascend_pt/*.pt.trace.json")
        events = json.load(open(files[0]))["traceEvents"] if files else []
        print(json.dumps({"files": len(files), "ops": sum(1 for e in events if "aten::" in str(e.get("name")))}))
    """)
    assert out["files"] == 1 and out["ops"] > 5
