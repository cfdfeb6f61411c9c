"""Box, IoU, NMS and RoI ops of torch_npu (API reference: ``_op_plugin_docs.py`` of the 2.14.0 wheel; the
formulas of ``torch_npu/contrib/function/iou.py`` and torch_npu's own tests where the reference is terse).
Boxes are ``(x1, y1, x2, y2)`` unless stated."""

from __future__ import annotations

import math

import torch

from ._registry import op


def _area(b: torch.Tensor) -> torch.Tensor:
    return (b[..., 2] - b[..., 0]).clamp(min=0) * (b[..., 3] - b[..., 1]).clamp(min=0)


def _pairwise(bboxes: torch.Tensor, gtboxes: torch.Tensor):
    """Overlap and union of every (gt, box) pair: both ``[M, N]``."""
    lt = torch.max(gtboxes[:, None, :2], bboxes[None, :, :2])
    rb = torch.min(gtboxes[:, None, 2:4], bboxes[None, :, 2:4])
    wh = (rb - lt).clamp(min=0)
    overlap = wh[..., 0] * wh[..., 1]
    return overlap, _area(gtboxes)[:, None], _area(bboxes)[None, :]


def _iou(bboxes, gtboxes, mode, eps_num):
    overlap, a_gt, a_box = _pairwise(bboxes.float(), gtboxes.float())
    denom = (a_gt + a_box - overlap) if int(mode) == 0 else a_gt.expand_as(overlap)
    return ((overlap + eps_num) / (denom + 0.001)).to(bboxes.dtype)


@op(note="mode 1 (IoF) divides by the gt area")
def npu_iou(bboxes, gtboxes, mode=0):
    """``(overlap + 0.001) / (union + 0.001)`` of every pair: ``[M gtboxes, N bboxes]``."""
    return _iou(bboxes, gtboxes, mode, 0.001)


@op(note="mode 1 (IoF) divides by the gt area")
def npu_ptiou(bboxes, gtboxes, mode=0):
    """``overlap / (union + 0.001)`` of every pair: ``[M gtboxes, N bboxes]``."""
    return _iou(bboxes, gtboxes, mode, 0.0)


def _xyxy(b: torch.Tensor, trans: bool) -> torch.Tensor:
    """(4, n) boxes, ``trans`` = given as (cx, cy, w, h)."""
    if not trans:
        return b
    return torch.stack([b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2])


def _aligned(name, self, gtboxes, trans, is_cross, mode):
    """(p, g, inter, union, enclosing corners) of aligned (4, n) boxes; is_cross / IoF are not emulated."""
    if is_cross or int(mode) != 0:
        raise RuntimeError(f"torch_npu.{name}: only is_cross=False, mode=0 are emulated")
    p, g = _xyxy(self.float(), trans), _xyxy(gtboxes.float(), trans)
    iw = (torch.min(p[2], g[2]) - torch.max(p[0], g[0])).clamp(min=0)
    ih = (torch.min(p[3], g[3]) - torch.max(p[1], g[1])).clamp(min=0)
    inter = iw * ih
    union = (p[2] - p[0]) * (p[3] - p[1]) + (g[2] - g[0]) * (g[3] - g[1]) - inter
    cw = torch.max(p[2], g[2]) - torch.min(p[0], g[0])
    ch = torch.max(p[3], g[3]) - torch.min(p[1], g[1])
    return p, g, inter, union, cw, ch


@op(note="is_cross=True and mode=1 (IoF) raise")
def npu_giou(self, gtboxes, trans=False, is_cross=False, mode=0):
    """GIoU of aligned (4, n) boxes: ``iou - (enclosing - union) / enclosing`` (eps 1e-10), shape ``[n, 1]``."""
    _, _, inter, union, cw, ch = _aligned("npu_giou", self, gtboxes, trans, is_cross, mode)
    eps = 1e-10
    union, c = union + eps, cw * ch + eps
    return (inter / union - (c - union) / c).reshape(-1, 1).to(self.dtype)


