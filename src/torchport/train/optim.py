"""Optimizer and LR schedule for the reference trainer.

* Weight decay applies to conv / linear weights only; norm parameters and biases (every 1-D
  parameter) get none -- the usual ResNet recipe, and it keeps BatchNorm scales from shrinking.
* The schedule is per optimizer step: linear warmup from ~0 to the peak, then cosine to 0,
  step decay, or constant. It is a small callable object, so ``LambdaLR.state_dict()`` holds
  only plain numbers (checkpoints load with ``weights_only=True``).

Example::

    opt = build_optimizer(model, name="sgd", lr=0.1, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, LrSchedule(kind="cosine", warmup=100, total=5000))
"""

from __future__ import annotations

import dataclasses
import math

__all__ = ["build_optimizer", "LrSchedule"]


def build_optimizer(model, *, name: str, lr: float, momentum: float, weight_decay: float):
    """SGD (Nesterov-free, with momentum) or AdamW over two parameter groups (decay / no decay)."""
    import torch

    decay = [p for p in model.parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim <= 1]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=(momentum, 0.999))
    raise ValueError(f"optimizer {name!r}: use 'sgd' or 'adamw'")


@dataclasses.dataclass
class LrSchedule:
    """LR multiplier as a function of the optimizer step (for ``LambdaLR``).

    Args:
        kind: ``cosine`` (to 0 at ``total``), ``step`` (x ``gamma`` every ``step_size`` steps) or ``constant``.
        warmup: linear warmup steps (the multiplier goes ``1/warmup, 2/warmup, ... 1``).
        total: total optimizer steps of the run.
        step_size: steps between decays (``step`` only).
        gamma: decay factor (``step`` only).
    """

    kind: str = "cosine"
    warmup: int = 0
    total: int = 1
    step_size: int = 1
    gamma: float = 0.1

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        if self.kind == "cosine":
            span = max(1, self.total - self.warmup)
            progress = min(1.0, (step - self.warmup) / span)
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        if self.kind == "step":
            return self.gamma ** (step // max(1, self.step_size))
        return 1.0
