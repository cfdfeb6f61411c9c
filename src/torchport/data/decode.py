"""JPEG decoding with libjpeg-turbo: only the crop's region, at the smallest DCT scale the crop allows.

Two tricks cut a worker's decode time, chosen per sample from its crop box:

* **DCT scaling** -- libjpeg-turbo can decode at 1/2, 1/4 or 1/8 of full size inside the inverse
  DCT. :func:`dct_factor` picks the smallest such factor that still leaves the crop at least as
  large as the output (no detail is lost: the crop is downscaled afterwards anyway). Only
  power-of-two factors: measured here, 3/4, 5/8 ... are *slower* than a full decode.
* **Region decoding** -- rows below the crop are never decoded, rows above are only
  entropy-decoded (``jpeg_skip_scanlines``), columns outside it skip IDCT and colour conversion
  (``jpeg_crop_scanline``). simplejpeg does not expose this, so a small C file
  (``_native.c``, which also holds two byte-shuffling kernels used by :mod:`~torchport.data.augment`
  and the loader) is compiled on first use against the system's libjpeg-turbo and called
  through ctypes. With the fast IDCT and plain upsampling (the default) each pixel depends on its
  own blocks only, so the region equals the same crop of a full decode bit for bit; with fancy
  upsampling (``fast=False``) the region is widened by a margin so the edges match too.
  When the C file cannot be built (no compiler or no libjpeg-turbo headers), or a start-up
  self-check finds a pixel that differs from simplejpeg's, decoding falls back to simplejpeg
  (full image, same pixels); :func:`native_status` says which one runs.
  ``TORCHPORT_JPEG_NATIVE=0`` forces the fallback.

Example::

    img, box, f = decode_crop(jpeg_bytes, (375, 500), box=(10, 20, 200, 300), out=(64, 64))
    # f == 0.25 (a 200 x 300 crop still covers 64 x 64 at 1/4); img is just the crop (50 x 75),
    # box == (0, 0, 50, 75) -- the region of img to resize
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import re
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

__all__ = [
    "add_restart_markers",
    "dct_factor",
    "decode_crop",
    "decode_for_crop",
    "decode_any",
    "jpeg_size",
    "is_jpeg",
    "MAX_PIXELS",
    "check_pixels",
    "native_status",
    "scale_box",
]

_FACTORS = (0.125, 0.25, 0.5)
_MARGIN = 16  # extra pixels around a region decoded with fancy upsampling (its filter reads neighbours)
RESTART_CHUNK_PX = 32  # restart segments at most this wide (2 MCUs at 4:2:0; measured: 32 px decodes crops 24% faster, files 1% smaller): finer = more markers, coarser = more waste


def is_jpeg(data) -> bool:
    """True when ``data`` starts with the JPEG SOI marker."""
    return len(data) > 3 and data[0] == 0xFF and data[1] == 0xD8


def jpeg_size(data) -> tuple[int, int]:
    """(height, width) from a JPEG header (cheap: no decoding)."""
    import simplejpeg

    h, w, _, _ = simplejpeg.decode_jpeg_header(data)
    return int(h), int(w)


#: Largest image decoded (height x width), Pillow's own decompression-bomb threshold: a 214-byte JPEG can
#: claim 16000x16000 (768 MB of pixels) or 65500x65500 (12 GiB). ``TORCHPORT_MAX_IMAGE_PIXELS`` overrides.
MAX_PIXELS = 89_478_485


def check_pixels(data) -> tuple[int, int] | None:
    """Read the image header only and raise ValueError when it claims more than the pixel limit.

    Returns the header's (height, width), or None when the header cannot be read (the decoder then
    reports the damage). Called before every full decode, so a decompression bomb costs a header parse.
    """
    from torchport.env import env_int

    limit = env_int("TORCHPORT_MAX_IMAGE_PIXELS", MAX_PIXELS)
    hw = None
    try:
        if is_jpeg(data):
            hw = jpeg_size(data)
        else:
            from PIL import Image

            with Image.open(io.BytesIO(bytes(data))) as im:   # lazy: parses the header, decodes nothing
                hw = (int(im.size[1]), int(im.size[0]))
    except Exception:  # noqa: BLE001 - an unreadable header is the decoder's to report
        return None
    if hw[0] * hw[1] > limit:
        raise ValueError(f"header claims {hw[1]}x{hw[0]} = {hw[0] * hw[1]:,} pixels, over the {limit:,}-pixel limit "
                         "(a decompression bomb, or raise TORCHPORT_MAX_IMAGE_PIXELS); not decoded")
    return hw


def dct_factor(box_hw: tuple[int, int], out_hw: tuple[int, int]) -> float:
    """Smallest power-of-two factor f in (1/8, 1/4, 1/2, 1) with ``box * f >= out`` in both dims."""
    bh, bw = box_hw
    oh, ow = out_hw
    for f in _FACTORS:
        if bh * f >= oh and bw * f >= ow:
            return f
    return 1.0


def scale_box(box: tuple[int, int, int, int], hw: tuple[int, int], scaled_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """``box`` (top, left, height, width) in an ``hw`` image mapped onto the same image decoded at ``scaled_hw``.

    Rounds outwards and keeps at least one pixel (the same arithmetic as ``CropParams.scaled``).
    """
    (H, W), (h, w) = hw, scaled_hw
    if (h, w) == (H, W):
        return box
    fy, fx = h / H, w / W
    top, left, bh, bw = box
    t = min(int(math.floor(top * fy)), h - 1)
    l_ = min(int(math.floor(left * fx)), w - 1)
    b = max(min(int(math.ceil((top + bh) * fy)), h), t + 1)
    r = max(min(int(math.ceil((left + bw) * fx)), w), l_ + 1)
    return t, l_, b - t, r - l_


# ---------------------------------------------------------------------------------------- native region decoder
_native_lock = threading.Lock()
_native_state: tuple[object, str] | None = None  # (ctypes library or None, status line)


def _source() -> Path:
    return Path(__file__).with_name("_native.c")


def _build(src: Path) -> Path:
    """Compile ``src`` into the torchport cache (once per source/platform; atomic rename)."""
    from torchport.data.synth import cache_dir

    tag = hashlib.sha256(src.read_bytes() + f"{sys.platform}-{os.uname().machine}".encode()).hexdigest()[:16]
    out_dir = cache_dir() / "native"
    out_dir.mkdir(parents=True, exist_ok=True)
    so = out_dir / f"native-{tag}.so"
    if so.exists():
        return so
    tmp = out_dir / f".{so.name}.{os.getpid()}.tmp"
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O3", "-ffp-contract=off", "-shared", "-fPIC", str(src), "-o", str(tmp), "-ljpeg"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"cannot run {cc}: {e}") from None
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"{cc} failed: {last}")
    os.replace(tmp, so)
    return so


def _self_check(lib) -> str | None:
    """Decode a small 4:2:0 JPEG's regions natively and with simplejpeg; a reason string when any pixel differs."""
    import simplejpeg

    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:45, 0:61]
    img = np.stack([(y * 5 + x * 3) % 256, (x * 7) % 256, (y * 11 + 40) % 256], axis=2).astype(np.uint8)
    img = np.clip(img.astype(np.int16) + rng.integers(-30, 30, img.shape), 0, 255).astype(np.uint8)
    data = simplejpeg.encode_jpeg(img, quality=85, colorspace="RGB", colorsubsampling="420")
    src = rng.integers(0, 256, (5, 37, 3), dtype=np.uint8)  # 37: two 16-pixel blocks + a tail
    for flip in (0, 1):
        got = np.empty((3, 5, 37), dtype=np.uint8)
        lib.tp_hwc_to_chw(src.ctypes.data, src.strides[0], got.ctypes.data, 5, 37, flip)
        chw = src.transpose(2, 0, 1)
        if not np.array_equal(got, chw[:, :, ::-1] if flip else chw):
            return f"hwc_to_chw kernel differs from numpy (flip={flip})"
    scale = np.array([0.017, 0.0175, 0.0174], dtype=np.float32)
    bias = np.array([-2.1, -2.03, -1.8], dtype=np.float32)
    x = rng.integers(0, 256, (2, 3, 4, 5), dtype=np.uint8)
    got = np.empty(x.shape, dtype=np.float32)
    lib.tp_normalise(x.ctypes.data, got.ctypes.data, 20, 6, scale.ctypes.data, bias.ctypes.data)
    ref = x.astype(np.float32) * scale.reshape(1, 3, 1, 1) + bias.reshape(1, 3, 1, 1)
    if not np.array_equal(got, ref):
        return "normalise kernel differs from numpy"
    for flip in (0, 1):  # the fused transpose + flip + normalise kernel: the same floats as the two steps
        got = np.empty((3, 5, 37), dtype=np.float32)
        lib.tp_hwc_to_chw_norm(src.ctypes.data, src.strides[0], got.ctypes.data, 5, 37, flip, scale.ctypes.data,
                               bias.ctypes.data)
        chw = src.transpose(2, 0, 1)
        chw = chw[:, :, ::-1] if flip else chw
        if not np.array_equal(got, chw.astype(np.float32) * scale.reshape(3, 1, 1) + bias.reshape(3, 1, 1)):
            return f"fused hwc_to_chw + normalise kernel differs from numpy (flip={flip})"
    rst = _restarts(lib, data, 16)  # a marker every MCU (16 px): the region decode reads a sub-grid of segments
    if rst is None or not np.array_equal(simplejpeg.decode_jpeg(rst, colorspace="RGB"),
                                         simplejpeg.decode_jpeg(data, colorspace="RGB")):
        return "restart-marker rewrite changes pixels"
    for src in (data, rst):
        for fast in (True, False):
            for denom in (1, 2):
                full = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=fast, fastupsample=fast,
                                              min_height=-(-45 // denom), min_width=-(-61 // denom), min_factor=denom)
                box = (19 // denom, 17 // denom, 13 // denom + 5, 17 // denom + 7)
                got, gbox = _native_region(lib, src, denom, fast, box, full.shape[:2])
                t, l_, h, w = box
                gt, gl, gh, gw = gbox
                if not np.array_equal(got[gt : gt + gh, gl : gl + gw], full[t : t + h, l_ : l_ + w]):
                    kind = "restart-segment" if src is rst else "region"
                    return f"{kind} decode differs from simplejpeg (fast={fast}, 1/{denom})"
    return None


def _load_native() -> tuple[object, str]:
    if os.environ.get("TORCHPORT_JPEG_NATIVE", "1") == "0":
        return None, "simplejpeg (region decoder disabled by TORCHPORT_JPEG_NATIVE=0)"
    try:
        so = _build(_source())
        lib = ctypes.CDLL(str(so))
        fn = lib.tp_decode_region
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_long,
                       ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_int]
        lib.tp_add_restarts.restype = ctypes.c_int
        lib.tp_add_restarts.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int,
                                        ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ulong), ctypes.c_char_p]
        lib.tp_free.restype = None
        lib.tp_free.argtypes = [ctypes.c_void_p]
        lib.tp_hwc_to_chw.restype = None
        lib.tp_hwc_to_chw.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.tp_hwc_to_chw_norm.restype = None
        lib.tp_hwc_to_chw_norm.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                           ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        lib.tp_normalise.restype = None
        lib.tp_normalise.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        if lib.tp_abi_version() != 4:
            return None, "simplejpeg (region decoder: ABI mismatch)"
        bad = _self_check(lib)
        if bad:
            return None, f"simplejpeg ({bad})"
        return lib, "libjpeg-turbo region decoder (crop rows/columns + DCT scaling)"
    except Exception as e:  # no compiler, no headers, not libjpeg-turbo, ... -> same pixels via simplejpeg
        return None, f"simplejpeg (region decoder unavailable: {e})"


