"""Issue 36: an ImageFolder's symbolic links are confined -- a folder link back onto the data set (a loop) or a
link out of it (a class folder, an image) is never read: not a class, not packed, not trained on; each is
listed once with its reason (``data pack``'s report and output, the trainer's skipped files)."""

from __future__ import annotations

import json
import os

import numpy as np
from PIL import Image
from typer.testing import CliRunner

from torchport.cli.main import app
from torchport.data.folder import list_class_files, list_classes, refused_links
from torchport.data.synth import make_dataset


def _hostile(tmp_path):
    make_dataset(tmp_path / "ds", classes=2, train_per_class=3, val_per_class=0, size=24)
    root = tmp_path / "ds" / "train" if (tmp_path / "ds" / "train").is_dir() else tmp_path / "ds"
    a, b = sorted(p for p in root.iterdir() if p.is_dir())
    outside = tmp_path / "elsewhere"
    (outside / "stolen").mkdir(parents=True)
    for i in range(2):                                            # real images, outside the data set
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(
            outside / "stolen" / f"private{i}.jpg")
    os.symlink(root, root / "back")                               # class-level loop: root/back -> root
    os.symlink(a, a / "again")                                    # a folder linked onto itself
    os.symlink(outside / "stolen", root / "outcls")               # a class folder from elsewhere
    secret = sorted((outside / "stolen").iterdir())[0]
    os.symlink(secret, a / "secret.jpg")                          # an image from elsewhere
    return root, a, secret


def test_the_scanner_refuses_loops_and_links_out_with_a_reason_each(tmp_path):
    root, a, _ = _hostile(tmp_path)
    assert list_classes(root) == sorted(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    images, others = list_class_files(a)
    assert "secret.jpg" not in images + others and len(images) == 3
    refused = dict(refused_links(root))
    assert set(refused) == {str(root / "back"), str(a / "again"), str(root / "outcls"), str(a / "secret.jpg")}
    assert "a loop" in refused[str(root / "back")] and "a loop" in refused[str(a / "again")]
    assert "outside the data set" in refused[str(root / "outcls")] and "outside" in refused[str(a / "secret.jpg")]


def test_pack_reports_them_and_packs_nothing_from_outside(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    root, _, secret = _hostile(tmp_path)
    r = CliRunner().invoke(app, ["data", "pack", str(root), str(tmp_path / "sh"), "--workers", "1",
                                 "--no-restart-markers", "--json", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "p.json").read_text())["all"]
    assert rep["written"] == 6 and rep["skipped"] == 4, rep            # the 2x3 real images; 4 links refused
    assert sum("symbolic link" in s["reason"] for s in rep["skipped_files"]) == 4
    assert r.output.count("symbolic link") == 4                       # one line each
    packed = b"".join(p.read_bytes() for p in (tmp_path / "sh").glob("*.tps"))
    assert secret.read_bytes() not in packed                          # the outside image's bytes never packed


def test_the_trainer_counts_them_as_skipped_files(tmp_path):
    from torchport.train.data import scan_folder

    root, a, _ = _hostile(tmp_path)
    idx = scan_folder(root)
    assert len(idx.classes) == 2 and len(idx.samples) == 6
    assert str(a / "secret.jpg") in idx.skipped and str(root / "outcls") in idx.skipped


def test_a_split_may_link_to_another_split_of_the_same_data_set(tmp_path):
    make_dataset(tmp_path / "ds", classes=2, train_per_class=3, val_per_class=1, size=24)
    train, val = tmp_path / "ds" / "train", tmp_path / "ds" / "val"
    cls = sorted(p.name for p in val.iterdir())[0]
    img = sorted((train / cls).iterdir())[0]
    os.symlink(img, val / cls / "shared.jpg")                     # val reuses a train image: inside DATA
    os.symlink(tmp_path, val / cls / "up")                        # ... but a folder link above DATA is a loop
    images, _ = list_class_files(val / cls)
    assert "shared.jpg" in images
    assert [p for p, _ in refused_links(val)] == [str(val / cls / "up")]
