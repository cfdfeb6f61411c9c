"""``torch_npu.contrib.module`` (emulated): torch_npu's ``nn.Module`` helpers.

Composed from the emulated ops of ``torch_npu._ops`` (npu_roi_align, npu_one_hot,
npu_softmax_cross_entropy_with_logits, npu_mish, npu_silu, npu_ps_roi_pooling, npu_deformable_conv2d,
npu_dropout_gen_mask / npu_dropout_do_mask, dropout_with_byte_mask) and plain torch modules, with the semantics of torch_npu 2.14.0's ``contrib/module``
(read from the wheel; constructor arguments as there). The modules built on kernels that have no composition
here (the quantised matmul / conv family) refuse in one line when constructed. MultiheadAttention
(fairseq's) runs the emulated npu_multi_head_attention. FusedColorJitter is host (numpy) code on the card as well and runs as there. PSROIPool and ModulatedDeformConv/DCNv2 run the emulated npu_ps_roi_pooling /
npu_deformable_conv2d (torchvision's ps_roi_pool / deform_conv2d).

The wheel's submodules (``deform_conv``, ``roi_align``, ``_ensemble_dropout`` ...) re-export their names from here.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn as nn

import torch_npu

from torch_npu._ops._registry import refusal

__torchport_emulated__ = True
__all__ = ["ChannelShuffle", "Prefetcher", "LabelSmoothingCrossEntropy", "ROIAlign", "ModulatedDeformConv", "DCNv2",
           "Mish", "SiLU", "Swish", "BiLSTM", "PSROIPool", "NpuFairseqDropout", "NpuCachedDropout",
           "NpuPreGenDropout", "MultiheadAttention", "FusedColorJitter", "NpuDropPath", "Focus", "FastBatchNorm1d",
           "FastBatchNorm2d", "FastBatchNorm3d", "FastSyncBatchNorm", "LinearA8W8Quant", "LinearQuant",
           "LinearWeightQuant", "DropoutWithByteMask", "QuantConv2d"]


class ChannelShuffle(nn.Module):
    """ShuffleNetV2's channel shuffle of ``cat([x1, x2], 1)``: channel ``g * group_len + j`` goes to
    ``j * groups + g``; ``split_shuffle`` returns the two halves of the result."""

    def __init__(self, in_channels, groups=2, split_shuffle=True):
        super().__init__()
        self.split_shuffle = split_shuffle
        self.group_len = in_channels // groups
        self.register_buffer("order", torch.arange(in_channels).reshape(groups, self.group_len).t().reshape(-1),
                             persistent=False)

    def forward(self, x1, x2):
        x = torch.cat([x1, x2], dim=1)
        order = self.order.to(x.device)
        if not self.split_shuffle:
            return x.index_select(1, order)
        return x.index_select(1, order[:self.group_len]), x.index_select(1, order[self.group_len:])


class Prefetcher:
    """Loads the next ``(input, target)`` of ``loader`` onto the npu on a side stream; ``next()`` returns the
    current pair (``(None, None)`` once the loader is exhausted)."""

    def __init__(self, loader, stream=None):
        self.loader = iter(loader)
        self.stream = stream if stream is not None else torch.npu.Stream()
        self.preload()

    def preload(self):
        try:
            self.next_input, self.next_target = next(self.loader)
        except StopIteration:
            self.next_input = self.next_target = None
            return
        with torch.npu.stream(self.stream):
            self.next_input = self.next_input.npu(non_blocking=True)
            self.next_target = self.next_target.npu(non_blocking=True)

    def next(self):
        torch.npu.current_stream().wait_stream(self.stream)
        pair = (self.next_input, self.next_target)
        if self.next_target is not None:
            self.preload()
        return pair


class LabelSmoothingCrossEntropy(nn.Module):
    """Cross entropy against a smoothed one-hot target (``1 - smooth_factor`` on the class,
    ``smooth_factor / (num_classes - 1)`` elsewhere), mean over the batch, in fp32."""

    def __init__(self, num_classes=1000, smooth_factor=0.0):
        super().__init__()
        self.on_value = 1.0 - smooth_factor
        self.off_value = 1.0 * smooth_factor / (num_classes - 1)

    def forward(self, pred, target):
        label = torch_npu.npu_one_hot(target.int(), -1, pred.size(1), self.on_value, self.off_value)
        loss = torch_npu.npu_softmax_cross_entropy_with_logits(pred, label)
        return torch.mean(loss, [0], keepdim=False, dtype=torch.float32)


class ROIAlign(nn.Module):
    """detectron2-style RoIAlign over ``rois`` ``[K, 5]`` (npu_roi_align; ``aligned`` shifts by half a pixel)."""

    def __init__(self, output_size, spatial_scale, sampling_ratio, aligned=True):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input_tensor, rois):
        if rois.dim() != 2 or rois.size(1) != 5:
            raise ValueError(f"torch_npu.contrib.module.ROIAlign: rois must be [K, 5], got {tuple(rois.shape)}")
        size = torch.nn.modules.utils._pair(self.output_size)
        return torch_npu.npu_roi_align(input_tensor.float(), rois, self.spatial_scale, size[0], size[1],
                                       self.sampling_ratio, 3 if self.aligned else 0)

    def __repr__(self):
        return (f"{type(self).__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale}, "
                f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned})")


class Mish(nn.Module):
    """``x * tanh(softplus(x))`` (npu_mish)."""

    def __init__(self):
        super().__init__()
        warnings.warn("torch_npu.contrib.module.Mish is deprecated. Please use torch.nn.Mish as a replacement.",
                      FutureWarning)

    def forward(self, x):
        return torch_npu.npu_mish(x)


class SiLU(nn.Module):
    """``x * sigmoid(x)`` (npu_silu)."""

    def __init__(self):
        super().__init__()
        warnings.warn("torch_npu.contrib.module.SiLU is deprecated. Please use torch.nn.SiLU as a replacement.",
                      FutureWarning)

    def forward(self, x):
        return torch_npu.npu_silu(x)


Swish = SiLU


class BiLSTM(nn.Module):
    """Two one-directional LSTMs, the second over the time-reversed input (time first), outputs concatenated."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        warnings.warn("torch_npu.contrib.BiLSTM is deprecated. Please check the documentation for a replacement.",
                      FutureWarning)
        self.fw_rnn = nn.LSTM(input_size, hidden_size, bidirectional=False)
        self.bw_rnn = nn.LSTM(input_size, hidden_size, bidirectional=False)

    def forward(self, inputs):
        fw, _ = self.fw_rnn(inputs)
        bw, _ = self.bw_rnn(torch.flip(inputs, [0]))
        return torch.cat((fw, torch.flip(bw, [0])), 2)


