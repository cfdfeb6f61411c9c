"""The region decoder: same pixels as a full simplejpeg decode, any box, any DCT scale, both upsamplers."""

from __future__ import annotations

import numpy as np
import pytest
import simplejpeg

from torchport.data import decode
from torchport.data.dataset import ShardDataset


def _photo(h, w, sub, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(y * 3 + x) % 256, (x * 5 + y) % 256, (x * y // 7) % 256], axis=2).astype(np.int16)
    img = np.clip(img + rng.integers(-40, 40, img.shape), 0, 255).astype(np.uint8)
    return simplejpeg.encode_jpeg(img, quality=90, colorspace="RGB", colorsubsampling=sub)


def test_region_decoder_is_active_here():
    assert decode.native_status().startswith("libjpeg-turbo region decoder"), decode.native_status()


def _gray(h, w, seed=0):
    rng = np.random.default_rng(seed)
    img = np.clip(np.mgrid[0:h, 0:w][1] * 3 % 256 + rng.integers(-40, 40, (h, w)), 0, 255).astype(np.uint8)
    return simplejpeg.encode_jpeg(img[:, :, None], quality=90, colorspace="GRAY")


def _pil(h, w, **save):
    """A JPEG written by Pillow (e.g. with its own restart interval)."""
    import io

    from PIL import Image

    rng = np.random.default_rng(2)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90, **save)
    return buf.getvalue()


# original bytes; rewritten with a restart marker every MCU / every 32 px; a restart interval that does not tile
# the rows (3 MCUs on a 16-MCU row: the segment grid is unusable, the whole-file path must take over)
_SOURCES = ["plain", "rst16", "rst32", "pil-rst3", "gray-rst16"]


def _source(kind, H, W, sub):
    if kind == "pil-rst3":
        return _pil(H, W, restart_marker_blocks=3)
    data = _gray(H, W) if kind.startswith("gray") else _photo(H, W, sub)
    if kind.endswith("rst16"):
        return decode.add_restart_markers(data, chunk_px=16)
    if kind == "rst32":
        return decode.add_restart_markers(data, chunk_px=32)
    return data


@pytest.mark.parametrize("kind", _SOURCES)
@pytest.mark.parametrize("sub", ["420", "422", "444"])
@pytest.mark.parametrize("fast", [True, False])
def test_region_equals_crop_of_full_decode(sub, fast, kind):
    H, W = 187, 250
    data = _source(kind, H, W, sub)
    rng = np.random.default_rng(1)
    boxes = [(0, 0, H, W), (H - 1, W - 1, 1, 1), (5, 7, 3, 200)]
    for _ in range(12):
        h, w = int(rng.integers(1, H)), int(rng.integers(1, W))
        boxes.append((int(rng.integers(0, H - h + 1)), int(rng.integers(0, W - w + 1)), h, w))
    for box in boxes:
        for out in ((16, 16), (64, 48), (224, 224)):  # 1/8 .. 1/1 DCT scales
            img, ibox, f = decode.decode_crop(data, (H, W), box, out, fast=fast)
            full, f2 = decode.decode_for_crop(data, (H, W), box, out, fast=fast)
            assert f == f2
            t, l_, h, w = decode.scale_box(box, (H, W), full.shape[:2])
            it, il, ih, iw = ibox
            assert (ih, iw) == (h, w)
            assert img.shape[0] * img.shape[1] <= full.shape[0] * full.shape[1]
            np.testing.assert_array_equal(img[it : it + ih, il : il + iw], full[t : t + h, l_ : l_ + w], err_msg=str((box, out)))


def _segments(data):
    """(start, end) of each restart segment's entropy-coded bytes."""
    sos = data.find(b"\xff\xda")
    pos = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    out, i = [], pos
    while True:
        i = data.find(b"\xff", i)
        if data[i + 1] == 0:
            i += 2
            continue
        out.append((pos, i))
        if not 0xD0 <= data[i + 1] <= 0xD7:
            return out
        pos = i = i + 2


def test_crop_reads_only_its_restart_segments():
    """Garbage in the segments above and left of a crop breaks a whole-file decode but not the crop."""
    H, W = 128, 256  # 4:2:0, 16-px MCUs, a marker every 32 px: 8 segments per MCU row, 8 MCU rows
    data = decode.add_restart_markers(_photo(H, W, "420"), chunk_px=32)
    segs = _segments(data)
    assert len(segs) == 8 * 8
    box = (80, 160, 40, 90)  # MCU rows 5-7, segments 5-7 of each row
    clean, cbox, _ = decode.decode_crop(data, (H, W), box, (40, 90))
    bad = bytearray(data)
    for r in range(8):
        for c in range(8):
            if r < 5 or c < 5:
                a, b = segs[r * 8 + c]
                bad[a:b] = bytes([0x00]) * (b - a)  # valid bytes, nonsense Huffman codes
    bad = bytes(bad)
    with pytest.raises(ValueError):
        simplejpeg.decode_jpeg(bad, colorspace="RGB")  # the corruption is live for anything that reads it
    with pytest.raises(ValueError):  # so does the whole-file region decoder: it entropy-decodes the rows above
        decode._native_region(decode.native_lib(), bad, 1, True, box, (H, W), restarts=False)
    img, ibox, _ = decode.decode_crop(bad, (H, W), box, (40, 90))
    t, l_, h, w = ibox
    ct, cl, ch, cw = cbox
    np.testing.assert_array_equal(img[t : t + h, l_ : l_ + w], clean[ct : ct + ch, cl : cl + cw])


def test_restart_rewrite_is_lossless_and_keeps_metadata():
    import io

    from PIL import Image

    rng = np.random.default_rng(4)
    buf = io.BytesIO()
    exif = Image.Exif()
    exif[0x010E] = "torchport test image"  # ImageDescription
    Image.fromarray(rng.integers(0, 256, (61, 83, 3), dtype=np.uint8)).save(buf, "JPEG", quality=85, exif=exif)
    data = buf.getvalue()
    out = decode.add_restart_markers(data)
    np.testing.assert_array_equal(simplejpeg.decode_jpeg(out), simplejpeg.decode_jpeg(data))
    with Image.open(io.BytesIO(out)) as im:
        assert im.getexif()[0x010E] == "torchport test image"
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (61, 83, 3), dtype=np.uint8)).save(buf, "JPEG", progressive=True)
    assert decode.add_restart_markers(buf.getvalue()) is None  # progressive: left as it is
    with pytest.raises(ValueError):
        decode.add_restart_markers(data[: len(data) // 3])


def test_region_decode_reads_less_than_the_image():
    data = _photo(160, 240, "420")
    img, box, f = decode.decode_crop(data, (160, 240), (40, 60, 100, 140), (32, 32), fast=True)
    assert f == 0.5 and img.shape == (50, 70, 3) and box == (0, 0, 50, 70)


def test_truncated_jpeg_raises_value_error():
    data = _photo(64, 64, "420")
    with pytest.raises(ValueError):
        decode.decode_crop(data[: len(data) // 2], (64, 64), (0, 0, 64, 64), (64, 64))


def test_fallback_decoder_gives_the_same_batches(shards, monkeypatch):
    ds = ShardDataset(shards["jpeg"], size=24, train=True, seed=3)
    a = ds[(2, np.arange(12))]
    monkeypatch.setattr(decode, "_native_state", (None, "simplejpeg (forced by test)"))
    b = ds[(2, np.arange(12))]
    assert decode.native_status() == "simplejpeg (forced by test)"
    assert np.array_equal(a.images.numpy(), b.images.numpy())


@pytest.mark.parametrize("w", [16, 37, 224])
def test_hwc_to_chw_kernel_equals_numpy(w, monkeypatch):
    from torchport.data.augment import hwc_to_chw_into

    src = np.random.default_rng(w).integers(0, 256, (9, w + 5, 3), dtype=np.uint8)[:, 2 : 2 + w]  # strided rows
    for flip in (False, True):
        a = np.zeros((3, 9, w), np.uint8)
        hwc_to_chw_into(a, src, flip)
        ref = src.transpose(2, 0, 1)[:, :, ::-1] if flip else src.transpose(2, 0, 1)
        np.testing.assert_array_equal(a, ref)


def test_loader_output_is_the_same_with_and_without_native_kernels(shards, monkeypatch):
    import torch

    from torchport.data.loader import make_loader
    from torchport.runtime.device import select_device

    def run():
        L = make_loader(shards["predecoded"], batch_size=8, image_size=24, seed=7, num_workers=0,
                        target=select_device("cpu"), return_indices=True)
        L.set_epoch(1)
        return [(x.clone(), i) for x, _, i in L]

    a = run()
    monkeypatch.setattr(decode, "_native_state", (None, "simplejpeg (forced by test)"))
    b = run()
    assert len(a) == len(b) > 0
    for (xa, ia), (xb, ib) in zip(a, b):
        assert torch.equal(ia, ib) and torch.equal(xa, xb)  # bit-identical floats


def test_no_compiler_falls_back_to_simplejpeg_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHPORT_CACHE", str(tmp_path / "cache"))  # nothing built there yet
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    lib, status = decode._load_native()
    assert lib is None and status.startswith("simplejpeg (region decoder unavailable") and "no-such-cc" in status
    monkeypatch.setenv("TORCHPORT_JPEG_NATIVE", "0")
    assert decode._load_native() == (None, "simplejpeg (region decoder disabled by TORCHPORT_JPEG_NATIVE=0)")
