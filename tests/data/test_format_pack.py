"""Packing and reading shards: round trips, reports, and every kind of bad input."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import simplejpeg

from torchport.data.errors import ChecksumMismatchError, ShardCorruptError, ShardFormatError, SourceError
from torchport.data.format import ShardSet
from torchport.data.pack import pack, resize_shorter, scan_image_folder


def test_predecoded_round_trip_is_pixel_exact(shards, train_folder):
    s = ShardSet.open(shards["predecoded"], verify="full")
    classes, items = scan_image_folder(train_folder)
    assert s.classes == classes and len(s) == len(items)
    for i, (path, label) in enumerate(items):
        expect = resize_shorter(simplejpeg.decode_jpeg(open(path, "rb").read(), colorspace="RGB"), 48)
        got = s.pixels(i)
        assert got.dtype == np.uint8 and got.shape == expect.shape
        assert np.array_equal(got, expect), path
        assert int(s.labels[i]) == label


def _has_restart_interval(data: bytes) -> bool:
    """A DRI segment (FF DD) with a non-zero interval before the scan."""
    i = data.find(b"\xff\xdd")
    return 0 <= i < data.find(b"\xff\xda") and int.from_bytes(data[i + 4 : i + 6], "big") > 0


def test_jpeg_mode_keeps_pixels_and_adds_restart_markers(shards, train_folder):
    s = ShardSet.open(shards["jpeg"], verify="full")
    _, items = scan_image_folder(train_folder)
    for i, (path, _) in enumerate(items):
        original = open(path, "rb").read()
        stored = bytes(s.raw(i))
        assert not _has_restart_interval(original) and _has_restart_interval(stored), path
        # lossless: the very same pixels from every decoder setting
        for fast in (False, True):
            assert np.array_equal(simplejpeg.decode_jpeg(stored, colorspace="RGB", fastdct=fast, fastupsample=fast),
                                  simplejpeg.decode_jpeg(original, colorspace="RGB", fastdct=fast, fastupsample=fast))
        assert (int(s.heights[i]), int(s.widths[i])) == (40, 40)
    report = json.loads((shards["jpeg"] / "pack_report.json").read_text())
    assert report["restart_markers"] == len(items) and report["reencoded"] == 0


def test_jpeg_mode_without_restart_markers_keeps_original_bytes(tmp_path, train_folder):
    pack(train_folder, tmp_path / "s", mode="jpeg", workers=1, restart_markers=False)
    s = ShardSet.open(tmp_path / "s", verify="full")
    _, items = scan_image_folder(train_folder)
    for i, (path, _) in enumerate(items):
        assert bytes(s.raw(i)) == open(path, "rb").read()
    assert json.loads((tmp_path / "s" / "pack_report.json").read_text())["restart_markers"] == 0


def test_manifest_label_map_and_report(shards):
    root = shards["predecoded"]
    manifest = json.loads((root / "index.json").read_text())
    assert manifest["format"] == "torchport-shards" and manifest["version"] == 1 and manifest["mode"] == "predecoded"
    assert json.loads((root / "labels.json").read_text()) == {"circle": 0, "ring": 1, "square": 2}
    assert all(len(sh["sha256"]) == 64 for sh in manifest["shards"])
    report = json.loads((root / "pack_report.json").read_text())
    assert report["written"] == 36 and report["skipped"] == 0 and report["per_class"] == {"circle": 12, "ring": 12, "square": 12}


def test_small_shard_size_makes_several_shards(tmp_path, train_folder):
    rep = pack(train_folder, tmp_path / "s", mode="jpeg", shard_bytes=4096, workers=1)
    s = ShardSet.open(tmp_path / "s", verify="full")
    assert rep["shards"] > 1 and len(s.manifest["shards"]) == rep["shards"] and len(s) == 36


@pytest.fixture
def messy_folder(tmp_path, train_folder):
    """A copy of the train folder plus a truncated JPEG, a garbage .jpg, a PNG and a grayscale JPEG."""
    src = tmp_path / "messy"
    shutil.copytree(train_folder, src)
    good = open(next((src / "circle").iterdir()), "rb").read()
    (src / "circle" / "zz_truncated.jpg").write_bytes(good[: len(good) // 2])
    (src / "ring" / "zz_garbage.jpg").write_bytes(b"this is not an image at all" * 10)
    from PIL import Image

    Image.fromarray(np.full((30, 20, 3), 77, np.uint8)).save(src / "square" / "zz_image.png")
    (src / "square" / "zz_gray.jpg").write_bytes(simplejpeg.encode_jpeg(np.full((16, 24, 1), 200, np.uint8), colorspace="GRAY"))
    return src


@pytest.mark.parametrize("mode", ["jpeg", "predecoded"])
def test_corrupt_files_are_skipped_and_listed(tmp_path, messy_folder, mode):
    rep = pack(messy_folder, tmp_path / "out", mode=mode, size=32, workers=2)
    skipped = {os.path.basename(x["path"]) for x in rep["skipped_files"]}
    assert skipped == {"zz_truncated.jpg", "zz_garbage.jpg"}
    assert rep["files_seen"] == 40 and rep["written"] == 38 and rep["skipped"] == 2
    on_disk = json.loads((tmp_path / "out" / "pack_report.json").read_text())
    assert on_disk["skipped_files"] == rep["skipped_files"]
    s = ShardSet.open(tmp_path / "out", verify="full")
    assert len(s) == 38
    if mode == "jpeg":  # the PNG was re-encoded to JPEG and says so
        assert any(x["path"].endswith("zz_image.png") for x in rep["reencoded_files"])


def test_unreadable_or_bad_source_dir(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        pack(tmp_path / "nope", tmp_path / "out")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"x")
    with pytest.raises(SourceError, match="no class sub-directories"):
        pack(tmp_path / "flat", tmp_path / "out")
    (tmp_path / "empty" / "cls").mkdir(parents=True)
    with pytest.raises(SourceError, match="no images"):
        pack(tmp_path / "empty", tmp_path / "out")
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked"
        locked.mkdir(mode=0)
        with pytest.raises(SourceError, match="not readable"):
            pack(locked, tmp_path / "out")


def test_existing_destination_needs_overwrite(tmp_path, train_folder):
    pack(train_folder, tmp_path / "o", mode="jpeg", workers=1)
    with pytest.raises(FileExistsError, match="overwrite"):
        pack(train_folder, tmp_path / "o", mode="jpeg", workers=1)
    pack(train_folder, tmp_path / "o", mode="jpeg", workers=1, overwrite=True)


@pytest.fixture
def pd_copy(tmp_path, shards):
    dst = tmp_path / "copy"
    shutil.copytree(shards["predecoded"], dst)
    return dst


def test_truncated_shard_is_reported_with_shard_and_offset(pd_copy):
    shard = pd_copy / "shard-00000.tps"
    size = shard.stat().st_size
    with open(shard, "r+b") as f:
        f.truncate(size - 1000)
    with pytest.raises(ShardCorruptError, match=r"shard-00000\.tps.*truncated.*offset"):
        ShardSet.open(pd_copy, verify="quick")
    s = ShardSet.open(pd_copy, verify="none")  # reading without checks still fails clearly
    with pytest.raises(ShardCorruptError, match=r"shard shard-00000\.tps offset \d+ \(sample 35\).*truncated"):
        s.pixels(35)


def test_truncated_shard_error_names_the_split(pd_copy, tmp_path):
    """Issue 16 #9: with train/ and val/ shard dirs, the message says which one is damaged."""
    root = tmp_path / "packed"
    shutil.copytree(pd_copy, root / "train")
    shutil.copytree(pd_copy, root / "val")
    shard = root / "val" / "shard-00000.tps"
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size - 1000)
    ShardSet.open(root / "train", verify="quick")
    with pytest.raises(ShardCorruptError, match=r"shard-00000\.tps of \S*packed/val\b.*truncated"):
        ShardSet.open(root / "val", verify="quick")
    with pytest.raises(ShardCorruptError, match=r"\(sample 35\) of \S*packed/val\b"):
        ShardSet.open(root / "val", verify="none").pixels(35)