class _MaskQueue:
    """Pre-generated random draws for one (shape, dtype, device, p) key, as the card's ensemble dropout keeps."""

    def __init__(self):
        self.requests = 0
        self.queue: list = []


class NpuCachedDropout(nn.Dropout):
    """Dropout with masks generated ahead (after each forward of the model passed to
    :meth:`enable_dropout_ensemble`). As on the card, until a mask exists for a shape the input passes unchanged
    (so without ``enable_dropout_ensemble`` no dropout is applied); a list ``[shape, dtype, device]`` asks for
    the mask itself."""

    task_dict: dict = {}
    dropout_stream = None

    def __init__(self, p, module_name=None):
        super().__init__(p)
        self.module_name = module_name

    def forward(self, x):
        if isinstance(x, torch.Tensor):
            key, ret = (x.shape, x.dtype, x.device, self.p), x
        elif isinstance(x, list):
            key, ret = (x[0], x[1], x[2], self.p), None
        else:
            raise RuntimeError(f"torch_npu.contrib.module.NpuCachedDropout: input must be a tensor or "
                               f"[shape, dtype, device], got {type(x).__name__}")
        if self.p == 0:
            return ret
        task = NpuCachedDropout.task_dict.setdefault(key, _MaskQueue())
        if not task.queue:
            task.requests += 1
            return ret
        mask = task.queue.pop(0)
        return torch_npu.npu_dropout_do_mask(x, mask, self.p)[0] if ret is not None else mask

    @classmethod
    def enable_dropout_ensemble(cls, model):
        if cls.dropout_stream is None:
            cls.dropout_stream = torch.npu.Stream()

        def wait(module, inputs):
            torch.npu.current_stream().wait_stream(cls.dropout_stream)

        def refill(module, inputs, outputs):
            for (shape, dtype, device, p), task in cls.task_dict.items():
                while len(task.queue) < task.requests:
                    task.queue.append(torch_npu.npu_dropout_gen_mask(shape, p=p, dtype=dtype, device=device))

        model.register_forward_pre_hook(wait)
        model.register_forward_hook(refill)


NpuFairseqDropout = NpuCachedDropout


