"""Optimizer-step ops of torch_npu (API reference: ``_op_plugin_docs.py`` of the 2.14.0 wheel)."""

from __future__ import annotations

import torch

from ._registry import op


@op(backward=False, note="formula of BERT's Adam (no bias correction), as Ascend's NpuFusedBertAdam uses it; "
                         "adam_mode 1 (mbert_adam) raises")
def npu_bert_apply_adam(lr, beta1, beta2, epsilon, grad, max_grad_norm, global_grad_norm, weight_decay,
                        step_size=None, adam_mode=0, *, out=None, var=None, m=None, v=None):
    """In place on ``out=(var, m, v)``: grad scaled by ``max_grad_norm / global_grad_norm`` when the global norm is
    larger; ``m = b1 m + (1-b1) g``; ``v = b2 v + (1-b2) g^2``; ``var -= lr (m / (sqrt(v) + eps) + wd var)``."""
    if out is not None:
        var, m, v = out
    if var is None or m is None or v is None:
        raise RuntimeError("torch_npu.npu_bert_apply_adam: pass out=(var, m, v)")
    if int(adam_mode) != 0:
        raise RuntimeError("torch_npu.npu_bert_apply_adam: adam_mode=1 (mbert_adam) is not emulated")
    g = grad
    if float(max_grad_norm) > 0 and float(global_grad_norm) > float(max_grad_norm):
        g = g * (float(max_grad_norm) / float(global_grad_norm))
    m.mul_(beta1).add_(g, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    update = m / (v.sqrt() + epsilon)
    if float(weight_decay) > 0:
        update = update + weight_decay * var
    var.sub_(update * (lr if step_size is None else step_size))
    return var, m, v
