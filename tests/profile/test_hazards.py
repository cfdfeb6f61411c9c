"""The hazard report (issue 34 item 3): host syncs, CPU-fallback operators, new shapes, float64/int64 work, each
at the user's line with its fix; text / JSON / HTML. The script below seeds one hazard of each kind on a known line."""

from __future__ import annotations

import json
import runpy

import pytest
import torch

from torchport.profile.hazards import record_hazards, write_hazards

SCRIPT = '''\
import numpy as np, torch
torch.manual_seed(0)
dev = DEVICE
m = torch.nn.Linear(8, 2).to(dev)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(4 + step, 8, device=dev)
    loss = m(x).square().mean()
    opt.zero_grad(); loss.backward(); opt.step()
    seen = loss.item()
    if (loss < -1):  # <b>never</b>
        break
    idx = torch.nonzero(x[:, 0] > 0)
    w = torch.from_numpy(np.ones(3)).to(dev) * 2
    k = torch.arange(10, device=dev) * 3
    v = torch.mode(x[:, 0]).values
    host = x.cpu()
'''
LINES = {"item": 10, "control-flow": 11, "dynamic-shape": 13, "float64": 14, "int64": 15, "cpu-fallback": 16,
         "copy-to-host": 17, "shapes": 8}


def _run(tmp_path, device):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT.replace("DEVICE", repr(device)))
    with record_hazards(user_paths=[str(path)], device=device) as rec:
        runpy.run_path(str(path), run_name="__main__")
    return rec.report()


def _find(report, flavour):
    hits = [h for h in report.hazards if h.flavour == flavour]
    assert hits, f"no {flavour} hazard in:\n{report.to_text()}"
    return hits


def _line(h):
    return int(h.site.rsplit(":", 1)[1])


def test_each_kind_at_its_line_with_its_fix_on_cpu(tmp_path):
    r = _run(tmp_path, "cpu")
    assert r.steps == 3
    for flavour in ("item", "control-flow", "dynamic-shape", "float64", "int64", "cpu-fallback", "shapes"):
        hs = _find(r, flavour)
        assert LINES[flavour] in {_line(h) for h in hs}, (flavour, [h.site for h in hs])
        assert all(h.fix for h in hs)
    item = next(h for h in _find(r, "item") if _line(h) == LINES["item"])
    assert item.count == 3 and item.op == "aten::_local_scalar_dense" and item.code == "seen = loss.item()"
    assert next(h for h in _find(r, "cpu-fallback")).op == "aten::mode"          # torch_npu has no NPU kernel
    assert 0 < r.fallback_share() < 1
    assert not [h for h in r.hazards if h.flavour == "copy-to-host"]             # .cpu() of a cpu tensor: no op
    shapes = next(h for h in _find(r, "shapes") if _line(h) == LINES["shapes"])
    assert shapes.shapes >= 2 and "aten::addmm" in shapes.op                   # batch 5 and 6 after batch 4
    assert {h.op for h in _find(r, "int64") if _line(h) == LINES["int64"]} == {"aten::mul"}
    text = r.to_text()
    assert "host syncs: " in text and "fix: keep the value on the device" in text and "top lines:" in text


def test_json_and_html_reports(tmp_path):
    r = _run(tmp_path, "cpu")
    write_hazards(r, str(tmp_path / "h.json"))
    write_hazards(r, str(tmp_path / "h.html"))
    d = json.loads((tmp_path / "h.json").read_text())
    assert d["format"] == "torchport-hazards/1" and d["steps"] == 3
    assert d["summary"]["host-sync"] == 3.0                       # item, `if tensor`, nonzero: once per step each
    assert d["top_lines"][0]["site"].endswith((".py:8", ".py:9"))  # forward / backward: the new shapes
    assert {h["kind"] for h in d["hazards"]} == {"host-sync", "cpu-fallback", "shapes", "float64", "int64"}
    page = (tmp_path / "h.html").read_text()
    assert "&lt;b&gt;never&lt;/b&gt;" in page and "<b>never</b>" not in page     # embedded code is escaped


def test_emulated_npu_sees_copies_to_host_and_injected_fallbacks(tmp_path, emulated_npu):
    import torchport.emulate as emulate

    emulate.set_fallback_ops(["aten.nonzero"])
    try:
        r = _run(tmp_path, "npu")
    finally:
        emulate.clear_fallback_ops()
    copies = _find(r, "copy-to-host")
    assert LINES["copy-to-host"] in {_line(h) for h in copies}
    assert {"aten::nonzero", "aten::mode"} <= {h.op for h in _find(r, "cpu-fallback")}
    # backward runs on autograd's npu thread (no user frame there): attributed to the `loss.backward()` line
    assert not [h.site for h in r.hazards if "(library)" in h.site]
    assert 9 in {_line(h) for h in _find(r, "shapes")}


def test_torchport_run_hazards(tmp_path):
    from torchport.shim.runner import RunConfig, run

    path = tmp_path / "script.py"
    path.write_text(SCRIPT.replace("DEVICE", "'cpu'"))
    out = tmp_path / "out" / "hazards.json"
    assert run(RunConfig(target=str(path), device="cpu", report="none", hazards=str(out))) == 0
    d = json.loads(out.read_text())
    assert any(h["flavour"] == "item" and h["site"].endswith(f"script.py:{LINES['item']}") for h in d["hazards"])
    (tmp_path / "file").write_text("")
    assert run(RunConfig(target=str(path), device="cpu", report="none", hazards=str(tmp_path / "file" / "h.json"))) == 6
