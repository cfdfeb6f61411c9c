"""JPEG decoding with libjpeg-turbo (simplejpeg), using DCT-domain scaling when the crop allows.

libjpeg-turbo can decode at 1/2, 1/4 or 1/8 of full size inside the inverse DCT, which skips
most of the IDCT and colour-conversion work. :func:`dct_factor` picks the smallest such
factor that still leaves the crop at least as large as the output (no detail is lost: the crop
is downscaled afterwards anyway). Only power-of-two factors are used: measured on this
project's machine, libjpeg-turbo's 3/4, 5/8 ... scalings are *slower* than a full decode.

Example::

    img, f = decode_for_crop(jpeg_bytes, (375, 500), box=(0, 0, 375, 500), out=(64, 64))
    # f == 0.125: decoded at 1/8 size (47 x 63) because a 64 x 64 output needs no more
"""

from __future__ import annotations

import io
import re
import math

import numpy as np

__all__ = ["dct_factor", "decode_for_crop", "decode_any", "jpeg_size", "is_jpeg"]

_FACTORS = (0.125, 0.25, 0.5)


def is_jpeg(data) -> bool:
    """True when ``data`` starts with the JPEG SOI marker."""
    return len(data) > 3 and data[0] == 0xFF and data[1] == 0xD8


def jpeg_size(data) -> tuple[int, int]:
    """(height, width) from a JPEG header (cheap: no decoding)."""
    import simplejpeg

    h, w, _, _ = simplejpeg.decode_jpeg_header(data)
    return int(h), int(w)


def dct_factor(box_hw: tuple[int, int], out_hw: tuple[int, int]) -> float:
    """Smallest power-of-two factor f in (1/8, 1/4, 1/2, 1) with ``box * f >= out`` in both dims."""
    bh, bw = box_hw
    oh, ow = out_hw
    for f in _FACTORS:
        if bh * f >= oh and bw * f >= ow:
            return f
    return 1.0


def decode_for_crop(data, hw: tuple[int, int], box: tuple[int, int, int, int], out: tuple[int, int], *, fast: bool = True):
    """Decode a JPEG at the smallest DCT scale that keeps ``box`` at least ``out`` pixels.

    Args:
        data: JPEG bytes (any buffer). hw: full image (height, width).
        box: crop (top, left, height, width) in full-size pixels.
        out: (height, width) the crop will be resized to.
        fast: libjpeg-turbo's fast integer IDCT and upsampling (a few % faster, tiny differences).

    Returns:
        ``(image HWC uint8, factor)``; the decoded size is ``ceil(hw * factor)``.

    Raises:
        ValueError: the data is not a decodable JPEG (simplejpeg's message).
    """
    import simplejpeg

    f = dct_factor((box[2], box[3]), out)
    H, W = hw
    if f < 1.0:
        img = simplejpeg.decode_jpeg(
            data,
            colorspace="RGB",
            fastdct=fast,
            fastupsample=fast,
            min_height=int(math.ceil(H * f)),
            min_width=int(math.ceil(W * f)),
            min_factor=1.0 / f,
        )
    else:
        img = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=fast, fastupsample=fast)
    return img, f


def decode_any(data) -> np.ndarray:
    """Decode any image file's bytes to HWC uint8 RGB (JPEG via libjpeg-turbo, others via Pillow).

    Raises:
        ValueError: the bytes are not a decodable image.
    """
    if is_jpeg(data):
        import simplejpeg

        try:
            return simplejpeg.decode_jpeg(data, colorspace="RGB")
        except ValueError:
            pass  # e.g. CMYK or a recoverable warning: let Pillow try
    from PIL import Image, UnidentifiedImageError

    if not len(data):
        raise ValueError("empty file (0 bytes)")
    try:
        with Image.open(io.BytesIO(bytes(data))) as im:
            im.load()
            return np.asarray(im.convert("RGB"))
    except UnidentifiedImageError:
        raise ValueError(f"not a decodable image (no image format recognised in its {len(data)} bytes)") from None
    except Exception as e:  # Pillow raises many types for bad data
        # Pillow names the in-memory stream (``<_io.BytesIO object at 0x...>``): useless to a user
        reason = re.sub(r"<_io\.BytesIO object at 0x[0-9a-f]+>", "the file", str(e))
        raise ValueError(f"not a decodable image ({type(e).__name__}: {reason})") from None
