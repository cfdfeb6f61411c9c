"""Where the card's kernels accept what the CPU's refuse: int32 class targets (issue 37 item 2).

ModelZoo scripts cast targets to int32 on the device (``target.to(torch.int32)``) and torch_npu's loss
kernels take them; the CPU kernels the emulator reuses insist on int64 ("expected target dtype to be Long").
The operators below get a PrivateUse1 kernel that runs the CPU kernel on the host aliases with the int32
target widened to int64. The list is the intersection of (a) the aten operators torch_npu 2.14.0 has NPU
kernels for (``_coverage.npu_ops()``, op-plugin metadata of the wheel) and (b) those whose CPU kernel refuses
an int32 target. That the card's kernels take int32 for each is an ASSUMPTION from aclnn's documented index
types (int32/int64), checked on hardware only for cross_entropy/nll_loss (ModelZoo's training scripts).
Switch off with ``TORCHPORT_NPU_CARD_RULES=0`` (the CPU's rules then apply).
"""

from __future__ import annotations

import os

import torch

from torchport.emulate import _coverage

__all__ = ["HANDLERS", "INT_TARGET_OPS", "enabled"]

_a = torch.ops.aten
#: aten operators (base names) whose int32 target the card takes and the CPU refuses
INT_TARGET_OPS = ("nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
                  "multilabel_margin_loss_forward", "multilabel_margin_loss_backward")


def enabled() -> bool:
    """``TORCHPORT_NPU_CARD_RULES`` unset or not ``0``."""
    return os.environ.get("TORCHPORT_NPU_CARD_RULES", "1").strip() not in ("0", "false", "no", "off")


def _int_target(func, args, kwargs):
    from torchport.emulate._tensor import adopt, host

    dev = next((a.device.index or 0 for a in (*args, *kwargs.values())
                if isinstance(a, torch.Tensor) and a.device.type == "npu"), 0)

    def to_host(a):
        if isinstance(a, torch.Tensor) and a.device.type == "npu":
            h = host(a)
            return h.long() if h.dtype == torch.int32 else h
        return a

    out = func(*[to_host(a) for a in args], **{k: to_host(v) for k, v in kwargs.items()})

    def back(o):
        return adopt(o, dev) if isinstance(o, torch.Tensor) and o.device.type == "cpu" else o
    return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)


def _handlers() -> dict:
    if not enabled():
        return {}
    known = _coverage.npu_ops()
    return {getattr(_a, n).default: _int_target for n in INT_TARGET_OPS if n in known}


HANDLERS = _handlers
