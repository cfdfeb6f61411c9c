"""torch_npu's Python surfaces beside its ops on the emulated NPU: ``contrib.function``, ``contrib.module``,
``utils.npu_combine_tensors`` ... and ``testing.decorator``. Every name of the wheel's list exists; each emulated
one is checked against hand-computed values or the documented formula in plain CPU torch; the rest refuse in
one line naming themselves."""

from __future__ import annotations

import importlib
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

#: names of the wheel's list that refuse (one line, "is not emulated"); every other name works (tests below)
REFUSED = {"LinearA8W8Quant", "LinearQuant", "LinearWeightQuant",
           "QuantConv2d", "FlopsCounter", "set_thread_affinity", "reset_thread_affinity", "save_async",
           "set_asd_loss_scale", "register_asd_hook"}


@pytest.fixture
def tnpu(emulated_npu):
    import torch_npu

    warnings.filterwarnings("ignore", category=FutureWarning)   # contrib's deprecation notes, as on the card
    return torch_npu


def _close(a, b, tol=1e-5):
    torch.testing.assert_close(a.detach().cpu().float(), torch.as_tensor(b).detach().cpu().float(), atol=tol, rtol=tol)


def test_every_name_of_the_wheels_list_exists_and_refused_ones_fail_in_one_line(tnpu):
    from torch_npu._ops._registry import NotEmulated, python_names

    entries = [e.split() for e in python_names()]
    assert len(entries) > 90 and {m for m, _ in entries} == {
        "torch_npu.contrib", "torch_npu.contrib.function", "torch_npu.contrib.module", "torch_npu.utils",
        "torch_npu.testing.decorator"}
    refused_seen = set()
    for module, name in entries:
        obj = getattr(importlib.import_module(module), name, None)
        assert obj is not None, f"{module}.{name} missing from the stand-in"
        if getattr(obj, "__torchport_refused__", False):
            refused_seen.add(name)
            with pytest.raises(NotEmulated) as exc:
                obj()
            msg = str(exc.value)
            assert "\n" not in msg and f".{obj.__name__} is not emulated (" in msg and msg.startswith("torch_npu."), msg
    assert refused_seen == REFUSED


# --- contrib.function ---------------------------------------------------------------------------------------

def test_iou_family(tnpu):
    from torch_npu.contrib.function import npu_ciou, npu_diou, npu_giou, npu_iou, npu_ptiou

    b1 = torch.tensor([[0.0, 0.0, 2.0, 2.0]])
    b2 = torch.tensor([[1.0, 1.0, 3.0, 3.0], [0.0, 0.0, 2.0, 2.0]])
    # overlap / (union + 0.001): 1 / 7.001 and 4 / 4.001; [len(boxes1), len(boxes2)]
    _close(npu_ptiou(b1.npu(), b2.npu()), [[1 / 7.001, 4 / 4.001]])
    _close(npu_iou(b1.npu(), b2.npu(), mode="iou"), [[1.001 / 7.001, 4.001 / 4.001]])
    _close(npu_iou(b1.npu() / 100, b2.npu() / 100, is_normalized=True), [[1 / 7.001, 4 / 4.001]], 1e-4)
    with pytest.raises(ValueError, match="mode must be 'iou' or 'ptiou'"):
        npu_iou(b1.npu(), b2.npu(), mode="giou")
    # (cx, cy, w, h): boxes (0,0)-(2,2) and (1,1)-(3,3): IoU 1/7, enclosing 9, centres 2 apart squared, diag^2 18
    p, g = torch.tensor([[1.0, 1.0, 2.0, 2.0]]), torch.tensor([[2.0, 2.0, 2.0, 2.0]])
    _close(npu_giou(p.npu(), g.npu()), [[1 / 7 - 2 / 9]])
    _close(npu_diou(p.t().npu(), g.t().npu()), [[1 / 7 - 2 / 18]])
    _close(npu_ciou(p.t().npu(), g.t().npu()), [[1 / 7 - 2 / 18]])        # same aspect: v = 0
    # a wider gt: w/h 4/2 vs 2/2; CIoU = DIoU - alpha v, v = 4/pi^2 (atan 2 - atan 1)^2, alpha = v / (1 - IoU + v)
    g2 = torch.tensor([[2.0, 1.0, 4.0, 2.0]])                               # (0,0)-(4,2): IoU 4/8, centres 1 apart
    iou, diou = 0.5, 0.5 - 1 / 20
    v = 4 / math.pi ** 2 * (math.atan(2) - math.atan(1)) ** 2
    _close(npu_ciou(p.t().npu(), g2.t().npu()), [[diou - v / (1 - iou + v) * v]])
    x = p.t().clone().npu().requires_grad_()
    npu_diou(x, g2.t().npu()).sum().backward()                            # the card has a backward: so here
    assert x.grad is not None and x.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="must have the same shape"):
        npu_giou(p.npu(), torch.ones(2, 4).npu())


