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


@op(backward=False, note="the gradients of npu_deformable_conv2d (torch.autograd over the forward): (grad_input, "
                         "grad_weight, grad_offset, grad_bias), grad_offset in the forward's [x, y, mask] layout; "
                         "offset_out is not read (the forward's offset_out is the offset itself)")
def npu_deformable_conv2dbk(input, grad_output, offset_out, weight, offset, kernel_size, stride, padding,
                            dilation=(1, 1, 1, 1), groups=1, deformable_groups=1, modulated=True):
    """Backward of the modulated deformable convolution: ``(grad_input, grad_weight, grad_offset, grad_bias)``."""
    with torch.enable_grad():
        x = input.detach().requires_grad_()
        w = weight.detach().requires_grad_()
        o = offset.detach().requires_grad_()
        b = torch.zeros(weight.shape[0], dtype=weight.dtype, device=weight.device, requires_grad=True)
        out, _ = npu_deformable_conv2d(x, w, o, b, kernel_size, stride, padding, dilation, groups,
                                       deformable_groups, modulated)
        grads = torch.autograd.grad(out, (x, w, o, b), grad_output.detach())
    return tuple(grads)