def _native():
    global _native_state
    if _native_state is None:
        with _native_lock:
            if _native_state is None:
                _native_state = _load_native()
    return _native_state[0]


def native_lib():
    """The loaded native library (ctypes), or None when the numpy / simplejpeg fallbacks run."""
    return _native()


def native_status() -> str:
    """Which JPEG decoder runs: the region decoder, or simplejpeg and why (builds it on first call)."""
    _native()
    return _native_state[1]  # type: ignore[index]


def _restarts(lib, data, chunk_px: int) -> bytes | None:
    """``data`` rewritten losslessly with restart markers (see :func:`add_restart_markers`), or None."""
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    out, n = ctypes.c_void_p(), ctypes.c_ulong()
    msg = ctypes.create_string_buffer(256)
    rc = lib.tp_add_restarts(buf.ctypes.data, buf.nbytes, chunk_px, ctypes.byref(out), ctypes.byref(n), msg)
    if rc != 0:
        if rc < 0:
            raise ValueError(msg.value.decode(errors="replace") or "JPEG transcode failed")
        return None
    try:
        return ctypes.string_at(out.value, n.value)
    finally:
        lib.tp_free(out)


def add_restart_markers(data, *, chunk_px: int = RESTART_CHUNK_PX) -> bytes | None:
    """Rewrite a JPEG losslessly with a restart marker every ``chunk_px`` pixels of each MCU row.

    The DCT coefficients are copied (as ``jpegtran -restart``; Huffman tables re-optimised, APPn/COM
    markers kept), so every decoder gives the same pixels as from the original bytes. What changes is
    that the entropy-coded data becomes a grid of segments that decode independently, and
    :func:`decode_crop` then Huffman-decodes only the segments a crop overlaps instead of every row
    above and beside it. ``torchport data pack --mode jpeg`` stores files this way.

    Returns:
        The new bytes; None when there is nothing to do (progressive or arithmetic-coded files, or
        the native library is unavailable: the original bytes are as good, just slower to crop).

    Raises:
        ValueError: libjpeg cannot read the data.
    """
    lib = _native()
    if lib is None or not is_jpeg(data):
        return None
    return _restarts(lib, data, chunk_px)