def test_multiclass_nms(tnpu):
    from torch_npu.contrib.function import npu_batched_multiclass_nms, npu_multiclass_nms

    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]])
    scores = torch.tensor([[0.9, 0.1, 0.0], [0.8, 0.1, 0.0], [0.1, 0.7, 0.0]])    # 2 classes + background
    dets, labels = npu_multiclass_nms(boxes.npu(), scores.npu(), score_thr=0.5, nms_thr=0.5, max_num=4)
    # class 0: box 0 (0.9) suppresses box 1 (IoU 81/100); class 1: box 2 (0.7); the rest zero-padded
    assert dets.shape == (4, 5) and labels.shape == (4,)
    _close(dets[:2], [[0, 0, 10, 10, 0.9], [20, 20, 30, 30, 0.7]], 1e-3)
    assert labels.cpu().tolist()[:2] == [0, 1] and dets.cpu()[2:].eq(0).all()
    bd, bl = npu_batched_multiclass_nms(boxes[None].npu(), scores[None].npu(), score_thr=0.5, nms_thr=0.5, max_num=4)
    _close(bd[0], dets, 1e-3)
    assert bl[0].cpu().tolist() == labels.cpu().tolist()


def test_box_coders_flags_and_index_put(tnpu):
    from torch_npu.contrib import function as f

    anchors = torch.tensor([[0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 25.0, 15.0]])
    gts = torch.tensor([[0.0, 0.0, 10.0, 10.0], [7.0, 4.0, 23.0, 18.0]])
    deltas = f.npu_bbox_coder_encode_xyxy2xywh(anchors.npu(), gts.npu())
    _close(deltas[0], [0, 0, 0, 0], 1e-4)                                  # a box encodes to zero against itself
    _close(f.npu_bbox_coder_decode_xywh2xyxy(anchors.npu(), deltas), gts, 1e-3)   # decode inverts encode
    with pytest.raises(ValueError, match=r"must both be \[n, 4\]"):
        f.npu_bbox_coder_encode_xyxy2xywh(anchors.npu(), gts[:1].npu())
    # featmap 2x2, stride 16: a gt centred at (24, 8) lies in cell (row 0, col 1); 2 anchors a cell
    flags = f.npu_single_level_responsible_flags((2, 2), torch.tensor([[16.0, 0.0, 32.0, 16.0]]).npu(), (16, 16), 2)
    assert flags.cpu().tolist() == [0, 0, 1, 1, 0, 0, 0, 0]
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = f.npu_fast_condition_index_put(x.npu(), (x > 2).npu(), 0.5)
    _close(out, [[1.0, 2.0], [0.5, 0.5]])
    with pytest.raises(TypeError, match="condition must be bool"):
        f.npu_fast_condition_index_put(x.npu(), x.npu(), 0)


