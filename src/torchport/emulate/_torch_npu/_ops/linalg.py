"""Matrix products of torch_npu (API reference: ``_op_plugin_docs.py`` of the 2.14.0 wheel)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._registry import op


@op()
def npu_linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (``torch.nn.functional.linear``)."""
    return F.linear(input, weight, bias)


@op()
def npu_bmmV2(self, mat2, output_sizes=()):
    """Batched matrix product with broadcasting (``torch.matmul``); ``output_sizes`` only serves the card's backward."""
    return torch.matmul(self, mat2)
