"""The card's rules on the emulated NPU (issue 37 item 2): int32 class targets, contiguous results, switchable."""

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


# --- the card's layout rule: results of functional kernels are contiguous (op-plugin's apply_tensor*)
def test_topk_accuracy_idiom_views_as_on_the_card(emulated_npu):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 10, generator=g), torch.randint(0, 10, (8,), generator=g)
    p = x.npu().topk(5, 1)[1].t()                      # a view: transposed on the card too
    assert p.stride() == (1, 5)
    c = p.eq(y.npu().view(1, -1).expand_as(p))         # the card's eq allocates its result contiguous
    assert c.is_contiguous() and c.stride() == (8, 1)
    got = c[:5].view(-1).float().sum()                 # the CPU raises "view size is not compatible" here
    pc = x.topk(5, 1)[1].t()
    want = pc.eq(y.view(1, -1).expand_as(pc))[:5].reshape(-1).float().sum()
    assert float(got) == float(want)
    a = torch.randn(5, 8, generator=g)
    for fn in (torch.sin, lambda t: t + 1, lambda t: t * t, torch.relu, lambda t: t.softmax(0)):
        r = fn(a.npu().t())
        assert r.is_contiguous(), fn
        assert torch.equal(r.cpu(), fn(a.t()))         # same values as the CPU, only the layout differs
    v = a.npu().t()                                    # views, in-place and out= results keep their layout
    assert not v.is_contiguous() and not v.add_(0).is_contiguous()
    out = torch.empty(8, 5).t().npu()
    assert torch.sin(torch.randn(5, 8).npu(), out=out).stride() == out.stride()
    cl = torch.randn(2, 3, 4, 4, generator=g).to(memory_format=torch.channels_last).npu()
    assert torch.relu(cl).is_contiguous(memory_format=torch.channels_last)   # a layout the caller asked for


def test_group_norm_channels_last_runs_the_kernel_not_the_decomposition(emulated_npu):
    from torchport.emulate import _card_rules

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 5, 5, generator=g).to(memory_format=torch.channels_last)
    w, b = torch.randn(4, generator=g), torch.randn(4, generator=g)
    xn = x.npu().requires_grad_()
    out = F.group_norm(xn, 2, w.npu(), b.npu())        # torch's math_group_norm views its input and fails here
    xc = x.clone().requires_grad_()
    ref = F.group_norm(xc, 2, w, b)
    assert torch.equal(out.cpu(), ref)
    out.square().sum().backward()
    ref.square().sum().backward()
    assert torch.equal(xn.grad.cpu(), xc.grad)
    ln = F.layer_norm(x.npu(), (5,))                   # native_layer_norm: the CPU kernel, bit for bit
    assert torch.equal(ln.cpu(), F.layer_norm(x, (5,)))
    for name in ("native_group_norm", "native_layer_norm", "eq.Tensor", "topk", "add.Tensor"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "PrivateUse1"), name
    # operators the card has no kernel for keep torch's path (here: no PrivateUse1 kernel registered)
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::special_zeta", "PrivateUse1")
    assert _card_rules.contiguous_out("aten::eq", "Tensor") and not _card_rules.contiguous_out("aten::add_", "Tensor")
    assert not _card_rules.contiguous_out("aten::clone", "")            # memory_format: the caller's choice


def test_layout_rule_switched_off_keeps_the_cpu_layout():
    code = ("import torch\np = torch.randn(8, 10).npu().topk(5, 1)[1].t()\n"
            "c = p.eq(torch.zeros(1, 8, dtype=torch.long).npu())\nprint(c.stride())\n"
            "x = torch.randn(2, 4, 3, 3).to(memory_format=torch.channels_last).npu()\n"
            "print(tuple(torch.group_norm(x, 2).shape))\n")
    env = dict(os.environ, TORCHPORT_EMULATE="npu", TORCHPORT_NPU_CARD_RULES="0", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.stdout.strip().splitlines() == ["(1, 5)", "(2, 4, 3, 3)"], p.stderr[-2000:]
