"""The trainer's data side: layout errors, bad files, deterministic augmentation, mid-epoch resume."""

from __future__ import annotations

import shutil

import pytest
import torch

from torchport.runtime.device import select_device
from torchport.train.config import TrainConfig
from torchport.train.data import (BadImageError, DataError, FolderDataset, FolderLoader, find_splits, scan_folder)
from torchport.train.inputs import build_inputs


@pytest.fixture
def data(tiny_data, tmp_path):
    """A private copy of the tiny dataset that a test may damage."""
    return shutil.copytree(tiny_data, tmp_path / "data")


def test_layout_errors_name_the_folder(tmp_path, data):
    with pytest.raises(DataError, match="does not exist"):
        scan_folder(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no class sub-folders"):
        scan_folder(tmp_path / "empty")
    (data / "train" / "zebra").mkdir()
    with pytest.raises(DataError, match="class 'zebra'.*no image files"):
        scan_folder(data / "train")
    (data / "train" / "zebra" / "z.jpg").write_bytes((data / "val" / "ring" / "00000.jpg").read_bytes())
    with pytest.raises(DataError, match="differ from the training split; missing: zebra"):
        find_splits(data, val_fraction=0.1, seed=0, policy="skip")


def test_non_image_files_are_counted_or_refused(data):
    (data / "train" / "ring" / "notes.txt").write_text("hello")
    (data / "train" / "ring" / ".DS_Store").write_text("mac")   # hidden: ignored silently
    index = scan_folder(data / "train", policy="skip")
    assert index.skipped == [str(data / "train" / "ring" / "notes.txt")]
    assert len(index.samples) == 4 * 24
    with pytest.raises(BadImageError, match="notes.txt is not an image"):
        scan_folder(data / "train", policy="error")


def test_corrupt_image_is_skipped_with_its_path_or_raises(data):
    bad = data / "train" / "ring" / "00003.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not really a jpeg")
    index = scan_folder(data / "train")
    i = [p for p, _ in index.samples].index(str(bad))
    ds = FolderDataset(index, image_size=16, train=True, seed=0, policy="skip")
    img, label, reason = ds[(0, i)]
    assert img.shape == (3, 16, 16) and str(bad) in reason
    assert ds[(0, i + 1)][2] is None
    with pytest.raises(BadImageError, match="00003.jpg"):
        FolderDataset(index, image_size=16, train=True, seed=0, policy="error")[(0, i)]


def test_hold_out_split_without_val_folder(data):
    shutil.rmtree(data / "val")
    a = find_splits(data, val_fraction=0.25, seed=0, policy="skip")
    b = find_splits(data, val_fraction=0.25, seed=0, policy="skip")
    assert "holding out 25%" in a.note
    assert a.val.samples == b.val.samples and len(a.val.samples) == 24
    assert not set(a.val.samples) & set(a.train.samples)


def test_augmentation_depends_only_on_seed_epoch_index(tiny_data):
    index = scan_folder(tiny_data / "train")
    ds = FolderDataset(index, image_size=24, train=True, seed=7, policy="skip")
    assert torch.equal(ds[(2, 5)][0], ds[(2, 5)][0])
    assert any(not torch.equal(ds[(e, 5)][0], ds[(0, 5)][0]) for e in range(1, 6))
    val = FolderDataset(index, image_size=24, train=False, seed=7, policy="skip")
    assert torch.equal(val[(0, 5)][0], val[(9, 5)][0])       # eval: no randomness


def _batches(loader, epoch, n=None, state=None):
    loader.set_epoch(epoch)
    if state is not None:
        loader.load_state_dict(state)
    out = []
    for x, y in loader:
        out.append((x.clone(), y.clone()))
        if n is not None and len(out) == n:
            break
    return out


def test_folder_loader_is_worker_count_invariant_and_resumes_mid_epoch(tiny_data):
    target = select_device("cpu", warn=False)
    ds = FolderDataset(scan_folder(tiny_data / "train"), image_size=16, train=True, seed=3, policy="skip")
    kw = dict(batch_size=8, train=True, seed=3, rank=0, world_size=1, target=target)
    zero = _batches(FolderLoader(ds, num_workers=0, **kw), epoch=1)
    two = _batches(FolderLoader(ds, num_workers=2, **kw), epoch=1)
    assert len(zero) == 12 and all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(zero, two))
    assert zero[0][0].dtype == torch.float32 and abs(float(zero[0][0].mean())) < 3   # normalised

    first = FolderLoader(ds, num_workers=0, **kw)
    _batches(first, epoch=1, n=5)
    state = first.state_dict()
    assert state["batches_done"] == 5
    rest = _batches(FolderLoader(ds, num_workers=0, **kw), epoch=1, state=state)
    assert len(rest) == 7 and all(torch.equal(a[0], b[0]) for a, b in zip(rest, zero[5:]))
    with pytest.raises(ValueError, match="batch_size"):
        FolderLoader(ds, num_workers=0, **{**kw, "batch_size": 4}).load_state_dict(state)


def test_ranks_split_the_epoch(tiny_data):
    target = select_device("cpu", warn=False)
    ds = FolderDataset(scan_folder(tiny_data / "train"), image_size=16, train=True, seed=0, policy="skip")
    labels = []
    for rank in range(2):
        loader = FolderLoader(ds, batch_size=4, train=True, seed=0, rank=rank, world_size=2, target=target,
                              num_workers=0)
        loader.set_epoch(0)
        labels.append(sum(len(y) for _, y in loader))
    assert labels == [48, 48]


