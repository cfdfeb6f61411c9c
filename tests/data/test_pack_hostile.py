"""Issue 24: hostile source trees -- a decompression bomb is refused from its header before any pixel is
allocated, and broken symbolic links (a loop, a missing target) are reported, never an abort that blames
the destination nor a silent drop."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from bad_inputs import probe_helpers
from torchport.data.decode import check_pixels, decode_any

bomb_jpeg = probe_helpers().bomb_jpeg        # a 628-byte JPEG whose header claims 16000x16000
from torchport.data.pack import pack


def test_pixel_limit_is_checked_from_the_header():
    with pytest.raises(ValueError, match=r"16000x16000 = 256,000,000 pixels, over the 89,478,485-pixel limit"):
        check_pixels(bomb_jpeg())
    with pytest.raises(ValueError, match="not decoded"):
        decode_any(bomb_jpeg())
    assert check_pixels(bomb_jpeg(100, 200)) == (100, 200)


def test_pack_skips_a_bomb_without_decoding_it(tmp_path, train_folder):
    src = tmp_path / "src"
    shutil.copytree(train_folder, src)
    (src / "circle" / "zz_bomb.jpg").write_bytes(bomb_jpeg())
    code = ("import json, resource, sys\nfrom torchport.data.pack import pack\n"
            "rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
            "before = rss()\nr = pack(sys.argv[1], sys.argv[2], mode=sys.argv[3], workers=1)\n"
            "print(json.dumps({'skipped': r['skipped_files'], 'peak_mb': rss() - before}))")
    for mode in ("jpeg", "predecoded"):
        res = subprocess.run([sys.executable, "-c", code, str(src), str(tmp_path / mode), mode], capture_output=True,
                             text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        out = json.loads(res.stdout.strip().splitlines()[-1])
        assert [s["path"] for s in out["skipped"]] == [str(src / "circle" / "zz_bomb.jpg")]
        assert "pixel limit" in out["skipped"][0]["reason"]
        assert out["peak_mb"] < 200, out           # growth during the pack; decoding it needs 768 MB


def test_broken_links_are_reported_not_fatal_nor_dropped(tmp_path, train_folder):
    src = tmp_path / "src"
    shutil.copytree(train_folder, src)
    os.symlink("self", src / "self")                                  # a link to itself where a class would be
    os.symlink("loop.jpg", src / "circle" / "loop.jpg")               # an image link to itself
    os.symlink(tmp_path / "gone.jpg", src / "circle" / "dangling.jpg")  # target missing
    report = pack(src, tmp_path / "out", mode="jpeg", workers=1)
    reasons = {os.path.basename(s["path"]): s["reason"] for s in report["skipped_files"]}
    assert set(reasons) == {"self", "loop.jpg", "dangling.jpg"}, reasons
    assert "broken symbolic link" in reasons["self"]
    assert "Too many levels of symbolic links" in reasons["loop.jpg"]
    assert "No such file" in reasons["dangling.jpg"]
    assert report["written"] == report["files_seen"] - 2 and report["skipped"] == 3
