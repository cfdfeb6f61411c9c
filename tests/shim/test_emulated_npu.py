"""The shim on the emulated Ascend npu: the accelerator path, exercised without hardware.

Fails (never skips) when ``torchport.emulate`` cannot install an emulated npu: it ships with torchport.
"""

from __future__ import annotations

import json
import re

import pytest
import torch
from shim_helpers import FIXTURE_SCRIPT, require_emulator, fixture_line, run_cli

import torchport.shim as shim


@pytest.fixture(autouse=True)
def _emulator_required():
    require_emulator()


def test_idiom_and_moves_land_on_npu(emulated_npu):
    s = shim.install()
    assert s.target.type == "npu" and not s.cpu_fallback
    device = "cuda" if torch.cuda.is_available() else "cpu"
    assert device == "cuda"
    x = torch.ones(3).to(device)
    m = torch.nn.Linear(3, 2).cuda()
    y = torch.zeros(2, device="cuda:0")
    assert x.device.type == m.weight.device.type == y.device.type == "npu"
    assert torch.cuda.device_count() >= 1
    with torch.autocast("cuda"):
        out = m(x)
    assert out.device.type == "npu"
    assert torch.amp.GradScaler("cuda")._device == "npu"
    assert s.report.records["torch.Tensor.to"].example.endswith("-> npu:0")
    z = y.to("cuda")  # an npu tensor (a subclass with its own .to in the emulator) moved "to cuda" again
    assert z.device.type == "npu" and y.cuda().device.type == "npu"


def test_identity_on_top_of_the_emulator(emulated_npu):
    before = {name: obj for name, obj in vars(torch.cuda).items()}
    tensor_to = torch.Tensor.to
    shim.install()
    shim.uninstall()
    assert torch.Tensor.to is tensor_to
    assert all(vars(torch.cuda).get(k) is v for k, v in before.items())


def test_cuda_script_trains_on_emulated_npu(tmp_path):
    report = tmp_path / "r.json"
    proc = run_cli(["run", "--report-file", str(report), str(FIXTURE_SCRIPT), "--steps", "4",
                    "--checkpoint", str(tmp_path / "c.pt")], env={"TORCHPORT_EMULATE": "npu"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "device: cuda" in proc.stdout  # the idiom chose "cuda" ... which the shim ran on the npu
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    assert len(losses) == 4 and all(v == v for v in losses)
    assert "CPUFallbackWarning" not in proc.stderr
    assert "torchport shim: CUDA calls redirected to npu:0" in proc.stderr  # printed report (text) ...
    doc = json.loads(report.read_text())  # ... and the JSON file
    assert doc["target"] == "npu:0" and doc["cpu_fallback"] is False
    rec = {r["api"]: r for r in doc["redirects"]}
    assert rec["torch.nn.Module.cuda"]["first_call_site"].endswith(f":{fixture_line('model = model.cuda()')}")
    assert rec["torch.Tensor.cuda"]["count"] == 4