@pytest.mark.parametrize("loader, has_val, expect", [
    ("auto", True, "fast"), ("auto", False, "fast"), ("simple", True, "simple"), ("simple", False, "simple"),
    ("fast", True, "fast"),
])
def test_build_inputs_picks_the_loader(data, loader, has_val, expect):
    if not has_val:
        shutil.rmtree(data / "val")
    cfg = TrainConfig(data=str(data), loader=loader, image_size=16, batch_size=8, workers=0)
    inputs = build_inputs(cfg, select_device("cpu", warn=False), rank=0, world_size=1)
    assert inputs.kind == expect and inputs.classes == sorted(inputs.classes) and len(inputs.classes) == 4
    inputs.train_loader.set_epoch(0)
    x, y = next(iter(inputs.train_loader))
    assert x.shape == (8, 3, 16, 16) and x.dtype == torch.float32 and y.dtype == torch.int64


def test_build_inputs_errors(data, tmp_path):
    cpu = select_device("cpu", warn=False)
    with pytest.raises(DataError, match="does not exist"):
        build_inputs(TrainConfig(data=str(tmp_path / "nope")), cpu, rank=0, world_size=1)
    with pytest.raises(DataError, match="fewer than one optimizer step"):
        build_inputs(TrainConfig(data=str(data), batch_size=64, accum_steps=2), cpu, rank=0, world_size=1)


def _fast_ids(loader):
    """The full-dataset indices a fast loader draws from (all of them when it holds nothing out)."""
    ds = loader.dataset
    return set(int(i) for i in getattr(ds, "ids", range(len(ds))))


@pytest.mark.parametrize("layout", ["flat", "train-only", "shards", "shards-train-only"])
@pytest.mark.parametrize("loader", ["auto", "fast"])
def test_fast_loader_holds_out_validation_without_a_val_split(data, tmp_path, layout, loader):
    """Issue 16 #1: class folders directly under --data (or one shard dir) must not validate on the training images."""
    if layout == "flat":                      # DIR/<class>/*.jpg
        root = data / "train"
    elif layout == "train-only":              # DIR/train/<class>/*.jpg, no val/
        shutil.rmtree(data / "val")
        root = data
    else:
        from torchport.data.pack import pack
        shutil.rmtree(data / "val")
        out = tmp_path / "packed"
        pack(data / "train", out / "train" if layout == "shards-train-only" else out)
        root = out
    cfg = TrainConfig(data=str(root), loader=loader, image_size=16, batch_size=8, workers=0, val_fraction=0.25)
    inputs = build_inputs(cfg, select_device("cpu", warn=False), rank=0, world_size=1)
    assert inputs.kind == "fast"
    train_ids, val_ids = _fast_ids(inputs.train_loader), _fast_ids(inputs.val_loader)
    assert not train_ids & val_ids, "validation images are also training images"
    assert (inputs.num_train, inputs.num_val) == (72, 24) and len(train_ids | val_ids) == 96
    assert any("holding out 25%" in n for n in inputs.notes)
    again = build_inputs(cfg, select_device("cpu", warn=False), rank=0, world_size=1)
    assert _fast_ids(again.val_loader) == val_ids                 # same split for the same seed
    inputs.val_loader.set_epoch(0)
    assert sum(len(y) for _, y in inputs.val_loader) == 24


@pytest.mark.parametrize("loader", ["fast", "simple"])
def test_hidden_folders_and_stray_files_do_not_shift_labels(data, loader):
    """One scanner for both loaders: a `.ipynb_checkpoints` folder (sorted first) is not a class."""
    for split in ("train", "val"):
        hidden = data / split / ".ipynb_checkpoints"
        hidden.mkdir()
        first = sorted(p for p in (data / split).iterdir() if not p.name.startswith("."))[0]
        shutil.copy(sorted(first.iterdir())[0], hidden / "x.jpg")
        (first / "notes.txt").write_text("not an image")
        (first / ".hidden.jpg").write_bytes(b"")
    cfg = TrainConfig(data=str(data), loader=loader, image_size=16, batch_size=8, workers=0)
    inputs = build_inputs(cfg, select_device("cpu", warn=False), rank=0, world_size=1)
    assert inputs.kind == loader and len(inputs.classes) == 4 and ".ipynb_checkpoints" not in inputs.classes
    ds = inputs.train_loader.dataset
    if loader == "fast":  # the fast loader's own labels must agree with the class list the trainer reports
        assert ds.classes == inputs.classes
        got = {(p.split("/")[-2], int(lab)) for p, lab in zip(ds.paths, ds.labels)}
    else:
        got = {(p.split("/")[-2], lab) for p, lab in ds.samples}
    assert got == {(c, i) for i, c in enumerate(inputs.classes)}


def test_pack_and_trainer_scanners_agree(data):
    from torchport.data.folder import IMAGE_EXTENSIONS
    from torchport.data.pack import scan_image_folder
    from torchport.train.data import IMAGE_EXTENSIONS as train_ext

    (data / "train" / ".ipynb_checkpoints").mkdir()
    (data / "train" / ".ipynb_checkpoints" / "a.jpg").write_bytes(b"x")
    assert train_ext is IMAGE_EXTENSIONS
    classes, items = scan_image_folder(data / "train")
    index = scan_folder(data / "train")
    assert classes == index.classes and items == index.samples
