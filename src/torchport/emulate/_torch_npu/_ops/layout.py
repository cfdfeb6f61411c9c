"""Layout, indexing and reduction ops of torch_npu (API reference: torch_npu's ``_op_plugin_docs.py``
in the 2.14.0 wheel, one entry per op). The card's kernels write fresh, contiguous outputs."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._registry import op


@op()
def npu_confusion_transpose(self, perm, shape, transpose_first):
    """``transpose_first``: permute then reshape to ``shape``; else reshape then permute (contiguous result)."""
    if transpose_first:
        return self.permute(*perm).contiguous().view(*shape)
    return self.reshape(*shape).permute(*perm).contiguous()


@op()
def npu_transpose(self, perm, require_contiguous=True):
    """``self.permute(perm)``, made contiguous (the card writes a new tensor)."""
    return self.permute(*perm).contiguous()


@op()
def npu_broadcast(self, size):
    """``self.expand(size)``, contiguous."""
    return self.expand(*size).contiguous()


@op()
def npu_pad(input, paddings):
    """Zero padding; ``paddings`` are (before, after) pairs from the first dimension on."""
    pairs = [paddings[i:i + 2] for i in range(0, len(paddings), 2)]
    flat = [int(p) for pair in reversed(pairs) for p in pair]
    return F.pad(input, flat, "constant", 0)


@op()
def npu_slice(self, offsets, size):
    """The block of shape ``size`` starting at ``offsets``."""
    out = self
    for d, (o, s) in enumerate(zip(offsets, size)):
        out = out.narrow(d, int(o), int(s))
    return out.contiguous()


@op(note="begin/end/ellipsis/new-axis/shrink masks other than 0 raise")
def npu_indexing(self, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                 shrink_axis_mask=0):
    """Strided slice ``self[b0:e0:s0, b1:e1:s1, ...]`` (TensorFlow's StridedSlice without masks)."""
    if begin_mask or end_mask or ellipsis_mask or new_axis_mask or shrink_axis_mask:
        raise RuntimeError("torch_npu.npu_indexing: masks are not emulated (pass 0)")
    index = tuple(slice(int(b), int(e), int(s)) for b, e, s in zip(begin, end, strides))
    return self[index].contiguous()


@op()
def npu_one_hot(input, num_classes=-1, depth=1, on_value=1, off_value=0):
    """One-hot of ``depth`` classes inserted at axis ``num_classes`` (-1: last); float32 ``on``/``off`` values."""
    eq = input.long().unsqueeze(-1) == torch.arange(int(depth), device=input.device)
    out = torch.where(eq, torch.tensor(float(on_value), device=input.device),
                      torch.tensor(float(off_value), device=input.device))
    axis = int(num_classes)
    if axis != -1:
        out = out.movedim(-1, axis if axis >= 0 else axis).contiguous()
    return out


@op()
def npu_max(self, dim, keepdim=False):
    """``torch.max(self, dim)``; the indices are int32 (as the card's kernel writes them)."""
    values, indices = torch.max(self, dim, keepdim)
    return values, indices.to(torch.int32)


@op()
def npu_min(self, dim, keepdim=False):
    """``torch.min(self, dim)``; int32 indices."""
    values, indices = torch.min(self, dim, keepdim)
    return values, indices.to(torch.int32)


@op()
def npu_sort_v2(self, dim=-1, descending=False):
    """Sorted values only (no indices)."""
    return torch.sort(self, dim=dim, descending=descending).values


# aclDataType codes torch_npu's npu_dtype_cast takes (torch_npu/_C/_cd DType and the wheel's utils)
_ACL_DTYPE = {0: torch.float32, 1: torch.float16, 2: torch.int8, 3: torch.int32, 4: torch.uint8, 6: torch.int16,
              9: torch.int64, 11: torch.float64, 12: torch.bool, 27: torch.bfloat16}


@op()
def npu_dtype_cast(self, dtype, input_dtype=None):
    """``self.to(dtype)`` (a torch dtype, or an aclDataType code)."""
    return self.to(_ACL_DTYPE[int(dtype)] if isinstance(dtype, int) else dtype)
