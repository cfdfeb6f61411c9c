"""torch_npu's custom ops on the emulated NPU, each against a reference computed independently: hand-computed
values or the API reference's formula written out in plain CPU torch."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F


@pytest.fixture
def tnpu(emulated_npu):
    import torch_npu

    return torch_npu


def _close(a, b, tol=1e-5):
    torch.testing.assert_close(a.cpu().float(), torch.as_tensor(b).float(), atol=tol, rtol=tol)


def test_every_wheel_op_exists_and_refused_ones_fail_in_one_line(tnpu):
    from torch_npu._ops import OPS, wheel_ops

    names = wheel_ops()
    assert len(names) > 300 and all(hasattr(tnpu, n) for n in names)
    assert not hasattr(tnpu, "npu_dropoutV2")          # not in the 2.14.0 wheel: absent, as on the card
    refused = sorted(names - set(OPS))
    with pytest.raises(NotImplementedError, match=r"^torch_npu\.npu_moe_init_routing is not emulated"):
        tnpu.npu_moe_init_routing(torch.ones(2).npu())
    assert "\n" not in str(pytest.raises(NotImplementedError, getattr(tnpu, refused[0])).value)
    with pytest.raises(RuntimeError, match=r"torch\.npu_one_hot is deprecated.*Use torch_npu\.npu_one_hot"):
        torch.npu_one_hot(torch.zeros(2, dtype=torch.long).npu())  # torch_npu 2.14.0's torch.<op>


def test_torch_alias_mode_and_uninstall_removes_the_names(monkeypatch):
    import torchport.emulate as emulate

    monkeypatch.setenv("TORCHPORT_NPU_TORCH_OPS", "alias")
    with emulate.emulated():
        import torch_npu

        x = torch.tensor([[1.0, -2.0]]).npu()
        assert torch.npu_mish is torch_npu.npu_mish
        _close(torch.npu_mish(x), x.cpu() * torch.tanh(F.softplus(x.cpu())))
    assert not hasattr(torch, "npu_mish") and not hasattr(torch, "npu_format_cast")


def test_layout_ops(tnpu):
    x = torch.arange(24.0).reshape(2, 3, 4)
    out = tnpu.npu_confusion_transpose(x.npu(), (0, 2, 1), (2, 4, 3), True)
    _close(out, x.permute(0, 2, 1).reshape(2, 4, 3))
    out = tnpu.npu_confusion_transpose(x.npu(), (0, 2, 1, 3), (2, 3, 2, 2), False)
    assert out.is_contiguous()
    _close(out, x.reshape(2, 3, 2, 2).permute(0, 2, 1, 3))
    _close(tnpu.npu_transpose(x.npu(), (2, 0, 1)), x.permute(2, 0, 1))
    # npu_pad: (before, after) from the first dim: rows 1 above 2 below, columns 3 left 4 right
    p = tnpu.npu_pad(torch.ones(2, 3).npu(), [1, 2, 3, 4])
    assert p.shape == (5, 10) and p.cpu()[1:3, 3:6].eq(1).all() and p.cpu().sum() == 6
    _close(tnpu.npu_indexing(x.npu(), [0, 1, 0], [2, 3, 4], [1, 1, 2]), x[0:2, 1:3, 0:4:2])
    _close(tnpu.npu_slice(x.npu(), [1, 0, 1], [1, 2, 2]), x[1:2, 0:2, 1:3])
    _close(tnpu.npu_broadcast(torch.tensor([1.0, 2.0]).npu(), [3, 2]), [[1, 2], [1, 2], [1, 2]])


def test_one_hot_and_max(tnpu):
    t = torch.tensor([2, 0, 3], dtype=torch.int32).npu()
    _close(tnpu.npu_one_hot(t, -1, 4, 5, -1), [[-1, -1, 5, -1], [5, -1, -1, -1], [-1, -1, -1, 5]])
    assert tnpu.npu_one_hot(t, -1, 4).dtype == torch.float32
    x = torch.tensor([[1.0, 7.0, 3.0], [9.0, 2.0, 4.0]])
    v, i = tnpu.npu_max(x.npu(), 1)
    _close(v, [7.0, 9.0])
    assert i.dtype == torch.int32 and i.cpu().tolist() == [1, 0]
    v, i = tnpu.npu_min(x.npu(), 0, keepdim=True)
    assert v.cpu().tolist() == [[1.0, 2.0, 3.0]] and i.cpu().tolist() == [[0, 1, 0]]


def test_linear_bmm_and_their_backward(tnpu):
    g = torch.Generator().manual_seed(0)
    a, w, b = torch.randn(3, 4, generator=g), torch.randn(5, 4, generator=g), torch.randn(5, generator=g)
    wn = w.npu().requires_grad_()
    out = tnpu.npu_linear(a.npu(), wn, b.npu())
    _close(out, a @ w.T + b)
    out.sum().backward()
    _close(wn.grad, torch.ones(3, 5).T @ a)          # d/dW sum(aW^T) = 1^T a
    m1, m2 = torch.randn(2, 3, 4, generator=g), torch.randn(2, 4, 5, generator=g)
    _close(tnpu.npu_bmmV2(m1.npu(), m2.npu(), []), torch.stack([m1[0] @ m2[0], m1[1] @ m2[1]]))


def test_scaled_masked_softmax(tnpu):
    x = torch.tensor([[[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [1.0, 1.0, 5.0]]]])
    mask = torch.tensor([[[[False, False, True], [False, True, True], [False, False, False]]]])
    out = tnpu.npu_scaled_masked_softmax(x.npu(), mask.npu(), 0.5)
    e = [math.exp(0.5), math.exp(1.0)]
    _close(out[0, 0, 0], [e[0] / sum(e), e[1] / sum(e), 0.0], 1e-4)
    _close(out[0, 0, 1], [1.0, 0.0, 0.0], 1e-4)
    tri = tnpu.npu_scaled_masked_softmax(x.npu(), mask.npu(), 1.0, True)   # causal: row 0 sees column 0 only
    _close(tri[0, 0, 0], [1.0, 0.0, 0.0], 1e-4)
    _close(tri[0, 0, 2], torch.softmax(x[0, 0, 2], -1), 1e-4)


def test_dropout_mask_ops(tnpu):
    x = torch.arange(1.0, 301.0).npu().requires_grad_()
    mask = tnpu.npu_dropout_gen_mask([300], 0.25, dtype=torch.float32, device=x.device)
    assert mask.dtype == torch.uint8 and mask.numel() == 48      # 300 -> 384 bits aligned to 128 -> 48 bytes
    out, m2 = tnpu.npu_dropout_do_mask(x, mask, 0.25)
    bits = [(int(mask.cpu()[i // 8]) >> (i % 8)) & 1 for i in range(300)]   # bit i%8 of byte i//8
    _close(out.detach(), torch.tensor(bits, dtype=torch.float32) * torch.arange(1.0, 301.0) / 0.75, 1e-4)
    assert 150 < sum(bits) < 290
    out.sum().backward()
    _close(x.grad, torch.tensor(bits, dtype=torch.float32) / 0.75, 1e-5)
    a, b = torch.randn(2, 4), torch.randn(2, 4)
    m, s, o = tnpu.npu_dropout_with_add_softmax(a.npu(), b.npu(), 0.5, 0.0, -1)
    _close(s, torch.softmax(b + 0.5 * a, -1))
    _close(o, torch.softmax(b + 0.5 * a, -1))


def test_losses_and_activations(tnpu):
    logits = torch.tensor([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]])
    labels = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])
    lse = torch.log(torch.exp(logits).sum(1))
    want = torch.stack([lse[0] - 2.0, lse[1] - 0.5 * 0.0 - 0.5 * 3.0])
    ln = logits.npu().requires_grad_()
    out = tnpu.npu_softmax_cross_entropy_with_logits(ln, labels.npu())
    _close(out, want)
    out.sum().backward()
    _close(ln.grad, torch.softmax(logits, 1) - labels)   # softmax - labels (labels sum to 1)
    v = torch.tensor([-2.0, 0.0, 1.5])
    _close(tnpu.npu_mish(v.npu()), v * torch.tanh(torch.log1p(torch.exp(v))))
    _close(tnpu.npu_silu(v.npu()), v / (1 + torch.exp(-v)))
    _close(tnpu.npu_fast_gelu(v.npu()), v / (1 + torch.exp(-1.702 * v.abs())) * torch.exp(0.851 * (v - v.abs())))
    x = torch.tensor([[3.0, 4.0], [1.0, 1.0]])
    y, rstd = tnpu.npu_rms_norm(x.npu(), torch.tensor([2.0, 1.0]).npu(), 0.0)
    _close(rstd, [[1 / math.sqrt(12.5)], [1.0]])
    _close(y, [[6 / math.sqrt(12.5), 4 / math.sqrt(12.5)], [2.0, 1.0]])
    h = torch.tensor([[1.0, 2.0, 0.5, -1.0]])
    out, g = tnpu.npu_geglu(h.npu(), -1, 1)
    gelu_t = 0.5 * h[:, 2:] * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h[:, 2:] + 0.044715 * h[:, 2:] ** 3)))
    _close(g, gelu_t, 1e-5)
    _close(out, h[:, :2] * gelu_t, 1e-5)
    _close(tnpu.npu_swiglu(h.npu()), h[:, :2] / (1 + torch.exp(-h[:, :2])) * h[:, 2:])


def test_rotary_mul_half_and_interleave_with_backward(tnpu):
    x = torch.tensor([[[[1.0, 2.0, 3.0, 4.0]]]])
    r1, r2 = torch.full((1, 1, 1, 4), 0.5), torch.full((1, 1, 1, 4), 2.0)
    xn = x.npu().requires_grad_()
    out = tnpu.npu_rotary_mul(xn, r1.npu(), r2.npu())
    _close(out, [[[[0.5 - 6, 1 - 8, 1.5 + 2, 2 + 4]]]])        # r1*x + r2*cat(-x2, x1)
    out.sum().backward()
    _close(xn.grad, [[[[0.5 + 2, 0.5 + 2, 0.5 - 2, 0.5 - 2]]]])
    out = tnpu.npu_rotary_mul(x.npu(), r1.npu(), r2.npu(), "interleave")
    _close(out, [[[[0.5 - 4, 1 + 2, 1.5 - 8, 2 + 6]]]])          # pairs (x0,x1) -> (-x1, x0)


def test_iou_family(tnpu):
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 15.0, 15.0]])
    gts = torch.tensor([[0.0, 0.0, 10.0, 10.0]])
    _close(tnpu.npu_iou(boxes.npu(), gts.npu()), [[100.001 / 100.001, 25.001 / 175.001]])
    _close(tnpu.npu_ptiou(boxes.npu(), gts.npu()), [[100 / 100.001, 25 / 175.001]])
    _close(tnpu.npu_ptiou(boxes.npu(), gts.npu(), 1), [[100 / 100.001, 25 / 100.001]])   # IoF: over the gt area
    # GIoU, (4, n) xyxy: disjoint unit squares 1 apart: iou 0, enclosing 3x1 = 3, union 2 -> -(3-2)/3
    p = torch.tensor([[0.0], [0.0], [1.0], [1.0]])
    g = torch.tensor([[2.0], [0.0], [3.0], [1.0]])
    _close(tnpu.npu_giou(p.npu(), g.npu()), [[-1 / 3]], 1e-5)
    pn = torch.tensor([[0.5], [0.5], [1.0], [1.0]]).npu().requires_grad_()  # xywh of the same box: trans=True
    out = tnpu.npu_giou(pn, torch.tensor([[0.5], [0.5], [1.0], [1.0]]).npu(), trans=True)
    _close(out, [[1.0]], 1e-5)
    out.sum().backward()
    assert pn.grad is not None


def test_bounding_box_encode_decode_round_trip(tnpu):
    anchors = torch.tensor([[1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 6.0]])
    gts = torch.tensor([[5.0, 6.0, 7.0, 8.0], [7.0, 8.0, 9.0, 6.0]])
    d = tnpu.npu_bounding_box_encode(anchors.npu(), gts.npu(), 0, 0, 0, 0, 0.1, 0.1, 0.2, 0.2)
    # first row by hand: centres (2,3) -> (6,7), widths 3 -> 3: dx = 4/3 / 0.1, dw = log(1) / 0.2
    _close(d[0], [4 / 3 / 0.1, 4 / 3 / 0.1, 0.0, 0.0], 1e-4)
    back = tnpu.npu_bounding_box_decode(anchors.npu(), d, 0, 0, 0, 0, 0.1, 0.1, 0.2, 0.2, (100, 100), 16 / 1000)
    _close(back[0], gts[0], 1e-4)


def test_nms_ops(tnpu):
    b = torch.tensor([[0.0, 0.0, 10.0, 10.0, 0.9], [1.0, 1.0, 10.0, 10.0, 0.8], [20.0, 20.0, 30.0, 30.0, 0.7]])
    boxes, idx, mask = tnpu.npu_nms_with_mask(b.npu(), 0.5)
    assert mask.cpu().tolist() == [1, 0, 1] and idx.dtype == torch.int32 and boxes.shape == (3, 5)
    bb = b[:, :4].reshape(1, 3, 1, 4)
    scores = torch.tensor([[[0.9, 0.1], [0.8, 0.05], [0.3, 0.6]]])
    nb, ns, nc, nn = tnpu.npu_batch_nms(bb.npu(), scores.npu(), 0.2, 0.5, 2, 4)
    assert nn.cpu().tolist() == [3] and nb.shape == (1, 4, 4)
    _close(ns, [[0.9, 0.6, 0.3, 0.0]])
    _close(nc, [[0.0, 1.0, 0.0, 0.0]])
    _close(nb[0, 1], [20.0, 20.0, 30.0, 30.0])


def test_roi_align_matches_hand_values(tnpu):
    feat = torch.arange(1.0, 37.0).reshape(1, 1, 6, 6)
    rois = torch.tensor([[0, -2.0, -2.0, 22.0, 22.0]])
    out = tnpu.npu_roi_align(feat.npu(), rois.npu(), 0.25, 3, 3, 2, 0)
    _close(out, [[[[4.5, 6.5, 8.5], [16.5, 18.5, 20.5], [28.5, 30.5, 32.5]]]])


@pytest.mark.parametrize("mode, aligned", [(0, False), (3, True)])
def test_roi_alignbk_is_torchvisions_roi_align_gradient(tnpu, mode, aligned):
    from torchvision.ops import roi_align

    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 9, requires_grad=True)
    rois = torch.tensor([[0, 1.0, 2.0, 20.0, 14.0], [1, 0.0, 0.0, 30.0, 25.0], [1, 5.5, 3.0, 12.0, 29.0]])
    y = roi_align(x, rois, (2, 4), 0.25, 2, aligned=aligned)      # non-square: height 2, width 4
    g = torch.randn_like(y)
    (want,) = torch.autograd.grad(y, x, g)
    got = tnpu.npu_roi_alignbk(g.npu(), rois.npu(), list(x.shape), 4, 2, 0.25, 2, mode)
    assert got.device.type == "npu" and got.shape == x.shape
    _close(got, want)
    # contrib's ROIAlign passes output_size[0] first: the size is read from y_grad
    _close(tnpu.npu_roi_alignbk(g.npu(), rois.npu(), list(x.shape), 2, 4, 0.25, 2, mode), want)
    with pytest.raises(ValueError, match=r"^torch_npu\.npu_roi_alignbk: y_grad is"):
        tnpu.npu_roi_alignbk(g.npu(), rois.npu(), list(x.shape), 3, 3, 0.25, 2, mode)


def test_deformable_conv2dbk_is_torchvisions_deform_conv2d_gradient(tnpu):
    from torchvision.ops import deform_conv2d

    torch.manual_seed(0)
    x = torch.randn(2, 4, 6, 7, requires_grad=True)
    w = torch.randn(5, 4, 3, 3, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    yx = (torch.randn(2, 18, 6, 7) * 0.7).requires_grad_()        # torchvision's (y, x) pairs
    mask = torch.rand(2, 9, 6, 7, requires_grad=True)
    ref = deform_conv2d(x, yx, w, b, padding=(1, 1), mask=mask)
    g = torch.randn_like(ref)
    gx, gyx, gw, gb, gm = torch.autograd.grad(ref, (x, yx, w, b, mask), g)
    # the card's offset: [x offsets, y offsets, mask]
    offset = torch.cat((yx[:, 1::2], yx[:, 0::2], mask), 1).detach()
    out, offset_out = tnpu.npu_deformable_conv2d(x.detach().npu(), w.detach().npu(), offset.npu(), b.detach().npu(),
                                                 [3, 3], [1, 1, 1, 1], [1, 1, 1, 1], deformable_groups=1)
    _close(out, ref.detach(), 1e-4)
    got = tnpu.npu_deformable_conv2dbk(x.detach().npu(), g.npu(), offset_out, w.detach().npu(), offset.npu(),
                                       [3, 3], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], 1, 1, True)
    assert len(got) == 4 and all(t.device.type == "npu" for t in got)
    g_in, g_w, g_off, g_b = got
    _close(g_in, gx, 1e-4)
    _close(g_w, gw, 1e-4)
    _close(g_b, gb, 1e-4)
    _close(g_off, torch.cat((gyx[:, 1::2], gyx[:, 0::2], gm), 1), 1e-4)


def test_anchor_flags_grid_assign_yolo_random_choice(tnpu):
    gt = torch.tensor([[0.0, 0.0, 4.0, 4.0], [10.0, 2.0, 14.0, 6.0]])   # centres (2,2) and (12,4), stride 4
    flags = tnpu.npu_anchor_response_flags(gt.npu(), [2, 4], [4, 4], 2)
    want = torch.zeros(8, dtype=torch.uint8)
    want[[0, 7]] = 1                                                   # cells (0,0) and (1,3)
    assert flags.cpu().tolist() == want.repeat_interleave(2).tolist()
    out = tnpu.npu_grid_assign_positive(
        torch.zeros(3).npu(), torch.tensor([[0.9, 0.2, 0.6]]).npu(), torch.tensor([1, 1, 0], dtype=torch.uint8).npu(),
        torch.tensor([0.9, 0.2, 0.6]).npu(), torch.tensor([0, 0, 0], dtype=torch.int32).npu(),
        torch.tensor([0.9]).npu(), torch.tensor([0], dtype=torch.int32).npu(), 1, 0.5, 0.0, True)
    assert out.cpu().tolist() == [1.0, 0.0, 0.0]
    enc = tnpu.npu_yolo_boxes_encode(torch.tensor([[0.0, 0.0, 4.0, 4.0]]).npu(),
                                     torch.tensor([[1.0, 0.0, 5.0, 8.0]]).npu(), torch.tensor([4.0]).npu())
    _close(enc, [[1 / 4 + 0.5, 2 / 4 + 0.5, 0.0, math.log(2.0)]], 1e-5)
    x = torch.tensor([[True, False], [False, True]])
    idx, mask = tnpu.npu_random_choice_with_mask(x.npu(), 3)
    assert mask.cpu().tolist() == [True, True, False] and idx.dtype == torch.int32
    assert sorted(map(tuple, idx.cpu()[:2].tolist())) == [(0, 0), (1, 1)]


def test_bert_apply_adam_and_float_status(tnpu):
    var, m, v = torch.tensor([1.0, 2.0]).npu(), torch.zeros(2).npu(), torch.zeros(2).npu()
    g = torch.tensor([0.5, -1.0]).npu()
    tnpu.npu_bert_apply_adam(0.1, 0.9, 0.999, 1e-8, g, 0.0, 0.0, 0.0, out=(var, m, v))
    m_ref = 0.1 * torch.tensor([0.5, -1.0])
    v_ref = 0.001 * torch.tensor([0.25, 1.0])
    _close(m, m_ref)
    _close(var, torch.tensor([1.0, 2.0]) - 0.1 * m_ref / (v_ref.sqrt() + 1e-8), 1e-5)
    status = tnpu.npu_alloc_float_status(torch.zeros(1).npu())
    assert status.shape == (8,) and tnpu.npu_get_float_status(status).cpu().sum() == 0
    assert torch.npu.utils.npu_check_overflow(float("inf")) is True
    assert torch.npu.utils.npu_check_overflow(torch.tensor([1.0, 2.0]).npu()) is False
