"""``torch_npu.optim`` (emulated): the fused optimizers, with torch's update rules.

torch_npu's ``NpuFused*`` optimizers fuse all parameters into one flat buffer for speed; the
update rule is the one of the torch optimizer of the same name, so the emulator runs that.
``clip_grad_norm_fused_`` and ``get_optimizer_combined_grads`` work as in torch_npu; Ascend apex's
``clip_optimizer_grad_norm_fused`` and ``get_optimizer_combined_grad_masks`` too.
"""

import torch
from torch.optim.optimizer import required

__torchport_emulated__ = True
__all__ = ["NpuFusedSGD", "NpuFusedAdam", "NpuFusedAdamW", "NpuFusedRMSprop", "NpuFusedAdadelta", "NpuFusedAdamP",
           "NpuFusedLamb", "NpuFusedBertAdam", "NpuFusedRMSpropTF"]


class _FusedMixin:
    def clip_grad_norm_fused_(self, max_norm, norm_type=2):
        """Clip the gradients of all parameters of this optimizer (torch_npu's fused form)."""
        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        return torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)

    def clip_optimizer_grad_norm_fused(self, max_norm, norm_type=2):
        """Ascend apex's name for the same clip (``NpuFusedOptimizerBase``; ModelZoo's ResNet1001, BERT call it):
        clips in place and returns the total norm."""
        return self.clip_grad_norm_fused_(max_norm, norm_type)

    def get_optimizer_combined_grad_masks(self):
        """One mask per group over the combined gradients: 1 where an element is a parameter's (no padding here:
        nothing is combined, so every element is)."""
        return [torch.ones_like(g) for g in self.get_optimizer_combined_grads()]

    def get_optimizer_combined_grads(self):
        return [torch.cat([p.grad.reshape(-1) for p in g["params"] if p.grad is not None]) for g in self.param_groups]

    def get_optimizer_combined_params(self):
        return [torch.cat([p.detach().reshape(-1) for p in g["params"]]) for g in self.param_groups]


class NpuFusedSGD(_FusedMixin, torch.optim.SGD):
    def __init__(self, params, lr=required, momentum=0.0, dampening=0, weight_decay=0, nesterov=False):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov)


class NpuFusedAdam(_FusedMixin, torch.optim.Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)


class NpuFusedAdamW(_FusedMixin, torch.optim.AdamW):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)


class NpuFusedRMSprop(_FusedMixin, torch.optim.RMSprop):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False):
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                         centered=centered)


class NpuFusedAdadelta(_FusedMixin, torch.optim.Adadelta):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0):
        super().__init__(params, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)


class _NotEmulated:
    """torch_npu's fused forms of third-party optimizers (AdamP, LAMB, BERT Adam, TF-style RMSprop): their
    update rules are torch_npu's own, with no torch counterpart to run; constructing one says so."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            f"torch_npu.optim.{type(self).__name__} is not provided by the emulated NPU (its update rule has no "
            "torch counterpart); use NpuFusedSGD/Adam/AdamW/RMSprop/Adadelta or the torch optimizer")


NpuFusedAdamP = type("NpuFusedAdamP", (_NotEmulated,), {"__module__": __name__})
NpuFusedLamb = type("NpuFusedLamb", (_NotEmulated,), {"__module__": __name__})
NpuFusedBertAdam = type("NpuFusedBertAdam", (_NotEmulated,), {"__module__": __name__})
NpuFusedRMSpropTF = type("NpuFusedRMSpropTF", (_NotEmulated,), {"__module__": __name__})
