"""Checkpoints like hardware: storage location ``npu:N``, weights_only loads, loads without the emulator."""

from __future__ import annotations

import io
import zipfile

import pytest
import torch

import torchport.emulate as emulate
from emu_helpers import run_python


def _pickle_bytes(buf: io.BytesIO) -> bytes:
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        name = next(n for n in z.namelist() if n.endswith("data.pkl"))
        return z.read(name)


def test_save_records_npu_location_and_loads_weights_only(npu2, tmp_path):
    base = torch.arange(12.0, device="npu:1")
    state = {"a": torch.randn(3, device="npu:0"), "b": base, "b_view": base[2:6], "c": torch.ones(2)}
    buf = io.BytesIO()
    torch.save(state, buf)
    pkl = _pickle_bytes(buf)
    assert b"npu:0" in pkl and b"npu:1" in pkl and b"cpu" in pkl
    assert b"torchport" not in pkl and b"NpuTensor" not in pkl  # nothing emulator-specific in the file
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    assert loaded["a"].device == torch.device("npu", 0) and loaded["b"].device == torch.device("npu", 1)
    assert loaded["c"].device.type == "cpu"
    assert torch.equal(loaded["b"].cpu(), base.cpu()) and torch.equal(loaded["a"].cpu(), state["a"].cpu())
    loaded["b_view"].fill_(-1.0)  # the view still shares storage with its base
    assert loaded["b"].cpu()[2:6].tolist() == [-1.0] * 4
    buf.seek(0)
    on_cpu = torch.load(buf, weights_only=True, map_location="cpu")
    assert all(v.device.type == "cpu" for v in on_cpu.values())
    buf.seek(0)
    moved = torch.load(buf, weights_only=True, map_location={"npu:1": "npu:0"})
    assert moved["b"].device == torch.device("npu", 0)


def test_model_optimizer_scaler_round_trip(emulated_npu, tmp_path):
    model = torch.nn.Linear(4, 2).npu()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(3, 4, device="npu")).sum().backward()
    opt.step()
    scaler = torch.npu.amp.GradScaler()
    scaler.scale(torch.ones((), device="npu"))
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "scaler": scaler.state_dict()}, path)
    ck = torch.load(path, weights_only=True)
    fresh = torch.nn.Linear(4, 2).npu()
    fresh.load_state_dict(ck["model"])
    assert torch.equal(fresh.weight.detach().cpu(), model.weight.detach().cpu())
    opt2 = torch.optim.Adam(fresh.parameters())
    opt2.load_state_dict(ck["opt"])
    assert opt2.state_dict()["state"][0]["exp_avg"].device.type == "npu"
    assert ck["scaler"]["dynamic"] is True


def test_load_without_emulator_fails_like_real_npu_checkpoint(emulated_npu, tmp_path):
    path = tmp_path / "npu.pt"
    torch.save({"w": torch.ones(3, device="npu")}, path)
    code = (
        "import torch, sys\n"
        f"p = {str(path)!r}\n"
        "try:\n"
        "    torch.load(p, weights_only=True)\n"
        "    print('LOADED')\n"
        "except Exception as e:\n"
        "    print('ERROR', e)\n"
        "print('CPU', torch.load(p, weights_only=True, map_location='cpu')['w'].tolist())\n"
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED" not in proc.stdout
    assert "npu:0" in proc.stdout and "ERROR" in proc.stdout  # torch: cannot restore location 'npu:0'
    assert "CPU [1.0, 1.0, 1.0]" in proc.stdout


def test_load_after_uninstall_asks_for_map_location(tmp_path):
    path = tmp_path / "npu.pt"
    with emulate.emulated():
        torch.save({"w": torch.ones(2, device="npu")}, path)
    with pytest.raises(RuntimeError, match="map_location"):
        torch.load(path, weights_only=True)
    assert torch.load(path, weights_only=True, map_location="cpu")["w"].tolist() == [1.0, 1.0]
    with emulate.emulated():
        assert torch.load(path, weights_only=True)["w"].device.type == "npu"


def test_deepcopy_keeps_device(emulated_npu):
    import copy

    model = torch.nn.Linear(3, 3).npu()
    clone = copy.deepcopy(model)
    assert clone.weight.device.type == "npu" and clone.weight is not model.weight
    with torch.no_grad():
        clone.weight.zero_()
    assert not torch.equal(model.weight.detach().cpu(), clone.weight.detach().cpu())
