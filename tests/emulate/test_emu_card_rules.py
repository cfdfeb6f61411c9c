"""The card's dtype rules on the emulated NPU (issue 37 item 2): int32 class targets, switchable."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
import torch.nn.functional as F


def test_int32_targets_match_int64_on_the_cpu(emulated_npu):
    from torchport.emulate import _card_rules, _coverage

    handled = {op.name().split("::")[1] for op in _card_rules.HANDLERS()}
    assert handled == {n for n in _card_rules.INT_TARGET_OPS if n in _coverage.npu_ops()}   # the card's kernels only
    assert {"nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward"} <= handled
    g = torch.Generator().manual_seed(0)
    x, t = torch.randn(6, 5, generator=g), torch.tensor([0, 4, 2, 1, 3, 3])
    xn, xc = x.npu().requires_grad_(), x.clone().requires_grad_()
    ln = F.cross_entropy(xn, t.npu().to(torch.int32))
    lc = F.cross_entropy(xc, t)
    ln.backward()
    lc.backward()
    assert float(ln) == float(lc) and torch.equal(xn.grad.cpu(), xc.grad)
    img, tt = torch.randn(2, 3, 4, 4, generator=g), torch.randint(0, 3, (2, 4, 4), generator=g)
    assert torch.allclose(F.nll_loss(img.npu(), tt.npu().int()).cpu(), F.nll_loss(img, tt))   # nll_loss2d
    y = torch.tensor([[3, 0, -1, 1]])
    s = torch.randn(1, 4, generator=g)
    assert torch.allclose(F.multilabel_margin_loss(s.npu(), y.npu().int()).cpu(), F.multilabel_margin_loss(s, y))


def test_switched_off_the_cpu_rule_applies():
    code = ("import torch, torch.nn.functional as F\n"
            "try:\n    F.cross_entropy(torch.randn(2, 3).npu(), torch.tensor([0, 1]).npu().int()); print('accepted')\n"
            "except RuntimeError as e:\n    print('refused', 'Long' in str(e))\n")
    env = dict(os.environ, TORCHPORT_EMULATE="npu", TORCHPORT_NPU_CARD_RULES="0", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.stdout.strip().splitlines()[-1] == "refused True", p.stderr[-2000:]