def test_roll_matmul_transpose_and_softmax_dropout(tnpu):
    from torch_npu.contrib.function import fuse_add_softmax_dropout, matmul_transpose, roll

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 5, 3, generator=g)
    xn = x.npu().requires_grad_()
    out = roll(xn, (1, -2), (1, 2))
    _close(out, torch.roll(x, (1, -2), (1, 2)))
    (out * torch.arange(120.0).reshape(2, 4, 5, 3).npu()).sum().backward()
    _close(xn.grad, torch.roll(torch.arange(120.0).reshape(2, 4, 5, 3), (-1, 2), (1, 2)))
    with pytest.raises(ValueError, match="4-d"):
        roll(torch.ones(2, 3).npu(), (1, 1), (0, 1))
    a, b = torch.randn(3, 4, 5, generator=g), torch.randn(3, 6, 5, generator=g)
    an, bn = a.npu().requires_grad_(), b.npu().requires_grad_()
    out = matmul_transpose(an, bn)
    _close(out, torch.einsum("bik,bjk->bij", a, b), 1e-5)
    go = torch.randn(3, 4, 6, generator=g)
    out.backward(go.npu())
    _close(an.grad, go @ b, 1e-5)
    _close(bn.grad, go.transpose(1, 2) @ a, 1e-5)
    for shape in ((1, 2, 4, 4), (4, 8, 128, 16)):                         # the general path, the fused-kernel path
        scores, mask = torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)
        want = F.softmax(mask + scores / math.sqrt(16), dim=-1)
        got = fuse_add_softmax_dropout(False, nn.Dropout(0.3).eval(), mask.npu(), scores.npu(), 16, p=0.3)
        _close(got, want, 1e-5)


def test_dropout_with_byte_mask(tnpu):
    from torch_npu.contrib.function import dropout_with_byte_mask

    x = torch.ones(64, 64).npu()
    _close(dropout_with_byte_mask(x, 0.25, training=False), torch.ones(64, 64))
    out = dropout_with_byte_mask(x, 0.25).cpu()
    kept = torch.tensor(1 / 0.75)
    assert (out.eq(0) | out.eq(kept)).all() and 0.15 < out.eq(0).float().mean() < 0.35
    xr = torch.ones(8, 8).npu().requires_grad_()
    out = tnpu.dropout_with_byte_mask(xr, 0.5, True)
    out.sum().backward()
    _close(xr.grad, out.detach())                                          # d(x m / (1-p))/dx = m / (1-p)
    with pytest.raises(ValueError, match="between 0 and 1"):
        dropout_with_byte_mask(x, 1.5)
    with pytest.raises(ValueError, match="inplace=True"):
        dropout_with_byte_mask(x, 0.5, inplace=True)


# --- contrib.module -----------------------------------------------------------------------------------------

def test_channel_shuffle(tnpu):
    from torch_npu.contrib.module import ChannelShuffle

    x1 = torch.arange(2.0).reshape(1, 2, 1, 1).npu().requires_grad_()
    x2 = torch.arange(2.0, 4.0).reshape(1, 2, 1, 1).npu().requires_grad_()
    a, b = ChannelShuffle(4, groups=2)(x1, x2)
    assert a.flatten().cpu().tolist() == [0, 2] and b.flatten().cpu().tolist() == [1, 3]
    (a.flatten() * torch.tensor([1.0, 2.0]).npu()).sum().backward()          # channel 0 weighs 1, channel 2 weighs 2
    assert x1.grad.flatten().tolist() == [1, 0] and x2.grad.flatten().tolist() == [2, 0]
    full = ChannelShuffle(6, groups=3, split_shuffle=False)(torch.arange(3.0).reshape(1, 3, 1, 1).npu(),
                                                            torch.arange(3.0, 6.0).reshape(1, 3, 1, 1).npu())
    assert full.flatten().cpu().tolist() == [0, 2, 4, 1, 3, 5]


def test_label_smoothing_and_activations(tnpu):
    from torch_npu.contrib.module import LabelSmoothingCrossEntropy, Mish, SiLU, Swish

    g = torch.Generator().manual_seed(1)
    logits, target = torch.randn(5, 4, generator=g), torch.tensor([0, 3, 1, 1, 2])
    q = torch.full((5, 4), 0.1 / 3).scatter_(1, target[:, None], 0.9)
    want = -(q * F.log_softmax(logits, 1)).sum(1).mean()
    _close(LabelSmoothingCrossEntropy(4, 0.1)(logits.npu(), target.npu()), want)
    x = torch.linspace(-3, 3, 13)
    _close(Mish()(x.npu()), x * torch.tanh(F.softplus(x)))
    _close(SiLU()(x.npu()), x / (1 + torch.exp(-x)))
    assert Swish is SiLU


