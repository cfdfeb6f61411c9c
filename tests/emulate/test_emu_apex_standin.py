"""The apex stand-in as Ascend ModelZoo scripts use it (``from apex import amp``), each run in a
fresh interpreter with TORCHPORT_EMULATE set, compared with the same loop in plain torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_SCRIPT = """
    import json, sys
    import torch
    {imports}
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to("npu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    {init}
    w0 = model[0].weight.detach().clone()
    x = torch.randn(32, 8).to("npu"); y = torch.randint(0, 4, (32,)).to("npu")
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        {backward}
        optimizer.step()
        losses.append(loss.item())
    extra = {extra}
    print(json.dumps({{"losses": losses, "moved": (model[0].weight.detach() - w0).abs().max().item(),
                      "extra": extra}}))
"""

_APEX_BACKWARD = """with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), 100.0)"""


def _run(tmp_path: Path, **parts: str) -> dict:
    code = textwrap.dedent(_SCRIPT).format(**parts)
    script = tmp_path / "script.py"
    script.write_text(code)
    env = dict(os.environ, TORCHPORT_EMULATE="npu", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _plain(tmp_path: Path) -> dict:
    return _run(tmp_path, imports="import torch_npu", init="", backward="loss.backward()", extra="None")


def _apex(tmp_path: Path, opt_level: str, loss_scale: str = "None") -> dict:
    return _run(tmp_path, imports="import torch_npu\nfrom apex import amp",
                init=f"model, optimizer = amp.initialize(model, optimizer, opt_level={opt_level!r}, "
                     f"loss_scale={loss_scale}, combine_grad=True)",
                backward=_APEX_BACKWARD,
                extra="[amp.__file__, amp.state_dict(), type(model(x)).__name__, str(model(x).dtype)]")


def test_o0_is_plain_fp32_exactly(tmp_path):
    plain, o0 = _plain(tmp_path), _apex(tmp_path, "O0")
    assert o0["losses"] == plain["losses"]
    assert o0["moved"] > 0
    assert "_apex" in o0["extra"][0]            # the stand-in served it
    assert o0["extra"][1] == {}                   # O0: no loss scaler, like apex


def test_o1_o2_match_fp32_within_fp16_tolerance_and_step(tmp_path):
    plain = _plain(tmp_path)
    for level in ("O1", "O2"):
        out = _apex(tmp_path, level)
        assert out["moved"] > 0, level
        assert out["extra"][3] == "torch.float32"          # outputs cast back to fp32
        for a, b in zip(out["losses"], plain["losses"]):
            assert abs(a - b) < 2e-2 * max(1.0, abs(b)), (level, out["losses"], plain["losses"])
        assert out["losses"][-1] < out["losses"][0]
        assert out["losses"][1:] != plain["losses"][1:]    # autocast ran: fp16 rounding shows
        scaler = out["extra"][1]["loss_scaler0"]
        assert scaler["loss_scale"] == 2.0 ** 16 and scaler["unskipped"] == 5   # dynamic, no overflow


def test_overflow_skips_the_step_and_static_scale_stays(tmp_path):
    # a static scale so large that the gradients overflow: every step is skipped, the scale stays
    out = _apex(tmp_path, "O1", loss_scale="3e38")
    assert out["moved"] == 0
    assert len(set(out["losses"])) == 1
    assert out["extra"][1]["loss_scaler0"]["loss_scale"] == pytest.approx(3e38, rel=1e-6)


def test_state_dict_round_trip_in_process():
    import torchport.emulate as emulate

    with emulate.emulated():
        from apex import amp
        import torch

        model = torch.nn.Linear(2, 2).to("npu")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model, opt = amp.initialize(model, opt, opt_level="O1")
        amp.load_state_dict({"loss_scaler0": {"loss_scale": 128.0, "unskipped": 3}})
        assert amp.state_dict() == {"loss_scaler0": {"loss_scale": 128.0, "unskipped": 3}}
    import sys as _sys
    assert "apex" not in _sys.modules


def test_the_rest_of_apex_a_training_script_imports_runs_as_torch():
    # NVIDIA's imagenet example (main_amp.py) imports all of these before anything runs; Ascend
    # ModelZoo scripts call apex.optimizers.NpuFusedSGD and apex.parallel.convert_syncbn_model
    import torchport.emulate as emulate

    with emulate.emulated():
        import torch

        import apex
        from apex.fp16_utils import to_python_float
        from apex.multi_tensor_apply import multi_tensor_applier
        from apex.parallel import DistributedDataParallel

        assert issubclass(DistributedDataParallel, torch.nn.parallel.DistributedDataParallel)
        assert multi_tensor_applier.available is False   # scripts then take their per-tensor path
        assert to_python_float(torch.tensor([2.5], device="npu")) == 2.5
        net = apex.parallel.convert_syncbn_model(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3),
                                                                     torch.nn.BatchNorm2d(4)))
        assert isinstance(net[1], torch.nn.SyncBatchNorm)

        def train(make_opt):
            torch.manual_seed(0)
            model = torch.nn.Linear(4, 2).to("npu")
            opt = make_opt(model.parameters())
            x = torch.randn(8, 4).to("npu")
            for _ in range(3):
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
            return model.weight.detach().cpu()

        # a fused optimizer is the torch optimizer of its rule: the same weights, bitwise
        assert torch.equal(train(lambda p: apex.optimizers.FusedSGD(p, lr=0.1, momentum=0.9)),
                           train(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)))
        assert torch.equal(train(lambda p: apex.optimizers.FusedAdam(p, lr=0.1, weight_decay=0.1)),
                           train(lambda p: torch.optim.AdamW(p, lr=0.1, weight_decay=0.1)))
        assert torch.equal(train(lambda p: apex.optimizers.FusedAdam(p, lr=0.1, adam_w_mode=False)),
                           train(lambda p: torch.optim.Adam(p, lr=0.1)))
        assert torch.equal(train(lambda p: apex.optimizers.NpuFusedSGD(p, lr=0.1)),
                           train(lambda p: torch.optim.SGD(p, lr=0.1)))
        with pytest.raises(ValueError, match="gradient_predivide_factor"):
            DistributedDataParallel(torch.nn.Linear(2, 2), gradient_predivide_factor=2.0)
    import sys as _sys
    assert not [k for k in _sys.modules if k == "apex" or k.startswith("apex.")]
