"""From ``TrainConfig`` to loaders: find the data (or the embedded default), check it, build loaders.

Two loaders share one interface (iterate for normalised device batches, ``set_epoch``,
``state_dict`` / ``load_state_dict``, ``stats.skipped``):

* ``fast`` -- :func:`torchport.data.make_loader`: libjpeg-turbo decode with DCT scaling, batched
  workers, torchport shards as well as ImageFolders. Without a ``val/`` split it holds out
  ``val_fraction`` of the training samples (seeded), exactly as the simple loader does.
* ``simple`` -- :class:`torchport.train.data.FolderLoader`: a plain DataLoader with torchvision
  decoding, readable in one sitting; also holds out a validation fraction when there is no ``val/``.

``loader="auto"`` takes ``fast``. Either way the ImageFolder is
indexed by :func:`~torchport.train.data.find_splits` first, which turns layout mistakes (missing or
empty directory, a class without images, train/val class mismatch) into errors that name the folder
and counts non-image files.

Example::

    inputs = build_inputs(cfg, target, rank=0, world_size=1)
    for images, labels in inputs.train_loader: ...    # float [B, 3, S, S] on the device, int64 [B]
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from torchport.train.data import DataError, FolderDataset, FolderLoader, find_splits, holdout_ids

__all__ = ["Inputs", "build_inputs", "default_data_root"]


@dataclasses.dataclass
class Inputs:
    """What the loop needs from the data side."""

    root: str
    kind: str                     # "fast" (torchport.data) or "simple"
    classes: list[str]
    train_loader: Any
    val_loader: Any
    num_train: int
    num_val: int
    skipped_files: list[str]      # non-image files found while indexing (policy "skip")
    notes: list[str]


def default_data_root() -> str:
    """Root of the embedded default dataset (:func:`torchport.data.synth.default_dataset`): ten
    shape/texture classes of 72x72 JPEGs, 3,000 train / 600 val, generated once into the user cache
    (``$TORCHPORT_CACHE`` or ``~/.cache/torchport``)."""
    from torchport.data.synth import default_dataset

    return str(default_dataset())


def _is_shards(root: Path) -> bool:
    from torchport.data.format import is_shard_dir

    return is_shard_dir(root) or any(is_shard_dir(root / s) for s in ("train", "val"))


def build_inputs(cfg, target, *, rank: int, world_size: int) -> Inputs:
    """Check the data and build the train / val loaders for this rank.

    Raises:
        DataError: missing/empty data, a class without images, too few images for one step, or
            ``loader="fast"`` where it cannot run.
    """
    notes: list[str] = []
    if cfg.data is None:
        root = Path(default_data_root())
        notes.append(f"data: embedded default dataset at {root}")
    else:
        from torchport.storage import fs

        if fs.remote(cfg.data):  # shards in an object store: only the fast loader streams them
            if cfg.loader == "simple":
                raise DataError(f"{cfg.data}: data in an object store must be torchport shards (the fast loader); "
                                "use --loader auto")
            return _fast(cfg, target, str(cfg.data).rstrip("/"), rank, world_size, classes=None, num_classes_hint=None,
                         skipped=[], notes=notes)
        root = Path(cfg.data)
    if not root.is_dir():
        raise DataError(f"data directory {str(root)!r} does not exist (pass --data DIR: an ImageFolder with "
                        "train/ and val/ sub-folders, class folders directly, or torchport shards)")
    if _is_shards(root):
        if cfg.loader == "simple":
            raise DataError(f"{root} holds torchport shards, which only the fast loader reads; use --loader auto")
        return _fast(cfg, target, root, rank, world_size, classes=None, num_classes_hint=None, skipped=[], notes=notes)

    splits = find_splits(root, val_fraction=cfg.val_fraction, seed=cfg.seed, policy=cfg.bad_files)
    skipped = splits.train.skipped + splits.val.skipped
    if cfg.loader in ("fast", "auto"):
        return _fast(cfg, target, root, rank, world_size, classes=splits.classes,
                     num_classes_hint=len(splits.classes), skipped=skipped, notes=notes)

    if splits.note:
        notes.append(splits.note)
    common = dict(image_size=cfg.image_size, seed=cfg.seed, policy=cfg.bad_files)
    train_ds = FolderDataset(splits.train, train=True, min_crop_scale=cfg.min_crop_scale, **common)
    val_ds = FolderDataset(splits.val, train=False, val_crop_ratio=cfg.val_crop_ratio, **common)
    _check_enough(root, len(train_ds), cfg, world_size)
    kw = dict(batch_size=cfg.batch_size, seed=cfg.seed, rank=rank, world_size=world_size, target=target,
              channels_last=cfg.channels_last, num_workers=cfg.workers)
    return Inputs(root=str(root), kind="simple", classes=splits.classes,
                  train_loader=FolderLoader(train_ds, train=True, **kw), val_loader=FolderLoader(val_ds, train=False, **kw),
                  num_train=len(train_ds), num_val=len(val_ds), skipped_files=skipped, notes=notes)


def _fast(cfg, target, root: Path, rank, world_size, *, classes, num_classes_hint, skipped, notes) -> Inputs:
    """torchport.data's loader, with the trainer's augmentation ranges applied to its datasets.

    Without a ``val`` split (class folders or shards directly under ``root``, or only ``train/``),
    the same seeded ``val_fraction`` hold-out as the simple loader's is cut from the training data:
    never validate on the images the model trains on.
    """
    from torchport.data import make_loader
    from torchport.data.dataset import SubsetDataset
    from torchport.data.loader import Loader
    from torchport.data.pack import split_dirs

    common = dict(batch_size=cfg.batch_size, image_size=cfg.image_size, seed=cfg.seed, num_workers=cfg.workers,
                  rank=rank, world_size=world_size, target=target, corrupt=cfg.bad_files,
                  channels_last=cfg.channels_last, order=cfg.data_order)
    if isinstance(root, str):  # an object-store URL: a packed shard set with its own train/ and val/ splits
        train_loader = make_loader(root, train=True, **common)
        val_loader = make_loader(root, train=False, **common)
    else:
        splits = split_dirs(root)
        val_dir = next((root / n for n in ("val", "validation") if (root / n).is_dir()), None) if "train" in splits else None
        if val_dir is not None:
            train_loader = make_loader(root / "train", train=True, **common)
            val_loader = make_loader(val_dir, train=False, **common)
        else:
            src = root / "train" if "train" in splits else root
            train_loader = make_loader(src, train=True, **common)
            val_loader = make_loader(src, train=False, **common)
            train_ids, val_ids = holdout_ids(len(train_loader.dataset), val_fraction=cfg.val_fraction, seed=cfg.seed)
            train_loader = Loader(SubsetDataset(train_loader.dataset, train_ids), train_loader.cfg, target)
            val_loader = Loader(SubsetDataset(val_loader.dataset, val_ids), val_loader.cfg, target)
            notes.append(f"{src} has no val/ split: holding out {cfg.val_fraction:.0%} for validation")
    # Crop ranges are the trainer's knobs (small synthetic images need a larger minimum crop area
    # than ImageNet's 0.08); AugmentConfig is a frozen dataclass, so swap in an updated copy.
    train_loader.dataset.aug = dataclasses.replace(train_loader.dataset.aug, scale=(cfg.min_crop_scale, 1.0))
    val_loader.dataset.aug = dataclasses.replace(val_loader.dataset.aug, crop_fraction=cfg.val_crop_ratio)
    classes = classes or list(getattr(train_loader.dataset, "classes", []))
    _check_enough(root, len(train_loader.dataset), cfg, world_size)
    return Inputs(root=str(root), kind="fast", classes=classes, train_loader=train_loader, val_loader=val_loader,
                  num_train=len(train_loader.dataset), num_val=len(val_loader.dataset), skipped_files=skipped,
                  notes=notes)


def _check_enough(root, n: int, cfg, world_size: int) -> None:
    per_step = cfg.batch_size * world_size * cfg.accum_steps
    if n < per_step:
        raise DataError(f"{root}: the training split has {n} images, fewer than one optimizer step needs "
                        f"(batch_size {cfg.batch_size} x {world_size} process(es) x accum_steps {cfg.accum_steps}); "
                        "lower --batch-size or --accum-steps")
