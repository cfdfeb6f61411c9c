"""Loss ops of torch_npu (API reference: ``_op_plugin_docs.py`` of the 2.14.0 wheel)."""

from __future__ import annotations

import torch

from ._registry import op


@op()
def npu_softmax_cross_entropy_with_logits(self, labels):
    """Per-row ``-(labels * log_softmax(self, -1)).sum(-1)`` (labels are a distribution, same shape as ``self``)."""
    return -(labels * torch.log_softmax(self, dim=-1)).sum(-1)