class NpuPreGenDropout(nn.Dropout):
    """torch_npu's pre-generated-mask dropout: here an ordinary dropout (the card's mask pool is a speed matter);
    ``enable_dropout_ensemble`` is accepted."""

    def __init__(self, p, module_name=None):
        super().__init__(p)
        self.module_name = module_name

    @classmethod
    def enable_dropout_ensemble(cls, model):
        return None


class NpuDropPath(nn.Module):
    """Stochastic depth with random draws generated ahead (in a forward pre-hook of the model passed to
    :meth:`enable_droppath_ensemble`); as on the card, until a draw exists for a shape the input passes unchanged.
    A sample is kept with ``1 - drop_prob`` and scaled by its inverse."""

    task_dict: dict = {}
    droppath_stream = None

    def __init__(self, drop_prob=None):
        super().__init__()
        self.drop_prob = drop_prob
        self.keep_prob = 1 - drop_prob

    def forward(self, x):
        if self.drop_prob == 0.0 or not self.training:
            return x
        if not isinstance(x, torch.Tensor):
            raise RuntimeError(f"torch_npu.contrib.module.NpuDropPath: input must be a tensor, got {type(x).__name__}")
        task = NpuDropPath.task_dict.setdefault((x.shape, x.device, x.dtype, x.ndim), _MaskQueue())
        if not task.queue:
            task.requests += 1
            return x
        keep = (task.queue.pop(0) + self.keep_prob).floor_()
        return x.div(self.keep_prob) * keep

    @classmethod
    def enable_droppath_ensemble(cls, model):
        if cls.droppath_stream is None:
            cls.droppath_stream = torch.npu.Stream()

        def wait(module, inputs):
            torch.npu.current_stream().wait_stream(cls.droppath_stream)

        def refill(module, inputs):
            with torch.npu.stream(cls.droppath_stream), torch.no_grad():
                for (shape, device, dtype, ndim), task in cls.task_dict.items():
                    while len(task.queue) < task.requests:
                        task.queue.append(torch.rand((shape[0],) + (1,) * (ndim - 1), dtype=dtype, device=device))

        model.register_forward_pre_hook(wait)
        model.register_forward_pre_hook(refill)


