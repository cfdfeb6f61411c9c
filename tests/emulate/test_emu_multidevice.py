"""Real device indices on the emulated NPU: work on npu:1, DDP on npu:<rank> without set_device,
SyncBatchNorm, clipping, and the device RNG as a stream of its own."""

from __future__ import annotations

import pytest
import torch
import json

from emu_helpers import run_python, torchrun_two_npus


def test_ddp_on_npu_rank_without_set_device_with_syncbn_and_clipping(tmp_path):
    results = torchrun_two_npus("emu_multidev_worker.py", tmp_path)
    for r, res in enumerate(results):
        assert res["current_device"] == 0  # nobody called set_device ...
        assert res["out_device"] == res["grad_device"] == res["norm_device"] == f"npu:{r}"  # ... yet all on npu:r
        assert res["out_max_err"] < 1e-5  # SyncBatchNorm == BatchNorm over the global batch
        assert res["grad_max_err"] < 1e-5
        assert res["running_mean_err"] < 1e-6
        assert abs(res["grad_norm"] - res["ref_norm"]) < 1e-4 * max(1.0, res["ref_norm"])
    assert results[0]["grad_norm"] == pytest.approx(results[1]["grad_norm"])


def test_clip_grad_norm_and_optimizer_on_npu1(npu2):
    model = torch.nn.Sequential(torch.nn.Linear(10, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("npu:1")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(4, 10, device="npu:1")
    loss = model(x).square().mean()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    assert norm.device == torch.device("npu:1") and torch.npu.current_device() == 0
    assert all(p.grad.device == torch.device("npu:1") for p in model.parameters())
    total = torch.sqrt(sum(p.grad.cpu().square().sum() for p in model.parameters()))
    assert float(total) == pytest.approx(min(0.5, float(norm.cpu())), rel=1e-4)
    assert f"{loss:.3f}" == f"{loss.item():.3f}"
    assert torch.empty_like(x).device == torch.device("npu:1")  # C++ allocates "like x" on x's device
    with torch.npu.device(1):
        assert torch.zeros(2, device="npu").device == torch.device("npu:1")


def test_trainer_on_npu1_with_clipping(npu2, tmp_path):
    from torchport.train import TrainConfig, train

    cfg = TrainConfig(device="npu:1", clip_grad_norm=1.0, max_steps=2, epochs=1, batch_size=8, image_size=16,
                      precision="fp16", run_dir=str(tmp_path / "run"))
    result = train(cfg)
    assert result.steps == 2 and result.device.endswith(":1") and result.train_loss == result.train_loss


_TRAINER_THEN_NPU_BACKWARD = """
import json, tempfile, threading, torch
import torchport.emulate as emulate
from torchport.train import TrainConfig, train

emulate.install(devices=2)
main = torch.get_num_threads()
train(TrainConfig(device="npu:1", clip_grad_norm=1.0, max_steps=2, epochs=1, batch_size=8, image_size=16,
                  precision="fp16", run_dir=tempfile.mkdtemp() + "/run"))
seen = {}
for i in (0, 1):   # the autograd engine's npu:i thread runs this backward's host kernels
    x = torch.randn(256, 256, device=f"npu:{i}", requires_grad=True)
    x.register_hook(lambda g, i=i: seen.update({i: torch.get_num_threads()}))
    (x @ x).sum().backward()
print(json.dumps({"main": main, "after": torch.get_num_threads(), "npu_threads": [seen[0], seen[1]]}))
"""


def test_trainer_leaves_the_npu_backward_threads_alone():
    # The trainer first, in a fresh process (as in a test session where it ran before the AdamW foreach/fused
    # parity test): torch's pin-memory thread set the process-wide intra-op count to 1, the npu backward
    # threads started after it ran with one thread -- a different summation order than CPU, and AdamW's
    # per-element normalisation turned that into a 1.6% loss difference at step 2.
    proc = run_python(_TRAINER_THEN_NPU_BACKWARD, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["after"] == out["main"]
    assert out["npu_threads"] == [out["main"], out["main"]], out


def test_readme_loop_on_npu1_with_clipping(npu2):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3)).to("npu:1")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("npu")
    for _ in range(2):
        x = torch.randn(4, 3, 8, 8, device="npu:1")
        y = torch.randint(0, 3, (4,), device="npu:1")
        with torch.autocast("npu", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
    assert next(model.parameters()).device == torch.device("npu:1")


def test_device_rng_is_its_own_stream(npu2):
    torch.manual_seed(0)
    on_npu = torch.randn(5, device="npu").cpu()
    torch.manual_seed(0)
    on_cpu = torch.randn(5)
    assert not torch.equal(on_npu, on_cpu)  # a card's generator does not give the CPU's numbers
    torch.manual_seed(0)
    assert torch.equal(torch.randn(5, device="npu").cpu(), on_npu)  # but is reproducible
    g = torch.Generator(device="npu:1")
    assert g.device == torch.device("npu:1")
    g.manual_seed(3)
    a = torch.rand(4, device="npu:1", generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(torch.rand(4, device="npu:1", generator=g).cpu(), a)
    assert g.initial_seed() == 3
    gens = torch.npu.default_generators
    assert len(gens) == 2 and gens[1].device == torch.device("npu:1")
    torch.npu.manual_seed_all(7)
    assert gens[0].initial_seed() == 7 == torch.npu.initial_seed()
    state = torch.npu.get_rng_state(1)
    first = torch.randn(3, device="npu:1").cpu()
    torch.npu.set_rng_state(state, 1)
    assert torch.equal(torch.randn(3, device="npu:1").cpu(), first)