def _diou(name, self, gtboxes, trans, is_cross, mode):
    p, g, inter, union, cw, ch = _aligned(name, self, gtboxes, trans, is_cross, mode)
    eps = 1e-9
    iou = inter / (union + eps)
    rho2 = ((p[0] + p[2] - g[0] - g[2]) ** 2 + (p[1] + p[3] - g[1] - g[3]) ** 2) / 4
    return p, g, iou, iou - rho2 / (cw ** 2 + ch ** 2 + eps)


@op(note="the DIoU value (IoU - centre distance^2 / enclosing diagonal^2, eps 1e-9), shape [1, n]; "
         "is_cross=True and mode=1 (IoF) raise")
def npu_diou(self, gtboxes, trans=False, is_cross=False, mode=0):
    """DIoU of aligned (4, n) boxes, shape ``[1, n]``."""
    return _diou("npu_diou", self, gtboxes, trans, is_cross, mode)[3].reshape(1, -1).to(self.dtype)


@op(note="the CIoU value (DIoU - alpha v, v = 4/pi^2 (atan(w_g/h_g) - atan(w_p/h_p))^2), shape [1, n]; "
         "is_cross=True and mode=1 (IoF) raise")
def npu_ciou(self, gtboxes, trans=False, is_cross=True, mode=0, atan_sub_flag=False):
    """CIoU of aligned (4, n) boxes, shape ``[1, n]`` (``atan_sub_flag`` only concerns the card's backward)."""
    p, g, iou, diou = _diou("npu_ciou", self, gtboxes, trans, is_cross, mode)
    eps = 1e-9
    v = (4 / math.pi ** 2) * (torch.atan((g[2] - g[0]) / (g[3] - g[1] + eps))
                              - torch.atan((p[2] - p[0]) / (p[3] - p[1] + eps))) ** 2
    with torch.no_grad():
        alpha = v / (1 - iou + v + eps)
    return (diou - alpha * v).reshape(1, -1).to(self.dtype)


@op(backward=False)
def npu_bounding_box_encode(anchor_box, ground_truth_box, means0, means1, means2, means3, stds0, stds1, stds2,
                            stds3):
    """Deltas ``(dx, dy, dw, dh)`` from anchors to ground truth (widths ``x2 - x1 + 1``), normalised by means/stds."""
    a, g = anchor_box.float(), ground_truth_box.float()
    eps = 1e-7
    pw, ph = a[:, 2] - a[:, 0] + 1.0, a[:, 3] - a[:, 1] + 1.0
    gw, gh = g[:, 2] - g[:, 0] + 1.0, g[:, 3] - g[:, 1] + 1.0
    px, py = (a[:, 0] + a[:, 2]) * 0.5, (a[:, 1] + a[:, 3]) * 0.5
    gx, gy = (g[:, 0] + g[:, 2]) * 0.5, (g[:, 1] + g[:, 3]) * 0.5
    d = torch.stack([(gx - px) / (pw + eps), (gy - py) / (ph + eps), torch.log(gw.abs() / (pw + eps).abs()),
                     torch.log(gh.abs() / (ph + eps).abs())], dim=-1)
    means = d.new_tensor([means0, means1, means2, means3])
    stds = d.new_tensor([stds0, stds1, stds2, stds3])
    return ((d - means) / stds).to(anchor_box.dtype)