def test_roi_align(tnpu):
    from torch_npu.contrib.module import ROIAlign

    feat = torch.arange(4.0).repeat(4, 1)[None, None]                       # f(y, x) = x on a 4x4 map
    rois = torch.tensor([[0.0, 0.0, 0.0, 4.0, 4.0]])
    # aligned: the RoI shifts by -0.5 -> bins [-0.5, 1.5], [1.5, 3.5]; 2 samples a bin at x = 0, 1 and 2, 3
    _close(ROIAlign((2, 2), 1.0, 2, aligned=True)(feat.npu(), rois.npu()), [[[[0.5, 2.5], [0.5, 2.5]]]])
    # not aligned: samples at 0.5, 1.5 and 2.5, 3.5 (3.5 clamps to the last column, 3)
    _close(ROIAlign((2, 2), 1.0, 2, aligned=False)(feat.npu(), rois.npu()), [[[[1.0, 2.75], [1.0, 2.75]]]])
    with pytest.raises(ValueError, match=r"rois must be \[K, 5\]"):
        ROIAlign(2, 1.0, 2)(feat.npu(), rois[:, 1:].npu())


def test_bilstm_focus_batchnorm_and_byte_mask_dropout(tnpu):
    from torch_npu.contrib.module import BiLSTM, DropoutWithByteMask, FastBatchNorm2d, Focus

    torch.manual_seed(0)
    m = BiLSTM(3, 4).npu()
    x = torch.randn(5, 2, 3)
    out = m(x.npu())
    fw, _ = m.fw_rnn(x.npu())
    bw, _ = m.bw_rnn(x.flip(0).npu())
    assert out.shape == (5, 2, 8)
    _close(out[..., :4], fw)
    _close(out[..., 4:], bw.flip(0))
    f = Focus(1, 4)
    f.conv = nn.Identity()                                                  # look at what reaches the conv
    img = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    assert f(img.npu()).flatten().cpu().tolist() == [1.0, 3.0, 2.0, 4.0]   # (even,even) (odd,even) (even,odd) (odd,odd)
    assert Focus(3, 8, k=3).npu()(torch.randn(2, 3, 8, 8).npu()).shape == (2, 8, 4, 4)
    y = torch.randn(4, 3, 2, 2)
    _close(FastBatchNorm2d(3).npu()(y.npu()), (y - y.mean((0, 2, 3), keepdim=True))
           / torch.sqrt(y.var((0, 2, 3), unbiased=False, keepdim=True) + 1e-5), 1e-4)
    d = DropoutWithByteMask(0.5).eval()
    _close(d(torch.ones(3).npu()), [1, 1, 1])
    with pytest.raises(ValueError, match="between 0 and 1"):
        DropoutWithByteMask(2.0)


def test_cached_dropout_and_drop_path_follow_the_cards_queue(tnpu):
    from torch_npu.contrib.module import NpuCachedDropout, NpuDropPath, NpuFairseqDropout

    assert NpuFairseqDropout is NpuCachedDropout
    torch.manual_seed(0)
    NpuCachedDropout.task_dict.clear()
    NpuDropPath.task_dict.clear()
    drop, path = NpuCachedDropout(0.5), NpuDropPath(0.5)
    model = nn.Sequential(drop, path).npu()
    x = torch.ones(16, 32).npu()
    _close(model(x), torch.ones(16, 32))            # no mask yet: unchanged, as on the card
    NpuCachedDropout.enable_dropout_ensemble(model)
    NpuDropPath.enable_droppath_ensemble(model)
    # drop path's draws are made before the model's forward (so it applies now), dropout's masks after it
    out = model(x).cpu()
    rows = {tuple(r.unique().tolist()) for r in out}
    assert rows == {(0.0,), (2.0,)}                 # whole samples dropped, or kept and scaled by 1 / keep_prob
    out = drop(x).cpu()
    assert set(out.unique().tolist()) == {0.0, 2.0}
    _close(path.eval()(x), torch.ones(16, 32))
    NpuCachedDropout.task_dict.clear()
    NpuDropPath.task_dict.clear()


def test_prefetcher_moves_batches_to_the_npu(tnpu):
    from torch_npu.contrib.module import Prefetcher

    loader = [(torch.ones(2, 3), torch.tensor([0, 1])), (torch.zeros(2, 3), torch.tensor([1, 0]))]
    p = Prefetcher(loader)
    x, y = p.next()
    assert x.device.type == "npu" and y.cpu().tolist() == [0, 1]
    x, y = p.next()
    assert x.cpu().sum() == 0 and y.cpu().tolist() == [1, 0]
    assert p.next() == (None, None)


