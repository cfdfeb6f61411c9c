"""The trainer's ImageFolder input path: scan, decode, augment, shard across ranks, resume mid-epoch.

* Scanning checks the layout up front: a missing or empty directory, or a class folder without
  images, is an error that names the folder. Non-image files are counted (policy ``skip``) or
  refused (policy ``error``).
* Pillow decodes, torchvision's v2 functional ops crop and resize; workers return uint8
  ``[3, S, S]`` tensors and normalisation happens on the device.
* Augmentation randomness is a pure function of ``(seed, epoch, index)`` (a per-sample
  ``torch.Generator``), so crops do not depend on the worker count and a resumed run sees the
  same pixels as an uninterrupted one.
* A corrupt file becomes a placeholder that the collate function drops; the batch carries the
  file's path so the loop can count and report it per epoch.

Example::

    splits = find_splits("/data/imagenet", val_fraction=0.1, seed=0, policy="skip")
    ds = FolderDataset(splits.train, image_size=64, train=True, seed=0, policy="skip")
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

from torchport.data.errors import DataError as _DataErrorBase
from torchport.data.folder import IMAGE_EXTENSIONS, list_class_files, list_classes, refused_links

__all__ = [
    "DataError",
    "BadImageError",
    "FolderIndex",
    "Splits",
    "scan_folder",
    "find_splits",
    "FolderDataset",
    "EpochSampler",
    "ShardSampler",
    "collate",
    "FolderLoader",
    "IMAGE_EXTENSIONS",
    "holdout_ids",
]



class DataError(_DataErrorBase):
    """The data directory is missing, empty or not in ImageFolder layout (the message names it).

    A subclass of :class:`torchport.data.DataError`, so one ``except`` catches both pipelines' errors."""


class BadImageError(DataError):
    """A file could not be decoded and the bad-file policy is ``error``."""


@dataclasses.dataclass
class FolderIndex:
    """One split: ``samples`` are ``(path, class index)``; ``skipped`` lists non-image files and symbolic links
    that are not read (out of the data set, or a loop)."""

    root: str
    classes: list[str]
    samples: list[tuple[str, int]]
    skipped: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Splits:
    """Train and val indexes with the same class list."""

    train: FolderIndex
    val: FolderIndex
    classes: list[str]
    note: str = ""