@op(backward=False, note="the inverse of npu_bounding_box_encode (widths x2 - x1 + 1, mmdet's legacy delta2bbox)")
def npu_bounding_box_decode(rois, deltas, means0, means1, means2, means3, stds0, stds1, stds2, stds3, max_shape,
                            wh_ratio_clip):
    """Boxes from ``rois`` and ``deltas`` (denormalised by means/stds, ``dw``/``dh`` clipped to
    ``|log(wh_ratio_clip)|``), clamped to ``max_shape`` (h, w)."""
    r, d = rois.float(), deltas.float()
    d = d * d.new_tensor([stds0, stds1, stds2, stds3]) + d.new_tensor([means0, means1, means2, means3])
    max_ratio = abs(torch.log(torch.tensor(float(wh_ratio_clip))).item())
    dw, dh = d[:, 2].clamp(-max_ratio, max_ratio), d[:, 3].clamp(-max_ratio, max_ratio)
    pw, ph = r[:, 2] - r[:, 0] + 1.0, r[:, 3] - r[:, 1] + 1.0
    px, py = (r[:, 0] + r[:, 2]) * 0.5, (r[:, 1] + r[:, 3]) * 0.5
    gw, gh = pw * dw.exp(), ph * dh.exp()
    gx, gy = px + pw * d[:, 0], py + ph * d[:, 1]
    x1, y1, x2, y2 = gx - gw * 0.5 + 0.5, gy - gh * 0.5 + 0.5, gx + gw * 0.5 - 0.5, gy + gh * 0.5 - 0.5
    if max_shape is not None and len(max_shape) >= 2:
        h, w = max_shape[0], max_shape[1]
        x1, x2 = x1.clamp(0, w - 1), x2.clamp(0, w - 1)
        y1, y2 = y1.clamp(0, h - 1), y2.clamp(0, h - 1)
    return torch.stack([x1, y1, x2, y2], dim=-1).to(rois.dtype)