# --- utils, testing.decorator -------------------------------------------------------------------------------

def test_npu_combine_tensors(tnpu):
    from torch_npu.utils import get_part_combined_tensor, is_combined_tensor_valid, npu_combine_tensors

    a, b = torch.tensor([1.0, 2.0]).npu(), torch.tensor([[3.0], [4.0], [5.0]]).npu()
    combined = npu_combine_tensors([a, b])
    assert combined.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0] and b.shape == (3, 1)
    combined.mul_(10)                               # the tensors are views of the buffer now
    assert a.cpu().tolist() == [10.0, 20.0] and b.flatten().cpu().tolist() == [30.0, 40.0, 50.0]
    assert is_combined_tensor_valid(combined, [a, b]) and not is_combined_tensor_valid(combined, [torch.ones(2).npu()])
    part = get_part_combined_tensor(combined, 2, 3)
    part.zero_()
    assert b.flatten().cpu().tolist() == [0.0, 0.0, 0.0]
    assert npu_combine_tensors([]) is None and get_part_combined_tensor(combined, 0, 0) is None
    with pytest.raises(RuntimeError, match="must not be None"):
        npu_combine_tensors([a, None])
    with pytest.raises(RuntimeError, match="must be on npu"):
        npu_combine_tensors([torch.ones(2)])
    with pytest.raises(RuntimeError, match=r"index \+ size \(9\)"):
        get_part_combined_tensor(combined, 4, 5)


def test_testing_decorator_generates_one_test_per_combination(tnpu):
    from torch_npu.testing.decorator import Dtypes, Formats, instantiate_tests

    seen = []

    @instantiate_tests
    class T:
        @Dtypes(torch.float16, torch.float32)
        @Formats(0, 2)
        def test_x(self, device, dtype, npu_format):
            seen.append((device, dtype, npu_format))

        def test_plain(self):
            return "kept"

    names = sorted(n for n in vars(T) if n.startswith("test_"))
    assert names == ["test_plain", "test_x_float16_0", "test_x_float16_2", "test_x_float32_0", "test_x_float32_2"]
    T().test_x_float32_2()
    assert seen == [("npu", torch.float32, 2)] and T().test_plain() == "kept"
    with pytest.raises(RuntimeError, match="No dtypes given"):
        Dtypes()


def test_the_wheels_submodule_paths_import(tnpu):
    """ModelZoo writes ``from torch_npu.contrib.module.deform_conv import ModulatedDeformConv``."""
    from torch_npu.contrib import function, module
    from torch_npu.contrib.function.iou import npu_giou
    from torch_npu.contrib.module._ensemble_dropout import NpuPreGenDropout
    from torch_npu.contrib.module.deform_conv import ModulatedDeformConv

    assert npu_giou is function.npu_giou and NpuPreGenDropout is module.NpuPreGenDropout
    assert ModulatedDeformConv is module.ModulatedDeformConv
    assert callable(function.roll) and callable(function.matmul_transpose)


