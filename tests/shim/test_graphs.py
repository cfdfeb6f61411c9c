"""CUDA graphs under the shim: capture and replay give eager's results on the static tensors, on the CPU (host
capture) and on the emulated npu (its NPUGraph), in process and under ``torchport run`` -- which also passes a
script's ``torch.compile`` through unchanged."""

from __future__ import annotations

import copy
import json

import torch
from shim_helpers import require_emulator, run_cli

import torchport.shim as shim
from torchport.runtime import graphs

_SCRIPT = r'''
import copy, json, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).cuda()
ref = copy.deepcopy(m)
opt, opt_r = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
sx, sy = torch.randn(5, 8, device="cuda"), torch.randn(5, 4, device="cuda")
opt.zero_grad(set_to_none=True)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle()):
    capturing = torch.cuda.is_current_stream_capturing()
    sloss = torch.nn.functional.mse_loss(m(sx), sy)
    sloss.backward()
    opt.step()
opt_r.zero_grad(set_to_none=True); torch.nn.functional.mse_loss(ref(sx), sy).backward(); opt_r.step()
worst = 0.0
for _ in range(2):
    x, y = torch.randn(5, 8, device="cuda"), torch.randn(5, 4, device="cuda")
    sx.copy_(x); sy.copy_(y); g.replay()
    for p in ref.parameters():
        p.grad = None
    le = torch.nn.functional.mse_loss(ref(x), y); le.backward(); opt_r.step()
    worst = max(worst, abs(le.item() - sloss.item()), *((a - b).abs().max().item() for a, b in zip(m.parameters(), ref.parameters())))
f = torch.compile(lambda a, b: torch.relu(a @ b).sum(1))
a, b = torch.randn(4, 3, device="cuda"), torch.randn(3, 5, device="cuda")
compiled = f(a, b)
print(json.dumps({"graph": type(g).__name__, "capturing": capturing, "replay_diff": worst, "device": str(sx.device),
                  "compile_diff": (compiled - torch.relu(a @ b).sum(1)).abs().max().item(), "compile_device": str(compiled.device)}))
'''


def _step(model, opt, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _replay_vs_eager(device: str, graph_cls, graph_ctx) -> float:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(device)
    ref = copy.deepcopy(m)
    opt, opt_r = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    sx, sy = torch.randn(4, 6, device=device), torch.randn(4, 2, device=device)
    g = graph_cls()
    with graph_ctx(g):
        sloss = _step(m, opt, sx, sy)
    _step(ref, opt_r, sx, sy)
    worst = 0.0
    for _ in range(3):
        x, y = torch.randn(4, 6, device=device), torch.randn(4, 2, device=device)
        sx.copy_(x)
        sy.copy_(y)
        before = sloss.item()
        g.replay()
        assert sloss.item() != before   # the static output was recomputed
        for p in ref.parameters():
            p.grad = None
        le = _step(ref, opt_r, x, y)
        worst = max(worst, abs(le.item() - sloss.item()),
                    *((a - b).abs().max().item() for a, b in zip(m.parameters(), ref.parameters())))
    return worst


def test_host_graph_replays_a_whole_training_step():
    assert _replay_vs_eager("cpu", graphs.HostGraph, graphs.graph) < 1e-6
    g = graphs.HostGraph()
    assert not graphs.is_current_stream_capturing()
    with graphs.graph(g):
        assert graphs.is_current_stream_capturing()
    assert len(g) == 0 and g.pool() is not None


def test_cuda_graph_calls_on_the_cpu_under_the_shim():
    s = shim.install("cpu")
    try:
        assert isinstance(torch.cuda.CUDAGraph(), graphs.HostGraph)
        assert _replay_vs_eager("cuda", torch.cuda.CUDAGraph, torch.cuda.graph) < 1e-6
        lin = torch.nn.Linear(3, 2)
        graphed = torch.cuda.make_graphed_callables(lin, (torch.randn(2, 3, requires_grad=True),))
        x = torch.randn(2, 3)
        assert torch.equal(graphed(x), lin(x))
        assert "torch.cuda.CUDAGraph" in s.report.records
    finally:
        shim.uninstall()


def test_cuda_graph_calls_use_the_npu_graph_api(emulated_npu):
    require_emulator()
    shim.install()
    try:
        g = torch.cuda.CUDAGraph()
        assert isinstance(g, torch.npu.NPUGraph)
        with torch.cuda.graph(g):
            assert torch.cuda.is_current_stream_capturing() and torch.npu.is_current_stream_capturing()
        assert _replay_vs_eager("cuda", torch.cuda.CUDAGraph, torch.cuda.graph) < 1e-6
    finally:
        shim.uninstall()


def test_run_on_the_emulated_npu_replays_graphs_and_compiles(tmp_path):
    require_emulator()
    script = tmp_path / "graphs_and_compile.py"
    script.write_text(_SCRIPT)
    proc = run_cli(["run", str(script)], env={"TORCHPORT_EMULATE": "npu"}, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["graph"] == "NPUGraph" and out["capturing"] is True and out["device"] == "npu:0"
    assert out["replay_diff"] < 1e-6
    assert out["compile_diff"] < 1e-5 and out["compile_device"] == "npu:0"