def _greedy_nms(boxes: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Keep-mask of greedy NMS over ``boxes`` in the order given (IoU without +1)."""
    n = boxes.shape[0]
    keep = torch.ones(n, dtype=torch.bool)
    if n == 0:
        return keep
    b = boxes.detach().float().cpu()
    overlap, a_gt, a_box = _pairwise(b, b)
    iou = overlap / (a_gt + a_box - overlap).clamp(min=1e-12)
    for i in range(n):
        if keep[i]:
            later = torch.arange(n) > i
            keep &= ~(later & (iou[i] > iou_threshold))
    return keep


@op(backward=False, note="assumes the boxes come sorted by score (as the scanned callers sort them); "
                         "columns 5-7 of an (N, 8) input are ignored")
def npu_nms_with_mask(input, iou_threshold):
    """``(selected_boxes [N, 5], selected_idx [N] int32, selected_mask [N] uint8)``: greedy NMS in input order."""
    keep = _greedy_nms(input[:, :4], float(iou_threshold))
    n = input.shape[0]
    return (input[:, :5].clone(), torch.arange(n, dtype=torch.int32, device=input.device),
            keep.to(torch.uint8).to(input.device))


@op(backward=False, note="change_coordinate_frame=True raises")
def npu_batch_nms(self, scores, score_threshold, iou_threshold, max_size_per_class, max_total_size,
                  change_coordinate_frame=False, transpose_box=False):
    """Per batch and class: score filter, greedy NMS, ``max_size_per_class``; then the best ``max_total_size``
    over classes, zero-padded. Returns ``(boxes [B, T, 4], scores [B, T], classes [B, T], num [B] int32)``."""
    if change_coordinate_frame:
        raise RuntimeError("torch_npu.npu_batch_nms: change_coordinate_frame=True is not emulated")
    boxes = self.transpose(-1, -2) if transpose_box else self   # [B, N, q, 4]
    bsz, _, q, _ = boxes.shape
    num_classes = scores.shape[-1]
    t = int(max_total_size)
    out_b = boxes.new_zeros(bsz, t, 4)
    out_s, out_c = scores.new_zeros(bsz, t), scores.new_zeros(bsz, t)
    out_n = torch.zeros(bsz, dtype=torch.int32, device=self.device)
    for b in range(bsz):
        cand = []
        for c in range(num_classes):
            bc, sc = boxes[b, :, c if q > 1 else 0], scores[b, :, c]
            idx = torch.nonzero(sc > score_threshold).flatten()
            idx = idx[torch.argsort(sc[idx].float(), descending=True, stable=True)]
            kept = idx[_greedy_nms(bc[idx], float(iou_threshold)).to(idx.device)][:int(max_size_per_class)]
            cand += [(float(sc[i]), c, int(i)) for i in kept.tolist()]
        cand.sort(key=lambda e: -e[0])
        for j, (s, c, i) in enumerate(cand[:t]):
            out_b[b, j] = boxes[b, i, c if q > 1 else 0]
            out_s[b, j], out_c[b, j] = s, c
        out_n[b] = min(len(cand), t)
    return out_b, out_s, out_c, out_n


@op(note="roi_end_mode 0 = torchvision's aligned=False, 2 and 3 = aligned=True (3: what contrib's ROIAlign(aligned=True) "
         "passes), 1 = end coordinates +1 (assumption)")
def npu_roi_align(self, rois, spatial_scale, pooled_height, pooled_width, sample_num, roi_end_mode):
    """RoIAlign over ``rois`` ``[K, 5]`` = (batch index, x1, y1, x2, y2): ``[K, C, pooled_h, pooled_w]``."""
    from torchvision.ops import roi_align

    mode = int(roi_end_mode)
    r = rois
    if mode == 1:
        r = rois + rois.new_tensor([0.0, 0.0, 0.0, 1.0, 1.0]) / float(spatial_scale)
    return roi_align(self, r.to(self.dtype), (int(pooled_height), int(pooled_width)), float(spatial_scale),
                     int(sample_num), aligned=mode in (2, 3))


@op(backward=False, note="the gradient of npu_roi_align wrt its input (torch.autograd over the forward); the pooled "
                         "size is read from y_grad when pooled_width/pooled_height come swapped (contrib's ROIAlign "
                         "passes output_size[0] first)")
def npu_roi_alignbk(self, rois, xdiff_shape, pooled_width, pooled_height, spatial_scale, sample_num, roi_end_mode):
    """Backward of RoIAlign: ``self`` = y_grad ``[K, C, ph, pw]`` -> the input's gradient of shape ``xdiff_shape``."""
    shape = tuple(int(v) for v in xdiff_shape)
    ph, pw = int(pooled_height), int(pooled_width)
    got = tuple(self.shape[-2:])
    if got not in ((ph, pw), (pw, ph)):
        raise ValueError(f"torch_npu.npu_roi_alignbk: y_grad is {tuple(self.shape)}; expected [K, C, "
                         f"pooled_height={ph}, pooled_width={pw}]")
    ph, pw = got
    with torch.enable_grad():
        x = torch.zeros(shape, dtype=self.dtype, device=self.device, requires_grad=True)
        y = npu_roi_align(x, rois.detach(), spatial_scale, ph, pw, sample_num, roi_end_mode)
        (grad,) = torch.autograd.grad(y, x, self.detach())
    return grad


@op(backward=False)
def npu_anchor_response_flags(self, featmap_size, stride, num_base_anchors):
    """uint8 flags ``[h * w * num_base_anchors]``: 1 for the anchors of the cells that hold a gt box centre."""
    g = self.float()
    feat_h, feat_w = int(featmap_size[0]), int(featmap_size[1])
    cx, cy = (g[:, 0] + g[:, 2]) * 0.5, (g[:, 1] + g[:, 3]) * 0.5
    idx = (torch.floor(cy / stride[1]).long() * feat_w + torch.floor(cx / stride[0]).long())
    flags = torch.zeros(feat_h * feat_w, dtype=torch.uint8, device=self.device)
    flags[idx] = 1
    return flags[:, None].expand(-1, int(num_base_anchors)).reshape(-1)


@op(backward=False)
def npu_grid_assign_positive(self, overlaps, box_responsible_flags, max_overlaps, argmax_overlaps,
                             gt_max_overlaps, gt_argmax_overlaps, num_gts, pos_iou_thr, min_pos_iou,
                             gt_max_assign_all):
    """mmdet's GridAssigner positive step: responsible boxes over ``pos_iou_thr`` get ``argmax + 1``; then each gt
    above ``min_pos_iou`` claims its best responsible box(es)."""
    out = self.clone()
    flags = box_responsible_flags.bool()
    pos = (max_overlaps > pos_iou_thr) & flags
    out[pos] = (argmax_overlaps.to(out.dtype) + 1)[pos]
    for i in range(min(int(num_gts), overlaps.shape[0])):
        if gt_max_overlaps[i] > min_pos_iou:
            if gt_max_assign_all:
                sel = (overlaps[i] == gt_max_overlaps[i]) & flags
                out[sel] = i + 1
            elif flags[gt_argmax_overlaps[i].long()]:
                out[gt_argmax_overlaps[i].long()] = i + 1
    return out


@op(backward=False)
def npu_yolo_boxes_encode(self, gt_bboxes, stride, performance_mode=False):
    """mmdet's YOLOBBoxCoder.encode: ``(cx offset / stride + 0.5, cy ..., log(w_gt / w), log(h_gt / h))``, eps 1e-6."""
    eps = 1e-6
    b, g = self.float(), gt_bboxes.float()
    s = stride.float()
    xg, yg = (g[:, 0] + g[:, 2]) * 0.5, (g[:, 1] + g[:, 3]) * 0.5
    wg, hg = g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
    x, y = (b[:, 0] + b[:, 2]) * 0.5, (b[:, 1] + b[:, 3]) * 0.5
    w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    out = torch.stack([((xg - x) / s + 0.5).clamp(eps, 1 - eps), ((yg - y) / s + 0.5).clamp(eps, 1 - eps),
                       torch.log((wg / w).clamp(min=eps)), torch.log((hg / h).clamp(min=eps))], dim=-1)
    return out.to(self.dtype)


@op(backward=False, note="seed/seed2 ignored: draws use the device generator")
def npu_random_choice_with_mask(x, count=256, seed=0, seed2=0):
    """``(indices [count, x.dim()] int32 of shuffled non-zero elements, mask [count] bool)``; count 0 = all."""
    nz = torch.nonzero(x)
    nz = nz[torch.randperm(nz.shape[0], device=x.device)]
    n = nz.shape[0] if int(count) == 0 else int(count)
    take = nz[:n]
    idx = torch.zeros(n, x.dim(), dtype=torch.int32, device=x.device)
    idx[:take.shape[0]] = take.to(torch.int32)
    mask = torch.zeros(n, dtype=torch.bool, device=x.device)
    mask[:take.shape[0]] = True
    return idx, mask


@op(note="R-FCN position-sensitive average pooling as torchvision's ps_roi_pool (its rounding of RoI "
         "corners to bins: an assumption, the reference does not state the card's); channels beyond "
         "output_dim * group_size ** 2 (the card's C0 padding) are ignored")
def npu_ps_roi_pooling(self, rois, spatial_scale, group_size, output_dim):
    """PS-RoI pooling over ``rois`` ``[batch, 5, rois_num]`` = (batch index, x1, y1, x2, y2):
    ``[batch * rois_num, output_dim, group_size, group_size]``."""
    from torchvision.ops import ps_roi_pool

    gs, dim = int(group_size), int(output_dim)
    if rois.dim() != 3 or rois.shape[1] != 5:
        raise ValueError(f"torch_npu.npu_ps_roi_pooling: rois must be [batch, 5, rois_num], got {list(rois.shape)}")
    if self.shape[1] < dim * gs * gs:
        raise ValueError(f"torch_npu.npu_ps_roi_pooling: x has {self.shape[1]} channels; output_dim * "
                         f"group_size ** 2 = {dim * gs * gs} needed")
    r = rois.transpose(1, 2).reshape(-1, 5).to(self.dtype)
    return ps_roi_pool(self[:, :dim * gs * gs], r, (gs, gs), float(spatial_scale))