def test_ps_roi_pool(tnpu):
    from torch_npu.contrib.module import PSROIPool

    gs, dim = 2, 3
    # channel c holds the constant c: bin (i, j) of output channel o averages channel o * gs * gs + i * gs + j
    feat = torch.arange(dim * gs * gs, dtype=torch.float32)[None, :, None, None].expand(2, -1, 8, 8).contiguous()
    feat[1] += 100.0                                                        # image 1 = image 0 + 100
    rois = torch.tensor([[[0.0], [0.0], [0.0], [7.0], [7.0]], [[1.0], [2.0], [2.0], [5.0], [6.0]]])  # [2, 5, 1]
    out = PSROIPool(gs, gs, 1.0, gs, dim)(feat.npu(), rois.npu())
    assert out.device.type == "npu" and out.shape == (2, dim, gs, gs)
    want = torch.arange(dim * gs * gs, dtype=torch.float32).reshape(dim, gs, gs)
    _close(out, torch.stack([want, want + 100.0]))
    # on f(y, x) = x over 10 x 10, RoI (0, 0)-(8, 8) at scale 1 (corners rounded, end exclusive: torchvision's
    # rule, assumed for the card): bins are columns [0, 4) and [4, 8) -> 1.5, 5.5; x2 = 7: [0, 4), [3, 7) -> 4.5
    ramp = torch.arange(10.0).repeat(10, 1).expand(1, dim * gs * gs, 10, 10).contiguous()
    full = torch.tensor([[[0.0], [0.0], [0.0], [8.0], [8.0]]])
    _close(PSROIPool(gs, gs, 1.0, gs, dim)(ramp.npu(), full.npu())[0, 0], [[1.5, 5.5], [1.5, 5.5]])
    _close(PSROIPool(gs, gs, 1.0, gs, dim)(ramp.npu(), rois[:1].npu())[0, 0], [[1.5, 4.5], [1.5, 4.5]])
    with pytest.raises(ValueError, match="pooled_height == pooled_width == group_size"):
        PSROIPool(2, 3, 1.0, 2, 3)
    with pytest.raises(ValueError, match=r"rois must be \[batch, 5, rois_num\]"):
        PSROIPool(gs, gs, 1.0, gs, dim)(feat.npu(), rois[:, :, 0].npu())


def test_modulated_deform_conv(tnpu):
    from torch_npu.contrib.module import DCNv2, ModulatedDeformConv

    assert DCNv2 is ModulatedDeformConv
    torch.manual_seed(0)
    x = torch.randn(2, 4, 6, 6)
    m = ModulatedDeformConv(4, 5, 3, 1, 1).npu()
    assert torch.count_nonzero(m.conv_offset.weight) == 0 and torch.count_nonzero(m.bias) == 0
    with torch.no_grad():
        m.bias.copy_(torch.arange(5.0))
    xn = x.npu().requires_grad_()
    out = m(xn)
    # zero-initialised offset conv: offset 0, mask sigmoid(0) = 1/2 -> half a plain convolution, plus the bias
    want = 0.5 * F.conv2d(x, m.weight.detach().cpu(), padding=1) + torch.arange(5.0)[:, None, None]
    assert out.device.type == "npu"
    _close(out, want, 1e-5)
    out.sum().backward()
    _close(xn.grad, 0.5 * F.conv_transpose2d(torch.ones(2, 5, 6, 6), m.weight.detach().cpu(), padding=1), 1e-5)
    assert m.weight.grad is not None and m.conv_offset.weight.grad is not None
    # unpacked, mmcv's (y, x) offset pairs: x offset +1 everywhere, mask 1 = convolution of the image shifted left
    u = ModulatedDeformConv(4, 5, 3, 1, 1, bias=False, pack=False).npu()
    offset = torch.zeros(2, 18, 6, 6)
    offset[:, 1::2] = 1.0
    got = u((x.npu(), offset.npu(), torch.ones(2, 9, 6, 6).npu()))
    # tap t of output column j reads x column j + t (zero outside): a valid convolution of x padded (0, 2) in x
    _close(got, F.conv2d(F.pad(x, (0, 2, 1, 1)), u.weight.detach().cpu()), 1e-5)
    # y offset +1, mask 0.25: a quarter of the convolution of the image shifted up
    offset = torch.zeros(2, 18, 6, 6)
    offset[:, 0::2] = 1.0
    got = u((x.npu(), offset.npu(), torch.full((2, 9, 6, 6), 0.25).npu()))
    _close(got, 0.25 * F.conv2d(F.pad(x, (1, 1, 0, 2)), u.weight.detach().cpu()), 1e-5)


def _bert_attention(h, mask, wq, wk, wv, bq, bk, bv, scale):
    """BERT self-attention written out: heads of 64 over [B * S, H] rows."""
    b, s = mask.shape[0], h.shape[0] // mask.shape[0]
    split = lambda t: t.view(b, s, -1, 64).transpose(1, 2)          # noqa: E731
    q, k, v = split(h @ wq + bq), split(h @ wk + bk), split(h @ wv + bv)
    p = torch.softmax(q @ k.transpose(2, 3) * scale + mask, -1)
    return (p @ v).transpose(1, 2).reshape(b * s, -1)