def scan_folder(root: str | os.PathLike, *, policy: str = "skip", classes: Sequence[str] | None = None) -> FolderIndex:
    """Index ``root/<class>/<file>`` (one level, like ``torchport.data``); hidden entries are ignored.

    Args:
        root: the split directory.
        policy: ``skip`` counts non-image files, ``error`` raises on the first one.
        classes: the class list this split must have (val must match train); default: found here.

    Raises:
        DataError: missing/empty directory, no class folders, a class without images, class
            folders that differ from ``classes``, or (policy ``error``) a non-image file.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"data directory {str(root)!r} does not exist (pass --data DIR with one sub-folder per class)")
    found = list_classes(root)
    if not found:
        raise DataError(f"data directory {str(root)!r} has no class sub-folders; expected {root}/<class>/<image files>")
    if classes is not None and list(classes) != found:
        missing, extra = sorted(set(classes) - set(found)), sorted(set(found) - set(classes))
        raise DataError(f"{root}: class folders differ from the training split"
                        + (f"; missing: {', '.join(missing)}" if missing else "")
                        + (f"; not in train: {', '.join(extra)}" if extra else "")
                        + " (labels are folder positions, so both splits need the same class folders)")
    samples, skipped = [], []
    for idx, name in enumerate(found):
        cdir = root / name
        images, others = list_class_files(cdir)
        others = [str(cdir / f) for f in others]
        if others and policy == "error":
            raise BadImageError(f"{others[0]} is not an image file ({len(others)} such file(s) in {cdir}); "
                                "remove them or use --bad-files skip")
        if not images:
            raise DataError(f"class {name!r} ({cdir}) has no image files ({', '.join(IMAGE_EXTENSIONS)}); "
                            "add images or remove the folder")
        samples.extend((str(cdir / f), idx) for f in images)
        skipped.extend(others)
    skipped.extend(p for p, _ in refused_links(root))   # links out of the data set / loops: counted, never read
    return FolderIndex(root=str(root), classes=found, samples=samples, skipped=skipped)


def find_splits(data: str | os.PathLike, *, val_fraction: float, seed: int, policy: str) -> Splits:
    """``data/train`` + ``data/val`` when present; else class folders directly under ``data``
    with a deterministic ``val_fraction`` hold-out (same split for every seed-sharing run)."""
    root = Path(data)
    if not root.is_dir():
        raise DataError(f"data directory {str(root)!r} does not exist")
    if (root / "train").is_dir():
        train = scan_folder(root / "train", policy=policy)
        val_dir = next((root / n for n in ("val", "validation") if (root / n).is_dir()), None)
        if val_dir is not None:
            val = scan_folder(val_dir, policy=policy, classes=train.classes)
            return Splits(train=train, val=val, classes=train.classes)
        full, note = train, f"{root}/train has no val/ next to it: holding out {val_fraction:.0%} for validation"
    else:
        full = scan_folder(root, policy=policy)
        note = f"{root} has class folders and no val/ split: holding out {val_fraction:.0%} for validation"
    train_ids, val_ids = holdout_ids(len(full.samples), val_fraction=val_fraction, seed=seed)
    pick = lambda ids: [full.samples[i] for i in ids]  # noqa: E731
    return Splits(
        train=FolderIndex(full.root, full.classes, pick(train_ids), full.skipped),
        val=FolderIndex(full.root, full.classes, pick(val_ids), []),
        classes=full.classes,
        note=note,
    )


def holdout_ids(n: int, *, val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Split sample indices ``0..n-1`` into sorted ``(train, val)`` lists: ``round(n * val_fraction)``
    (at least one) held out, chosen by ``seed`` alone -- both loaders and every rank get the same split."""
    import torch

    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    n_val = min(n - 1, max(1, int(round(n * val_fraction)))) if n > 1 else 0
    return sorted(order[n_val:]), sorted(order[:n_val])


