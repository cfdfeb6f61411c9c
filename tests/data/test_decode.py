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


@pytest.mark.parametrize("sub", ["420", "422", "444"])
@pytest.mark.parametrize("fast", [True, False])
def test_region_equals_crop_of_full_decode(sub, fast):
    H, W = 187, 250
    data = _photo(H, W, sub)
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