def test_fused_attention_and_with_layernorm(tnpu):
    from torch_npu.contrib.function import npu_fused_attention, npu_fused_attention_with_layernorm

    torch.manual_seed(0)
    b, s, hid = 2, 16, 768
    h = torch.randn(b * s, hid)
    mask = torch.zeros(b, 1, s, s)
    mask[1, :, :, 10:] = -10000.0                                    # the second sequence has 10 tokens
    ws = [torch.randn(hid, hid) * 0.03 for _ in range(3)]
    bs = [torch.randn(hid) * 0.1 for _ in range(3)]
    want = _bert_attention(h, mask, *ws, *bs, 0.125)
    args = [t.npu().requires_grad_() for t in (h, *ws, *bs)]
    got = npu_fused_attention(args[0], mask.npu(), *args[1:], 0.125, 1.0)
    assert got.device.type == "npu" and got.shape == (b * s, hid)
    _close(got, want, 1e-4)
    got.square().sum().backward()
    hr = h.clone().requires_grad_()
    _bert_attention(hr, mask, *ws, *bs, 0.125).square().sum().backward()
    _close(args[0].grad, hr.grad, 1e-3)
    assert all(a.grad is not None for a in args)
    gamma, beta = torch.rand(hid) + 0.5, torch.randn(hid)
    ctx, norm = npu_fused_attention_with_layernorm(h.npu(), mask.npu(), *[t.npu() for t in (*ws, *bs)],
                                                   gamma.npu(), beta.npu(), 0.125)
    mu, var = h.mean(1, keepdim=True), h.var(1, unbiased=False, keepdim=True)
    want_norm = (h - mu) / torch.sqrt(var + 1e-5) * gamma + beta
    _close(norm, want_norm, 1e-4)
    _close(ctx, _bert_attention(want_norm, mask, *ws, *bs, 0.125), 1e-4)
    # dropout of the probabilities: keep_prob 0.5 changes the result, and it stays finite
    dropped = npu_fused_attention(h.npu(), mask.npu(), *[t.npu() for t in (*ws, *bs)], 0.125, 0.5)
    assert torch.isfinite(dropped.cpu()).all() and not torch.allclose(dropped.cpu(), want, atol=1e-3)
    with pytest.raises(RuntimeError, match=r"^torch_npu\.contrib\.function\.npu_fused_attention: hidden_states is"):
        npu_fused_attention(h[:, :512].npu(), mask.npu(), *[t.npu() for t in (*ws, *bs)])


def test_fused_color_jitter(tnpu):
    import random

    import numpy as np
    from PIL import Image
    from torch_npu.contrib.module import FusedColorJitter

    with pytest.warns(FutureWarning, match="deprecated"):
        jit = FusedColorJitter(brightness=0, contrast=0, saturation=0, hue=0.5)
    assert jit.hue == [-0.5, 0.5] and jit.brightness is None
    # the card hands hue=0.5 to the brightness draw (4th of 4 uniforms): a gray pixel v -> v * b (blue: the
    # constants' column sums are 1, 1, 0.998)
    gray = np.full((2, 3, 3), 100.0, dtype=np.float32)
    random.seed(3)
    draws = [random.uniform(0, 0), random.uniform(1, 1), random.uniform(1, 1), random.uniform(0.5, 1.5)]
    random.seed(3)
    out = jit(gray)
    assert out.dtype == np.float32 and out.shape == (2, 3, 3)
    np.testing.assert_allclose(out[0, 0], [100 * draws[3], 100 * draws[3], 99.8 * draws[3]], rtol=1e-5)
    # contrast=0.8 reaches the saturation draw: out = luma + s * (pixel - luma) (textbook saturation, to the
    # 3-digit constants), clipped to [0, 255]; a PIL image comes back as a PIL image
    with pytest.warns(FutureWarning):
        sat = FusedColorJitter(contrast=0.8)
    px = np.array([[[200.0, 50.0, 10.0]]], dtype=np.float32)
    random.seed(7)
    s = [random.uniform(0, 0), random.uniform(0.2, 1.8)][1]
    random.seed(7)
    luma = 0.299 * 200 + 0.587 * 50 + 0.114 * 10
    np.testing.assert_allclose(sat(px)[0, 0], np.clip(luma + s * (px[0, 0] - luma), 0, 255), atol=0.6)
    img = Image.fromarray(np.full((4, 4, 3), 200, dtype=np.uint8))
    random.seed(0)
    res = FusedColorJitter(hue=0.4)(img)                                  # brightness in [0.6, 1.4]
    random.seed(0)
    b = [random.uniform(0, 0), random.uniform(1, 1), random.uniform(1, 1), random.uniform(0.6, 1.4)][3]
    assert isinstance(res, Image.Image) and res.mode == "RGB"
    assert np.asarray(res)[0, 0, 0] == int(min(200 * b, 255.0))
    with pytest.raises(ValueError, match="non negative"):
        FusedColorJitter(brightness=-1)
    with pytest.raises(ValueError, match="hue values should be between"):
        FusedColorJitter(hue=(0.2, 0.9))


