"""Ascend apex's ``combine_tensors``: copy a list of tensors into one flat buffer and make each tensor a view of
its slice (so one fused kernel can update them all). Emulated with torch ops; no NPU storage alignment."""

from __future__ import annotations

import torch

__torchport_emulated__ = True
__all__ = ["combine_npu", "combine_tensors", "get_part_combined_tensor", "is_combined_tensor_valid"]


def combine_npu(list_of_tensor, require_copy_value=True):
    """One flat buffer holding every tensor of the list; each tensor's ``.data`` becomes a view into it."""
    tensors = [t for t in list_of_tensor if t is not None]
    if not tensors:
        return None
    total = sum(t.numel() for t in tensors)
    combined = torch.zeros(total, dtype=tensors[0].dtype, device=tensors[0].device)
    offset = 0
    for t in tensors:
        part = combined[offset:offset + t.numel()].view_as(t)
        if require_copy_value:
            part.copy_(t.detach())
        t.data = part
        offset += t.numel()
    return combined


combine_tensors = combine_npu


def get_part_combined_tensor(combined_tensor, index, size):
    """The ``size`` elements of ``combined_tensor`` from ``index``."""
    return combined_tensor[index:index + size]


def is_combined_tensor_valid(combined_tensor, list_of_tensor):
    """True when every tensor of the list is a view into ``combined_tensor``'s storage."""
    if combined_tensor is None:
        return False
    ptr = combined_tensor.untyped_storage().data_ptr()
    return all(t is None or t.untyped_storage().data_ptr() == ptr for t in list_of_tensor)