def _native_region(lib, data, denom: int, fast: bool, box, scaled_hw, *, colorspace: int = 0, restarts: bool = True):
    """Decode ``box`` (scaled pixels) -> (array, box inside it). Raises ValueError on bad data."""
    t, l_, h, w = box
    if not fast:  # fancy upsampling filters read neighbouring pixels: decode a margin around the box
        sh, sw = scaled_hw
        t0, l0 = max(0, t - _MARGIN), max(0, l_ - _MARGIN)
        h0, w0 = min(sh, t + h + _MARGIN) - t0, min(sw, l_ + w + _MARGIN) - l0
    else:
        t0, l0, h0, w0 = t, l_, h, w
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    out = np.empty((h0, w0, 3), dtype=np.uint8)
    hw = (ctypes.c_int * 2)()
    msg = ctypes.create_string_buffer(256)
    rc = lib.tp_decode_region(buf.ctypes.data, buf.nbytes, denom, int(fast), colorspace, l0, t0, w0, h0,
                              out.ctypes.data, w0 * 3, hw, msg, int(restarts))
    if rc != 0:
        raise ValueError(msg.value.decode(errors="replace") or "JPEG decode failed")
    return out, (t - t0, l_ - l0, h, w)


# ---------------------------------------------------------------------------------------- decoding
def decode_crop(data, hw: tuple[int, int], box: tuple[int, int, int, int], out: tuple[int, int], *, fast: bool = True,
                restarts: bool = True):
    """Decode what ``box`` needs, at the smallest DCT scale that keeps it at least ``out`` pixels.

    Args:
        data: JPEG bytes (any buffer). hw: full image (height, width) from the header.
        box: crop (top, left, height, width) in full-size pixels.
        out: (height, width) the crop will be resized to.
        fast: libjpeg-turbo's fast integer IDCT and plain upsampling.
        restarts: use the file's restart-marker grid when it has one (False: decode from the top,
            for measuring what the grid saves; the pixels are the same).

    Returns:
        ``(image HWC uint8, box inside it, factor)``. The pixels of ``image[box]`` are the same
        whichever decoder runs: the scaled (``ceil(hw * factor)``) full decode, cropped to
        :func:`scale_box`.

    Raises:
        ValueError: the data is not a decodable JPEG (or is CMYK / not 3-channel for the region decoder).
    """
    f = dct_factor((box[2], box[3]), out)
    H, W = hw
    lib = _native()
    if lib is not None:
        denom = int(round(1 / f))
        shw = (-(-H // denom), -(-W // denom))
        img, ibox = _native_region(lib, data, denom, fast, scale_box(box, hw, shw), shw, restarts=restarts)
        return img, ibox, f
    img, f = decode_for_crop(data, hw, box, out, fast=fast)
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    return img, scale_box(box, hw, img.shape[:2]), f


def decode_for_crop(data, hw: tuple[int, int], box: tuple[int, int, int, int], out: tuple[int, int], *, fast: bool = True):
    """Decode the whole JPEG (simplejpeg) at the smallest DCT scale that keeps ``box`` at least ``out`` pixels.

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
        ValueError: the bytes are not a decodable image, or the header claims more than
            :data:`MAX_PIXELS` pixels (checked before decoding).
    """
    check_pixels(data)
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