def test_fairseq_multihead_attention(tnpu, monkeypatch):
    from torch_npu.contrib.module import MultiheadAttention
    from torch_npu.contrib.module.multihead_attention import _MHAConfig

    torch.manual_seed(0)
    bsz, tgt, src, embed, heads = 2, 3, 4, 8, 2
    m = MultiheadAttention(embed, heads, dropout=0.0).npu()
    with torch.no_grad():
        for proj in (m.q_proj, m.k_proj, m.v_proj, m.out_proj):
            proj.bias.normal_()
    q, k = torch.randn(bsz * tgt, embed), torch.randn(bsz * src, embed)
    v = torch.randn(bsz * src, embed)
    mask = torch.zeros(bsz, 1, tgt, src)
    mask[1, :, :, -1] = -1e4                                                 # batch 1: the last key is padding
    monkeypatch.setattr(_MHAConfig, "use_fussion_mha", False)
    assert m(q.npu(), k.npu(), v.npu(), bsz, tgt, src) == (None, None)       # as on the card before set_fussion()
    _MHAConfig.set_fussion()
    qn = q.npu().requires_grad_()
    out, weights = m(qn, k.npu(), v.npu(), bsz, tgt, src, key_padding_mask=mask.npu())
    assert weights is None and out.shape == (bsz * tgt, embed) and out.device.type == "npu"
    # reference: torch's own multi-head attention (time-major, packed in-projection) on the CPU
    w = {n: p.detach().cpu() for n, p in m.named_parameters()}
    qr = q.clone().requires_grad_()
    ref, _ = F.multi_head_attention_forward(
        qr.view(bsz, tgt, embed).transpose(0, 1), k.view(bsz, src, embed).transpose(0, 1),
        v.view(bsz, src, embed).transpose(0, 1), embed, heads,
        torch.cat([w["q_proj.weight"], w["k_proj.weight"], w["v_proj.weight"]]),
        torch.cat([w["q_proj.bias"], w["k_proj.bias"], w["v_proj.bias"]]), None, None, False, 0.0,
        w["out_proj.weight"], w["out_proj.bias"], training=False, need_weights=False,
        attn_mask=mask.expand(bsz, heads, tgt, src).reshape(bsz * heads, tgt, src))
    ref = ref.transpose(0, 1).reshape(bsz * tgt, embed)
    _close(out, ref, 1e-5)
    (out * torch.arange(embed).float().npu()).sum().backward()
    (ref * torch.arange(embed).float()).sum().backward()
    _close(qn.grad, qr.grad, 1e-5)
    assert m.q_proj.weight.grad is not None
    # the packed state dict of older fairseq checkpoints splits into q/k/v
    sd = {"att.in_proj_weight": torch.arange(6.0).repeat_interleave(2).view(6, 2), "att.in_proj_bias": torch.arange(6.0)}
    m.upgrade_state_dict_named(sd, "att")
    assert sorted(sd) == ["att.k_proj.bias", "att.k_proj.weight", "att.q_proj.bias", "att.q_proj.weight",
                          "att.v_proj.bias", "att.v_proj.weight"]
    assert sd["att.v_proj.bias"].tolist() == [4.0, 5.0]
    with pytest.raises(NotImplementedError, match=r"q_noise > 0\) is not emulated"):
        MultiheadAttention(embed, heads, q_noise=0.1)