class _ConvBnAct(nn.Module):
    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        p = (k // 2 if isinstance(k, int) else [v // 2 for v in k]) if p is None else p
        self.conv = nn.Conv2d(c1, c2, k, s, p, groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.LeakyReLU(0.1, inplace=True) if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Focus(nn.Module):
    """YOLOv5's Focus: the four pixel-phase slices of ``x`` stacked on channels, then conv-BN-LeakyReLU(0.1)."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = _ConvBnAct(c1 * 4, c2, k, s, p, g, act)

    def forward(self, x):
        return self.conv(torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1))


class FastBatchNorm1d(nn.BatchNorm1d):
    """BatchNorm1d (the card's variant keeps an int32 batch count; the arithmetic is the same)."""


class FastBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d (the card's variant keeps an int32 batch count; the arithmetic is the same)."""


class FastBatchNorm3d(nn.BatchNorm3d):
    """BatchNorm3d (the card's variant keeps an int32 batch count; the arithmetic is the same)."""


class FastSyncBatchNorm(nn.SyncBatchNorm):
    """SyncBatchNorm (the card's variant keeps an int32 batch count; the arithmetic is the same)."""

    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, process_group, device=device,
                         dtype=dtype)


class DropoutWithByteMask(nn.Module):
    """Dropout through torch_npu.dropout_with_byte_mask."""

    def __init__(self, p=0.5, inplace=False, max_seed=2 ** 10 - 1):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input1):
        from torch_npu.contrib.function import dropout_with_byte_mask

        return dropout_with_byte_mask(input1, self.p, self.training, self.inplace)


def _refused_module(name: str, why: str):
    refuse = refusal(name, "torch_npu.contrib.module", why)

    def __init__(self, *args, **kwargs):
        refuse()

    cls = type(name, (nn.Module,), {"__init__": __init__, "__doc__": f"Not emulated: {why}.",
                                    "__torchport_refused__": True, "__module__": __name__})
    return cls


class PSROIPool(nn.Module):
    """Position-sensitive RoI pooling through torch_npu.npu_ps_roi_pooling (rois ``[batch, 5, rois_num]``)."""

    def __init__(self, pooled_height=7, pooled_width=7, spatial_scale=1 / 16.0, group_size=7, output_dim=22):
        super().__init__()
        if not pooled_height == pooled_width == group_size:
            raise ValueError("PSROIPool: only pooled_height == pooled_width == group_size supported (as on the card)")
        self.pooled_height, self.pooled_width = pooled_height, pooled_width
        self.group_size, self.spatial_scale, self.output_dim = group_size, spatial_scale, output_dim

    def forward(self, features, rois):
        return torch_npu.npu_ps_roi_pooling(features, rois, self.spatial_scale, self.group_size, self.output_dim)


class ModulatedDeformConv(nn.Module):
    """mmcv-style modulated deformable convolution (DCNv2) through torch_npu.npu_deformable_conv2d, float32.

    ``pack=True``: ``conv_offset`` (zero-initialised) predicts the offsets (mmcv's (y, x) pairs) and the mask
    logits from the input; ``pack=False``: ``forward((x, offset, mask))``. Without bias the output has none.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 deformable_groups=1, bias=True, pack=True):
        super().__init__()
        from torch.nn.modules.utils import _pair

        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.groups, self.deformable_groups = groups, deformable_groups
        self.with_bias, self.pack = bias, pack
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, *self.kernel_size))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else torch.zeros(out_channels)
        if pack:
            self.conv_offset = nn.Conv2d(in_channels, deformable_groups * 3 * self.kernel_size[0] * self.kernel_size[1],
                                         kernel_size=self.kernel_size, stride=_pair(stride), padding=_pair(padding),
                                         bias=True)
        self.split_num = deformable_groups * 2 * self.kernel_size[0] * self.kernel_size[1]
        self.init_param()

    def init_param(self):
        fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
        bound = 1.0 / fan_in ** 0.5
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            self.bias.zero_()
            if self.pack:
                self.conv_offset.weight.zero_()
                self.conv_offset.bias.zero_()

    def forward(self, x):
        if self.pack:
            out = self.conv_offset(x)
            offset, mask = out[:, :self.split_num], torch.sigmoid(out[:, self.split_num:])
        else:
            x, offset, mask = x
        offset = offset.float()
        # the card's layout: all x offsets, then all y offsets, then the mask
        offset_all = torch.cat([offset[:, 1::2], offset[:, 0::2], mask.float()], dim=1)
        s, p, d = self.stride, self.padding, self.dilation
        out, _ = torch_npu.npu_deformable_conv2d(
            x.float(), self.weight, offset_all, self.bias if self.with_bias else None,
            kernel_size=[self.kernel_size[1], self.kernel_size[0]], stride=[1, 1, s, s], padding=[p, p, p, p],
            dilation=[1, 1, d, d], groups=self.groups, deformable_groups=self.deformable_groups, modulated=True)
        return out


DCNv2 = ModulatedDeformConv


class _NpuLinear(nn.Linear):
    """nn.Linear through torch_npu.npu_linear, for 2-D and 3-D inputs (as contrib's attention uses it)."""

    def forward(self, x):
        if x.dim() == 3:
            b, t = x.shape[:2]
            return torch_npu.npu_linear(x.reshape(-1, self.in_features), self.weight, self.bias).view(
                b, t, self.out_features)
        if x.dim() == 2:
            return torch_npu.npu_linear(x, self.weight, self.bias)
        raise RuntimeError(f"torch_npu.contrib.module.MultiheadAttention: a linear input must be 2-D or 3-D, "
                           f"got {x.dim()}-D")


class _MHAConfig:
    """``_MHAConfig.set_fussion()`` turns the fused path on (without it ``forward`` returns ``(None, None)``,
    as on the card)."""

    use_fussion_mha = False

    @classmethod
    def set_fussion(cls):
        cls.use_fussion_mha = True


def Matmul_transpose(tensor1, tensor2):  # noqa: N802 (torch_npu's name)
    from torch_npu.contrib.function import matmul_transpose

    return matmul_transpose(tensor1, tensor2)


class MultiheadAttention(nn.Module):
    """fairseq's multi-head attention as torch_npu's contrib builds it over torch_npu.npu_multi_head_attention.

    ``forward(query, key, value, bsz, tgt_len, s_len, key_padding_mask=None, ...)`` with batch-major 2-D rows
    (``[bsz * len, embed]``) and ``key_padding_mask`` an additive mask (broadcast to ``[bsz, heads, tgt, src]``)
    returns ``(attn [bsz * tgt_len, embed], None)`` once ``_MHAConfig.set_fussion()`` was called and
    ``(None, None)`` before. Dropout: an ``NpuCachedDropout`` mask (none until its ensemble has generated one).
    ``q_noise > 0`` (fairseq's quantisation noise) is not emulated.
    """

    def __init__(self, embed_dim, num_heads, kdim=None, vdim=None, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, self_attention=False, encoder_decoder_attention=False, q_noise=0.0,
                 qn_block_size=8):
        super().__init__()
        if q_noise > 0:
            refusal("MultiheadAttention(q_noise > 0)", "torch_npu.contrib.module",
                    "fairseq's quantisation noise; use q_noise=0")()
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.qkv_same_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout_module = NpuCachedDropout(dropout, module_name=type(self).__name__)
        self.dropout_prob = dropout
        self.use_dropout_optim = True
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError("MultiheadAttention: embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim ** -0.5
        self.self_attention, self.encoder_decoder_attention = self_attention, encoder_decoder_attention
        if self_attention and not self.qkv_same_dim:
            raise ValueError("MultiheadAttention: self-attention requires query, key and value of the same size")
        self.k_proj = _NpuLinear(self.kdim, embed_dim, bias=bias)
        self.v_proj = _NpuLinear(self.vdim, embed_dim, bias=bias)
        self.q_proj = _NpuLinear(embed_dim, embed_dim, bias=bias)
        self.out_proj = _NpuLinear(embed_dim, embed_dim, bias=bias)
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, embed_dim))
            self.bias_v = nn.Parameter(torch.empty(1, 1, embed_dim))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self.reset_parameters()
        self.onnx_trace = self.tpu = False

    def prepare_for_onnx_export_(self):
        self.onnx_trace = True

    def prepare_for_tpu_(self, **kwargs):
        self.tpu = True

    def reset_parameters(self):
        gain = 1 / 2 ** 0.5 if self.qkv_same_dim else 1.0
        for proj in (self.k_proj, self.v_proj, self.q_proj):
            nn.init.xavier_uniform_(proj.weight, gain=gain)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.constant_(self.out_proj.bias, 0.0)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                nn.init.xavier_normal_(b)

    def forward(self, query, key, value, bsz, tgt_len, s_len, key_padding_mask=None, incremental_state=None,
                need_weights=True, static_kv=False, attn_mask=None, before_softmax=False, need_head_weights=False):
        if not _MHAConfig.use_fussion_mha:
            return None, None
        return self.multi_attn(query, key, value, key_padding_mask, bsz, tgt_len), None

    def multi_attn(self, query, key, value, key_padding_mask, bsz, tgt_len):
        src_len = key.size(0) // bsz
        mask = self.dropout_module([(bsz, self.num_heads, tgt_len, src_len), query.dtype, query.device])
        return torch_npu.npu_multi_head_attention(
            query, key, value, self.q_proj.weight, self.k_proj.weight, self.v_proj.weight, key_padding_mask,
            self.out_proj.weight, self.q_proj.bias, self.k_proj.bias, self.v_proj.bias, self.out_proj.bias, mask,
            self.num_heads, self.head_dim, src_len, tgt_len, self.dropout_prob, True)[0]

    def apply_sparse_mask(self, attn_weights, tgt_len: int, src_len: int, bsz: int):
        return attn_weights

    def upgrade_state_dict_named(self, state_dict, name):
        """A packed ``in_proj_weight`` / ``in_proj_bias`` becomes the q/k/v projections (fairseq's upgrade)."""
        prefix = name + "." if name else ""
        for suffix in ("weight", "bias"):
            for k in [k for k in state_dict if k.endswith(prefix + "in_proj_" + suffix)]:
                packed = state_dict.pop(k)
                dim = packed.shape[0] // 3
                for i, part in enumerate("qkv"):
                    state_dict[f"{prefix}{part}_proj.{suffix}"] = packed[i * dim:(i + 1) * dim]


class FusedColorJitter(nn.Module):
    """torch_npu's one-matmul colour jitter of an HWC image (PIL image or array; host code on the card too).

    Per call, uniform draws from Python's ``random`` (in this order: hue in [-h, h], saturation in
    [max(0, 1 - s), 1 + s], contrast in [max(0, 1 - c), 1 + c], brightness in [max(0, 1 - b), 1 + b]) make
    one 3x3 matrix -- YIQ hue rotation by ``hue * 255`` degrees and saturation scaling, times brightness *
    contrast -- and an offset ``(1 - contrast) * brightness * 127.5``; ``pixel @ matrix + offset``, clipped to
    [0, 255], in the input's dtype (a PIL image comes back as an RGB PIL image). As torch_npu 2.14.0 does, the
    constructor's (brightness, contrast, saturation, hue) reach those draws in the order (hue, saturation,
    contrast, brightness): ``brightness`` sets the hue range, ``contrast`` the saturation range, and so on.
    """

    #: RGB -> luma rows, and the saturation (cos) / hue (sin) terms of the YIQ rotation, as 3-digit constants
    _LUMA = (0.299, 0.587, 0.114)
    _COS = ((0.701, -0.299, -0.300), (-0.587, 0.413, -0.588), (-0.114, -0.114, 0.886))
    _SIN = ((0.168, -0.328, 1.250), (0.330, 0.035, -1.050), (-0.497, 0.292, -0.203))

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        warnings.warn("torch_npu.contrib.module.FusedColorJitter is deprecated. Please use "
                      "torchvision.transforms.ColorJitter as a replacement.", FutureWarning)
        self.brightness = self._check_input(brightness, "brightness")
        self.contrast = self._check_input(contrast, "contrast")
        self.saturation = self._check_input(saturation, "saturation")
        self.hue = self._check_input(hue, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False)
        # the card's positional hand-over (see the class note)
        self._ranges = {"hue": brightness, "saturation": contrast, "contrast": saturation, "brightness": hue}

    @staticmethod
    def _check_input(value, name, center=1, bound=(0, float("inf")), clip_first_on_zero=True):
        import numbers

        if isinstance(value, numbers.Number):
            if value < 0:
                raise ValueError(f"If {name} is a single number, it must be non negative.")
            value = [center - float(value), center + float(value)]
            if clip_first_on_zero:
                value[0] = max(value[0], 0.0)
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            if not bound[0] <= value[0] <= value[1] <= bound[1]:
                raise ValueError(f"{name} values should be between {bound}")
        else:
            raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
        return None if value[0] == value[1] == center else value

    def transform(self):
        """One draw: ``(matrix [3, 3], offset)`` for ``pixel_row @ matrix + offset``."""
        import math
        import random

        import numpy as np

        r = self._ranges
        hue = random.uniform(-r["hue"], r["hue"])
        sat = random.uniform(max(0, 1.0 - r["saturation"]), 1 + r["saturation"])
        con = random.uniform(max(0, 1.0 - r["contrast"]), 1 + r["contrast"])
        bri = random.uniform(max(0, 1.0 - r["brightness"]), 1 + r["brightness"])
        angle = hue * 255.0 * math.pi / 180.0
        luma = np.repeat(np.array(self._LUMA, dtype=np.float32)[:, None], 3, axis=1)
        m = luma + sat * math.cos(angle) * np.array(self._COS, np.float32) + \
            sat * math.sin(angle) * np.array(self._SIN, np.float32)
        return m * bri * con, (1.0 - con) * bri * 127.5

    def forward(self, img):
        import numpy as np
        from PIL import Image

        matrix, offset = self.transform()
        is_pil = isinstance(img, Image.Image)
        arr = np.asarray(img, dtype=np.float32) if is_pil else img
        dtype = np.uint8 if is_pil else arr.dtype
        if arr.ndim != 3 or arr.shape[2] not in (1, 3, 4):
            raise ValueError(f"FusedColorJitter: expected an HWC image with 1, 3 or 4 channels, got {arr.shape}")
        if arr.shape[2] == 4:
            arr = arr[:, :, :3]
        elif arr.shape[2] == 1:
            arr = arr.repeat(3, axis=-1)
        h, w, _ = arr.shape
        out = (np.matmul(arr.reshape(-1, 3), matrix) + offset).reshape(h, w, 3)
        out = out.clip(0.0, 255.0).astype(dtype)
        return Image.fromarray(out) if is_pil else out   # uint8 HxWx3: RGB

    def __repr__(self):
        return (f"{type(self).__name__}(brightness={self.brightness}, contrast={self.contrast}, "
                f"saturation={self.saturation}, hue={self.hue})")
LinearA8W8Quant = _refused_module("LinearA8W8Quant", "it runs torch_npu.npu_quant_matmul (int8 inference)")
LinearQuant = _refused_module("LinearQuant", "it runs torch_npu.npu_quant_matmul (int8 inference)")
LinearWeightQuant = _refused_module("LinearWeightQuant", "it runs torch_npu.npu_weight_quant_batchmatmul "
                                    "(quantised inference)")
QuantConv2d = _refused_module("QuantConv2d", "it runs torch_npu.npu_quant_conv2d (int8 inference)")