def test_shard_checksum_mismatch_is_detected_before_training(pd_copy):
    shard = pd_copy / "shard-00000.tps"
    with open(shard, "r+b") as f:
        f.seek(5000)
        b = f.read(1)
        f.seek(5000)
        f.write(bytes([b[0] ^ 0xFF]))
    ShardSet.open(pd_copy, verify="quick")  # same size, header intact: quick cannot see it
    with pytest.raises(ChecksumMismatchError, match=r"shard-00000\.tps of \S+: sha256"):
        ShardSet.open(pd_copy, verify="full")
    from torchport.data.loader import make_loader
    from torchport.runtime.device import select_device

    with pytest.raises(ChecksumMismatchError):  # the loader's default ("auto") hashes small sets
        make_loader(pd_copy, batch_size=4, num_workers=0, target=select_device("cpu"))
    res = ShardSet.open(pd_copy, verify="none").verify(full=False, samples=True)
    assert not res.ok and "crc32 mismatch" in res.problems[0] and "offset" in res.problems[0]


def test_index_tampering_and_bad_manifest(pd_copy, tmp_path):
    idx = np.load(pd_copy / "index.npy")
    idx["label"][0] = 2
    np.save(pd_copy / "index.npy", idx)
    with pytest.raises(ChecksumMismatchError, match="index.npy"):
        ShardSet.open(pd_copy)
    with pytest.raises(ShardFormatError, match="not a torchport shard directory"):
        ShardSet.open(tmp_path)
    (tmp_path / "index.json").write_text(json.dumps({"format": "torchport-shards", "version": 99, "mode": "jpeg"}))
    with pytest.raises(ShardFormatError, match="version 99"):
        ShardSet.open(tmp_path)


def test_zero_byte_and_png_named_jpg_images(tmp_path):
    """A zero-byte file is reported as empty (no BytesIO address); a PNG named .jpg decodes."""
    import io

    import numpy as np
    from PIL import Image

    from torchport.data.decode import decode_any

    with pytest.raises(ValueError, match=r"empty file \(0 bytes\)"):
        decode_any(b"")
    with pytest.raises(ValueError) as info:
        decode_any(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    assert "BytesIO" not in str(info.value) and "0x" not in str(info.value)
    with pytest.raises(ValueError) as info:
        decode_any(b"definitely not an image")
    assert "BytesIO" not in str(info.value) and "0x" not in str(info.value)
    img = (np.arange(8 * 6 * 3) % 251).astype(np.uint8).reshape(8, 6, 3)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    (tmp_path / "photo.jpg").write_bytes(buf.getvalue())          # PNG bytes, .jpg name
    assert np.array_equal(decode_any((tmp_path / "photo.jpg").read_bytes()), img)