def _sample_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed mixed from the sample coordinates (SplitMix64-style; no Python hash())."""
    mask = (1 << 64) - 1
    z = (seed * 0x9E3779B97F4A7C15 + epoch * 0xD1B54A32D192ED03 + index * 0x8CB92BA72F3D8DD7 + 1) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return (z ^ (z >> 31)) >> 1


class FolderDataset:
    """Map-style dataset over a :class:`FolderIndex`; keys are ``(epoch, index)`` pairs.

    Returns ``(image uint8 [3, S, S], label, None)``, or for an unreadable file (policy ``skip``) a
    placeholder with the reason (``"file PATH: error"``) in the last slot. Train: random-resized crop
    (area in ``[min_crop_scale, 1]``, aspect in ``[3/4, 4/3]``) + horizontal flip. Eval: resize the
    short side to ``S / val_crop_ratio`` and center-crop ``S``.
    """

    def __init__(self, index: FolderIndex, *, image_size: int, train: bool, seed: int, policy: str,
                 min_crop_scale: float = 0.08, val_crop_ratio: float = 1.0) -> None:
        self.samples = index.samples
        self.size = image_size
        self.train = train
        self.seed = seed
        self.policy = policy
        self.min_crop_scale = min_crop_scale
        self.val_crop_ratio = val_crop_ratio

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, key: tuple[int, int]):
        import torch

        epoch, index = key
        path, label = self.samples[index]
        try:
            img = _decode(path)
        except Exception as exc:
            if self.policy == "error":
                raise BadImageError(f"{path}: cannot decode ({type(exc).__name__}: {exc}); "
                                    "remove the file or use --bad-files skip") from None
            return torch.zeros(3, self.size, self.size, dtype=torch.uint8), label, f"file {path}: {type(exc).__name__}: {exc}"
        if self.train:
            g = torch.Generator().manual_seed(_sample_seed(self.seed, epoch, index))
            img = self._random_crop_flip(img, g)
        else:
            img = self._center_crop(img)
        return img.contiguous(), label, None

    def _random_crop_flip(self, img, g):
        import math

        import torch
        from torchvision.transforms.v2 import functional as F

        _, h, w = img.shape
        area = h * w
        top, left, ch, cw = 0, 0, h, w  # fallback: the whole image
        for _ in range(10):
            target = area * (self.min_crop_scale + (1 - self.min_crop_scale) * torch.rand(1, generator=g).item())
            log_ratio = math.log(3 / 4) + (math.log(4 / 3) - math.log(3 / 4)) * torch.rand(1, generator=g).item()
            ratio = math.exp(log_ratio)
            cw_try, ch_try = int(round(math.sqrt(target * ratio))), int(round(math.sqrt(target / ratio)))
            if 0 < cw_try <= w and 0 < ch_try <= h:
                ch, cw = ch_try, cw_try
                top = int(torch.randint(0, h - ch + 1, (1,), generator=g))
                left = int(torch.randint(0, w - cw + 1, (1,), generator=g))
                break
        img = F.resized_crop(img, top, left, ch, cw, [self.size, self.size], antialias=True)
        if torch.rand(1, generator=g).item() < 0.5:
            img = img.flip(-1)
        return img

    def _center_crop(self, img):
        from torchvision.transforms.v2 import functional as F

        short = max(self.size, int(round(self.size / self.val_crop_ratio)))
        img = F.resize(img, [short], antialias=True)
        return F.center_crop(img, [self.size, self.size])


def _decode(path: str):
    """File -> uint8 ``[3, H, W]`` RGB through Pillow (any format it reads; raises on damaged files)."""
    import numpy as np
    import torch
    from PIL import Image

    with Image.open(path) as im:
        arr = np.asarray(im.convert("RGB"))
    return torch.from_numpy(arr.copy()).permute(2, 0, 1)


def collate(batch: list) -> tuple[Any, Any, list[str]]:
    """Stack good samples: ``images uint8 [B, 3, S, S]``, ``labels int64 [B]``, and why others were dropped."""
    import torch

    good = [(img, label) for img, label, bad in batch if bad is None]
    bad = [b for _, _, b in batch if b is not None]
    if not good:
        return torch.zeros(0, dtype=torch.uint8), torch.zeros(0, dtype=torch.int64), bad
    images = torch.stack([img for img, _ in good])
    labels = torch.tensor([label for _, label in good], dtype=torch.int64)
    return images, labels, bad


class EpochSampler:
    """Shuffling, rank-sharding sampler that yields ``(epoch, index)`` keys and can resume mid-epoch.

    Wraps ``torch.utils.data.DistributedSampler`` (one shuffle per ``(seed, epoch)``, padded so
    every rank gets the same count). :meth:`skip` drops the first ``n`` samples of the next pass,
    which resumes a run exactly where its checkpoint left off.
    """

    def __init__(self, n: int, *, rank: int, world_size: int, seed: int, shuffle: bool = True) -> None:
        from torch.utils.data import DistributedSampler

        self.inner = DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=shuffle,
                                        seed=seed, drop_last=False)
        self.epoch = 0
        self._skip = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffle for ``epoch`` (call before every epoch, on every rank)."""
        self.epoch = epoch
        self.inner.set_epoch(epoch)

    def skip(self, n: int) -> None:
        """Drop the first ``n`` samples of the next pass (mid-epoch resume)."""
        self._skip = n

    def __len__(self) -> int:
        return len(self.inner) - self._skip

    def __iter__(self) -> Iterator[tuple[int, int]]:
        skip, self._skip = self._skip, 0
        for i, idx in enumerate(self.inner):
            if i >= skip:
                yield self.epoch, idx


