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


@op(note="NCHW tensors as the contrib module passes them; offset = [x offsets, y offsets, mask] over "
         "deformable_groups * kh * kw each (contrib's reordering of mmcv's (y, x) pairs); torchvision's "
         "deform_conv2d; offset_out is the offset as given (the card's is its internal layout)")
def npu_deformable_conv2d(self, weight, offset, bias, kernel_size, stride, padding, dilation=(1, 1, 1, 1),
                          groups=1, deformable_groups=1, modulated=True):
    """Modulated deformable convolution (DCNv2): ``(output, offset_out)``."""
    from torchvision.ops import deform_conv2d

    if not modulated:
        raise ValueError("torch_npu.npu_deformable_conv2d: modulated=False (DCNv1) is not supported, on the "
                         "card either; pass modulated=True")
    n = int(deformable_groups) * int(kernel_size[0]) * int(kernel_size[1])
    if offset.shape[1] != 3 * n:
        raise ValueError(f"torch_npu.npu_deformable_conv2d: offset has {offset.shape[1]} channels; expected "
                         f"3 * deformable_groups * kh * kw = {3 * n}")
    dx, dy, mask = offset[:, :n], offset[:, n:2 * n], offset[:, 2 * n:]
    yx = torch.stack((dy, dx), dim=2).flatten(1, 2)           # torchvision's (y, x) pairs
    out = deform_conv2d(self, yx, weight, bias, stride=(int(stride[2]), int(stride[3])),
                        padding=(int(padding[0]), int(padding[2])),
                        dilation=(int(dilation[2]), int(dilation[3])), mask=mask)
    return out, offset
