"""Per-sample RandomResizedCrop + horizontal flip, with parameters from (seed, epoch, index).

The parameter distributions are torchvision's ``RandomResizedCrop(scale=(0.08, 1), ratio=(3/4, 4/3))``:
up to 10 tries of (area fraction ~ U(scale), log aspect ~ U(log ratio)), the first crop that fits
wins, else a centre crop clamped to the ratio range; the position is uniform over the valid range;
flip with probability 1/2. The difference is where randomness comes from: :mod:`torchport.data.rng`
(a hash of the sample's coordinates), so a sample's crop is the same for any worker count, rank
layout or device.

Two executors apply the parameters:

* :func:`resize_into` (CPU, in DataLoader workers): crop, antialiased bilinear resize of uint8
  (torch's vectorised uint8 kernel), flip while copying into the batch slot.
* :func:`device_crop_resize` (batched on any device): one ``affine_grid`` + ``grid_sample`` call
  for the whole batch, each sample with its own box and flip folded into the affine matrix.

Example::

    p = rrc_params(heights, widths, seed=0, epoch=1, indices=idx)   # CropParams with (B,) arrays
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from torchport.data.rng import uniforms

__all__ = [
    "CropParams",
    "rrc_params",
    "center_params",
    "resize_into",
    "hwc_to_chw_into",
    "normalise_into",
    "device_crop_resize",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_TRIES = 10
_NU = 2 * _TRIES + 3  # (area, ratio) per try, top, left, flip


@dataclasses.dataclass
class CropParams:
    """Crop boxes in source pixels plus flips, one entry per sample (numpy arrays, shape ``(B,)``)."""

    top: np.ndarray
    left: np.ndarray
    height: np.ndarray
    width: np.ndarray
    flip: np.ndarray

    def __len__(self) -> int:
        return len(self.top)

    def scaled(self, i: int, fy: float, fx: float, h: int, w: int) -> tuple[int, int, int, int]:
        """Box ``i`` mapped onto an image scaled by ``(fy, fx)`` of size ``(h, w)``: (top, left, height, width)."""
        t = min(int(math.floor(self.top[i] * fy)), h - 1)
        l_ = min(int(math.floor(self.left[i] * fx)), w - 1)
        b = max(min(int(math.ceil((self.top[i] + self.height[i]) * fy)), h), t + 1)
        r = max(min(int(math.ceil((self.left[i] + self.width[i]) * fx)), w), l_ + 1)
        return t, l_, b - t, r - l_


def rrc_params(
    heights: np.ndarray,
    widths: np.ndarray,
    *,
    seed: int,
    epoch: int,
    indices: np.ndarray,
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
    flip: bool = True,
) -> CropParams:
    """RandomResizedCrop parameters for a batch, vectorised.

    Args:
        heights, widths: source image sizes, shape ``(B,)``.
        seed, epoch, indices: the only inputs to randomness (``indices`` are dataset indices).
        scale: area fraction range. ratio: aspect (w/h) range. flip: draw horizontal flips.

    Returns:
        :class:`CropParams` (integer boxes, ``flip`` bool).
    """
    H = np.asarray(heights, dtype=np.float64)
    W = np.asarray(widths, dtype=np.float64)
    u = uniforms(seed, epoch, indices, _NU)
    area = (H * W)[:, None]
    target = area * (scale[0] + u[:, 0 : 2 * _TRIES : 2] * (scale[1] - scale[0]))
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = np.exp(lo + u[:, 1 : 2 * _TRIES : 2] * (hi - lo))
    w = np.rint(np.sqrt(target * aspect))  # rint = round-half-even, as Python's round()
    h = np.rint(np.sqrt(target / aspect))
    ok = (w > 0) & (h > 0) & (w <= W[:, None]) & (h <= H[:, None])
    first = np.argmax(ok, axis=1)
    found = ok[np.arange(len(H)), first]
    rows = np.arange(len(H))
    cw = np.where(found, w[rows, first], 0)
    ch = np.where(found, h[rows, first], 0)
    # fallback: centre crop of the whole image, clamped to the ratio range
    in_ratio = W / H
    fw = np.where(in_ratio < ratio[0], W, np.where(in_ratio > ratio[1], np.rint(H * ratio[1]), W))
    fh = np.where(in_ratio < ratio[0], np.rint(W / ratio[0]), H)
    cw = np.where(found, cw, fw)
    ch = np.where(found, ch, fh)
    top = np.where(found, np.floor(u[:, -3] * (H - ch + 1)), np.floor((H - ch) / 2))
    left = np.where(found, np.floor(u[:, -2] * (W - cw + 1)), np.floor((W - cw) / 2))
    flips = (u[:, -1] < 0.5) if flip else np.zeros(len(H), dtype=bool)
    return CropParams(
        top=top.astype(np.int64), left=left.astype(np.int64), height=ch.astype(np.int64), width=cw.astype(np.int64), flip=flips
    )


def center_params(heights: np.ndarray, widths: np.ndarray, *, crop_fraction: float = 0.875) -> CropParams:
    """Evaluation crop: the centred square of side ``crop_fraction * min(H, W)``.

    Resizing that square to ``size`` equals torchvision's ``Resize(size / crop_fraction)`` +
    ``CenterCrop(size)`` up to resampling order.
    """
    H = np.asarray(heights, dtype=np.int64)
    W = np.asarray(widths, dtype=np.int64)
    side = np.maximum(1, np.rint(np.minimum(H, W) * crop_fraction)).astype(np.int64)
    return CropParams(
        top=(H - side) // 2, left=(W - side) // 2, height=side, width=side, flip=np.zeros(len(H), dtype=bool)
    )


def resize_into(dst, src: np.ndarray, box: tuple[int, int, int, int], flip: bool, norm=None) -> None:
    """Crop ``src`` (HWC uint8) to ``box``, resize to ``dst``'s size, flip, write into ``dst`` (CHW uint8 tensor).

    With ``norm = (scale, bias)`` (two float32 arrays of 3) ``dst`` is a CHW float32 tensor and receives
    ``pixel * scale[c] + bias[c]`` -- the loader's normalisation, fused into the transpose (same floats).

    Antialiased bilinear (as torchvision/PIL ``BILINEAR`` for downscaling), on torch's vectorised
    uint8 kernel. The crop is handed over as an unambiguously channels-last tensor so the kernel
    writes its result channels-last without repacking; the native kernel (or numpy) then transposes
    (and flips) it into the CHW slot in one pass. When the crop is enlarged in both directions,
    antialiasing changes nothing (the filter support is one pixel) and torch's plain bilinear uint8
    kernel gives the same bytes ~40% faster (checked in the tests), so that one runs.
    """
    import torch

    t, l_, h, w = box
    oh, ow = int(dst.shape[-2]), int(dst.shape[-1])
    if (h, w) == (oh, ow):
        hwc_to_chw_into(dst.numpy(), src[t : t + h, l_ : l_ + w], flip, norm)
        return
    crop = src[t : t + h, l_ : l_ + w]
    if not crop.flags.c_contiguous:
        crop = np.ascontiguousarray(crop)
    x = torch.from_numpy(crop).as_strided((1, 3, h, w), (h * w * 3, 1, w * 3, 3))
    y = _resize_cl(x, oh, ow, antialias=not (h <= oh and w <= ow))
    if y.is_contiguous(memory_format=torch.channels_last) and dst.is_contiguous():
        from torchport.data.decode import native_lib

        lib = native_lib()
        if lib is not None and norm is None:
            lib.tp_hwc_to_chw(y.data_ptr(), ow * 3, dst.data_ptr(), oh, ow, int(bool(flip)))
            return
        if lib is not None:
            lib.tp_hwc_to_chw_norm(y.data_ptr(), ow * 3, dst.data_ptr(), oh, ow, int(bool(flip)),
                                   norm[0].ctypes.data, norm[1].ctypes.data)
            return
    hwc_to_chw_into(dst.numpy(), y[0].permute(1, 2, 0).numpy(), flip, norm)


def _resize_cl(x, oh: int, ow: int, *, antialias: bool):
    """Bilinear resize of a channels-last uint8 ``(1, 3, h, w)`` tensor (torch's kernels, minus the Python wrapper)."""
    import torch

    nn = torch._C._nn
    try:
        if antialias:
            return nn._upsample_bilinear2d_aa(x, (oh, ow), False, None)
        return nn.upsample_bilinear2d(x, (oh, ow), False, None)
    except (AttributeError, TypeError, RuntimeError):  # private binding moved: the public wrapper, same kernels
        import torch.nn.functional as F

        return F.interpolate(x, size=(oh, ow), mode="bilinear", antialias=antialias, align_corners=False)


def hwc_to_chw_into(out: np.ndarray, hwc: np.ndarray, flip: bool, norm=None) -> None:
    """Copy ``hwc`` (H, W, 3 uint8, rows may be strided) into ``out`` (3, H, W, C-contiguous), flipped if asked.

    The native SSSE3 kernel (three ``pshufb`` per plane per 16 pixels) when available -- ~5x faster
    than numpy's strided copy for 224 x 224; numpy otherwise. Both give the same bytes. With
    ``norm = (scale, bias)``, ``out`` is float32 and gets ``v * scale[c] + bias[c]`` (a multiply, then
    an add, each rounded to float32, in both implementations).
    """
    from torchport.data.decode import native_lib

    lib = native_lib()
    h, w = hwc.shape[:2]
    if lib is not None and hwc.strides[1:] == (3, 1) and out.flags.c_contiguous and out.shape == (3, h, w):
        src, dst = hwc.__array_interface__["data"][0], out.__array_interface__["data"][0]
        if norm is None:
            lib.tp_hwc_to_chw(src, hwc.strides[0], dst, h, w, int(bool(flip)))
        else:
            lib.tp_hwc_to_chw_norm(src, hwc.strides[0], dst, h, w, int(bool(flip)), norm[0].ctypes.data,
                                   norm[1].ctypes.data)
        return
    chw = hwc.transpose(2, 0, 1)
    chw = chw[:, :, ::-1] if flip else chw
    if norm is None:
        np.copyto(out, chw)
        return
    normalise_into(out, chw, *norm)


def normalise_into(out: np.ndarray, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> None:
    """``out = x * scale[c] + bias[c]``: uint8 ``x`` of shape (..., 3, H, W) into float32 ``out`` of the same shape.

    A multiply, then an add, each rounded to float32. The native one-pass SSE2 kernel with streaming stores runs
    when both arrays are contiguous; otherwise numpy, 4 images at a time so the 2nd and 3rd passes hit the cache
    (numpy, not torch: torch's OpenMP threads would fight the DataLoader workers for the cores). Same bytes.
    ``scale``, ``bias``: contiguous float32 arrays of 3.
    """
    from torchport.data.decode import native_lib

    lib = native_lib()
    if lib is not None and x.flags.c_contiguous and out.flags.c_contiguous:
        plane = x.shape[-2] * x.shape[-1]
        lib.tp_normalise(x.ctypes.data, out.ctypes.data, plane, x.size // plane, scale.ctypes.data, bias.ctypes.data)
        return
    s, b = scale.reshape(3, 1, 1), bias.reshape(3, 1, 1)
    xb, ob = (x, out) if x.ndim == 4 else (x[None], out[None])
    for i in range(0, len(xb), 4):
        o = ob[i : i + 4]
        np.copyto(o, xb[i : i + 4], casting="unsafe")
        np.multiply(o, s, out=o)
        np.add(o, b, out=o)


def device_crop_resize(images, boxes, flips, sizes, out_size: tuple[int, int]):
    """Batched per-sample crop + resize + flip on whatever device ``images`` lives on.

    Args:
        images: float tensor ``(B, C, Hc, Wc)`` -- samples pasted at the top-left of a canvas.
        boxes: float tensor ``(B, 4)`` of (top, left, height, width) in canvas pixels.
        flips: bool tensor ``(B,)``.
        sizes: unused placeholder for symmetry with the CPU path (canvas padding is never sampled).
        out_size: ``(height, width)`` of the result.

    Returns:
        ``(B, C, out_h, out_w)`` float tensor. Bilinear without antialiasing: pack with a
        target size close to the training size (e.g. 256 for 224) to keep aliasing negligible.
    """
    import torch
    import torch.nn.functional as F

    B, _, Hc, Wc = images.shape
    top, left, h, w = boxes.unbind(1)
    sx = (w / Wc) * torch.where(flips, -1.0, 1.0).to(boxes.dtype)
    sy = h / Hc
    cx = (2 * left + w) / Wc - 1  # centre of the box in [-1, 1] (align_corners=False)
    cy = (2 * top + h) / Hc - 1
    zero = torch.zeros_like(sx)
    theta = torch.stack([torch.stack([sx, zero, cx], 1), torch.stack([zero, sy, cy], 1)], 1)
    grid = F.affine_grid(theta.to(images.dtype), [B, images.shape[1], out_size[0], out_size[1]], align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)