class ShardSampler:
    """Eval sampler: rank ``r`` takes indices ``r, r + W, ...`` (no padding, so no sample counts twice)."""

    def __init__(self, n: int, *, rank: int, world_size: int) -> None:
        self.ids = list(range(rank, n, world_size))

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return ((0, i) for i in self.ids)


class FolderLoader:
    """The simple loader: a ``DataLoader`` over :class:`FolderDataset`, normalising on the device.

    Same interface as :class:`torchport.data.Loader` (the fast path), so the loop does not care
    which one it got: iterate for ``(images float [B, 3, S, S] normalised on the device, labels
    int64 [B])``; ``set_epoch``; ``state_dict`` / ``load_state_dict`` (resume mid-epoch);
    ``stats.skipped`` lists ``(path, reason)`` of unreadable files skipped so far.
    """

    def __init__(self, dataset: FolderDataset, *, batch_size: int, train: bool, seed: int, rank: int,
                 world_size: int, target: Any, channels_last: bool = False, num_workers: int | None = None) -> None:
        import types

        import torch
        from torch.utils.data import DataLoader

        from torchport.runtime.loader import loader_kwargs

        self.dataset, self.batch_size, self.seed, self.world_size = dataset, batch_size, seed, world_size
        self.target = target
        self.sampler = (EpochSampler(len(dataset), rank=rank, world_size=world_size, seed=seed) if train
                        else ShardSampler(len(dataset), rank=rank, world_size=world_size))
        # drop_last for training: every step sees a full batch (BatchNorm statistics, equal work per rank).
        self.loader = DataLoader(dataset, batch_size=batch_size, sampler=self.sampler, drop_last=train,
                                 collate_fn=collate, **loader_kwargs(target, num_workers=num_workers, seed=seed, rank=rank))
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.mean = torch.tensor([0.485, 0.456, 0.406], device=target.device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor([0.229, 0.224, 0.225], device=target.device).view(1, 3, 1, 1) * 255
        self.stats = types.SimpleNamespace(skipped=[], batches=0, images=0)
        self.epoch = 0
        self._consumed = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's shuffle and augmentation (and restart it from its first batch)."""
        self.epoch = epoch
        self._consumed = 0
        if isinstance(self.sampler, EpochSampler):
            self.sampler.set_epoch(epoch)
            self.sampler.skip(0)

    def __len__(self) -> int:
        return len(self.loader)

    def state_dict(self) -> dict[str, Any]:
        """Where the epoch stands: enough to resume at the next batch."""
        return {"epoch": self.epoch, "batches_done": self._consumed, "num_samples": len(self.dataset),
                "batch_size": self.batch_size, "seed": self.seed, "world_size": self.world_size}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue an epoch after ``batches_done`` batches (same data, batch size, seed, world size)."""
        for key, mine in (("num_samples", len(self.dataset)), ("batch_size", self.batch_size), ("seed", self.seed),
                          ("world_size", self.world_size)):
            if state.get(key) != mine:
                raise ValueError(f"loader state has {key}={state.get(key)!r} but this run has {mine!r}; resume "
                                 "with the same data, batch size, seed and number of processes")
        self.set_epoch(int(state["epoch"]))
        self._consumed = int(state["batches_done"])
        if isinstance(self.sampler, EpochSampler):
            self.sampler.skip(self._consumed * self.batch_size)

    def close(self) -> None:
        """Shut down the worker processes (they are persistent between epochs)."""
        iterator = getattr(self.loader, "_iterator", None)
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()
        self.loader._iterator = None

    def __iter__(self):
        from torchport.runtime.batch import to_device

        for images, labels, bad in self.loader:
            self.stats.skipped.extend((None, reason) for reason in bad)
            self._consumed += 1
            self.stats.batches += 1
            self.stats.images += int(labels.shape[0])
            images, labels = to_device((images, labels), self.target.device)
            # uint8 [B, 3, S, S] -> float, normalised on the device (4x less host->device traffic than floats).
            x = ((images.float() - self.mean) / self.std).to(memory_format=self.memory_format)  # Ascend: no .contiguous(cl)
            yield x, labels
