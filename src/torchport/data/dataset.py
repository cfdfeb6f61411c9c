"""Datasets that build whole uint8 batches inside DataLoader workers.

A worker receives ``(epoch, indices)`` from :class:`~torchport.data.sampler.EpochBatchSampler`
and returns one :class:`Batch` of uint8 images -- never floats: 4x less memory traffic between
processes, and normalisation happens once, fused, on the device (or into preallocated buffers
on CPU) in :mod:`torchport.data.loader`.

Sources:

* :class:`ShardDataset` -- packed shards (``predecoded`` pixels or ``jpeg`` bytes).
* :class:`ImageFolderDataset` -- an unpacked ImageFolder, same decode/augment fast path.

Example::

    ds = ShardDataset("shards/train", size=224, train=True, seed=0)
    batch = ds[(0, np.arange(8))]        # Batch(images=(8, 3, 224, 224) uint8, labels=(8,), ...)
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from torchport.data.augment import CropParams, center_params, resize_into, rrc_params
from torchport.data.decode import decode_any, decode_crop, is_jpeg, jpeg_size
from torchport.data.errors import CorruptSampleError, SampleChecksumError
from torchport.data.format import ShardSet
from torchport.data.pack import scan_image_folder

__all__ = ["Batch", "AugmentConfig", "ShardDataset", "ImageFolderDataset", "BatchDataset"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AugmentConfig:
    """What a worker does to each sample.

    Args:
        size: output (height, width) or one int for square.
        train: RandomResizedCrop + flip (True) or centre crop (False).
        seed: run seed -- with epoch and index, the only source of randomness.
        scale, ratio: RandomResizedCrop ranges (torchvision defaults).
        crop_fraction: evaluation centre-crop fraction (224/256).
        where: ``"cpu"`` (crop/resize in workers) or ``"device"`` (workers return whole images;
            the loader crops the batch on the device).
        corrupt: ``"error"`` (raise, naming the sample) or ``"skip"`` (drop it from the batch,
            count and report it).
        fast_dct: libjpeg-turbo fast IDCT/upsampling.
    """

    size: tuple[int, int] | int = 224
    train: bool = True
    seed: int = 0
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    crop_fraction: float = 0.875
    where: str = "cpu"
    corrupt: str = "error"
    fast_dct: bool = True

    def __post_init__(self) -> None:
        if self.where not in ("cpu", "device"):
            raise ValueError(f"where={self.where!r}: use 'cpu' or 'device'")
        if self.corrupt not in ("error", "skip"):
            raise ValueError(f"corrupt={self.corrupt!r}: use 'error' or 'skip'")

    @property
    def out_hw(self) -> tuple[int, int]:
        """Output (height, width)."""
        return (self.size, self.size) if isinstance(self.size, int) else tuple(self.size)  # type: ignore[return-value]


@dataclasses.dataclass
class Batch:
    """What a worker returns.

    Attributes:
        images: uint8 ``(B, 3, H, W)`` (cpu) or uint8 canvases ``(B, Hc, Wc, 3)`` (device path).
        labels: int64 ``(B,)``. indices: int64 ``(B,)`` dataset indices in batch order (numpy arrays
            when ``slot`` is set, torch tensors otherwise).
        boxes: float32 ``(B, 4)`` crop boxes in canvas pixels (device path only).
        flips: bool ``(B,)`` (device path only).
        skipped: ``[(index, reason), ...]`` corrupt samples dropped under ``corrupt="skip"``.
        slot: when set, ``images`` is None and the pixels are in ``slot`` of the loader's
            shared-memory ring (see :class:`~torchport.data.loader.Loader`).
    """

    images: Any
    labels: Any
    indices: Any
    boxes: Any = None
    flips: Any = None
    skipped: list = dataclasses.field(default_factory=list)
    slot: int | None = None

    def pin_memory(self, *args: Any) -> "Batch":
        """Page-locked copy (called by the DataLoader's pin thread when the backend benefits)."""
        pin = lambda t: None if t is None else t.pin_memory(*args)  # noqa: E731
        return dataclasses.replace(
            self, images=pin(self.images) if self.images is not None else None, labels=pin(self.labels), indices=self.indices, boxes=pin(self.boxes), flips=pin(self.flips)
        )


def _empty_shared(shape: tuple[int, ...]):
    """A uint8 tensor; inside a DataLoader worker it lives in shared memory from the start.

    Sending a batch to the main process otherwise copies it into a new shared-memory segment
    (the same trick ``default_collate`` uses for its output).
    """
    import torch

    if torch.utils.data.get_worker_info() is not None:
        try:
            numel = int(np.prod(shape))
            proto = torch.empty(0, dtype=torch.uint8)
            storage = proto._typed_storage()._new_shared(numel, device=proto.device)
            return proto.new(storage).view(shape)
        except (AttributeError, RuntimeError, TypeError):  # private API moved: fall back to a plain tensor
            pass
    return torch.empty(shape, dtype=torch.uint8)


class BatchDataset:
    """Map-style dataset whose items are whole batches: ``ds[(epoch, indices)] -> Batch``.

    Subclasses provide ``labels``, ``_sizes(indices)``, ``_fetch(i)`` and ``describe(i)``.
    """

    labels: np.ndarray
    mode: str = ""  # "predecoded" | "jpeg" (shards) | "folder"

    def __init__(self, aug: AugmentConfig) -> None:
        self.aug = aug
        #: optional shared-memory ring ``(K, B, 3, H, W)`` uint8 the loader hands to its workers
        self.slots = None
        self.slot_norm = None  # (scale, bias) float32 arrays when the slots are float32 (normalised in the workers)
        #: the sampler whose ``rank_indices(epoch)`` are what this process reads (set by the Loader): an item of a
        #: new epoch hands them to :meth:`plan` first, in whichever process (worker) reads it
        self.reading = None
        self._planned: int | None = None

    def plan(self, indices_of) -> None:
        """``indices_of()``: the samples this process reads this epoch, in order. Shards in an object store bound
        their read-ahead by them; other sources need nothing (and do not compute them)."""

    # -- source interface ------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.labels)

    def _sizes(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _fetch(self, i: int):
        """Return ('pixels', HWC array) or ('jpeg', bytes)."""
        raise NotImplementedError

    def describe(self, i: int) -> str:
        raise NotImplementedError

    # -- batch assembly --------------------------------------------------------------
    def params(self, epoch: int, indices: np.ndarray, heights: np.ndarray, widths: np.ndarray) -> CropParams:
        """Crop parameters for ``indices``: a pure function of (seed, epoch, index, image size)."""
        a = self.aug
        if a.train:
            return rrc_params(heights, widths, seed=a.seed, epoch=epoch, indices=indices, scale=a.scale, ratio=a.ratio)
        return center_params(heights, widths, crop_fraction=a.crop_fraction)

    def _image_for(self, i: int, k: int, p: CropParams, H: int, W: int):
        """Decoded image (possibly DCT-downscaled) and the box in its pixels."""
        kind, payload = self._fetch(i)
        if kind == "pixels":
            return payload, (int(p.top[k]), int(p.left[k]), int(p.height[k]), int(p.width[k]))
        box = (int(p.top[k]), int(p.left[k]), int(p.height[k]), int(p.width[k]))
        try:  # only the crop's region, DCT-scaled when the crop allows (same pixels as a full decode)
            img, box, _f = decode_crop(payload, (H, W), box, self.aug.out_hw, fast=self.aug.fast_dct)
            return img, box
        except ValueError:
            if self.mode == "jpeg":  # packing stored only bytes that decode cleanly: this is damage
                raise
            img = decode_any(payload)  # a file libjpeg-turbo rejects (CMYK, PNG named .jpg ...): Pillow, full size
        if img.ndim == 2:
            img = np.repeat(img[:, :, None], 3, axis=2)
        if img.shape[0] != H or img.shape[1] != W:
            fy, fx = img.shape[0] / H, img.shape[1] / W
            box = p.scaled(k, fy, fx, img.shape[0], img.shape[1])
        return img, box

    def __getitem__(self, item) -> Batch:
        import torch

        epoch, indices = item[0], item[1]
        if self.reading is not None and self._planned != epoch:
            self._planned = epoch
            self.plan(lambda: self.reading.rank_indices(epoch))
        slot = item[2] if len(item) > 2 and self.slots is not None else None
        indices = np.asarray(indices, dtype=np.int64)
        H, W = self._sizes(indices)
        p = self.params(epoch, indices, H, W)
        oh, ow = self.aug.out_hw
        keep: list[int] = []
        skipped: list[tuple[int, str]] = []
        if self.aug.where == "cpu":
            if slot is not None and tuple(self.slots.shape[2:]) == (3, oh, ow) and self.slots.shape[1] >= len(indices):
                out = self.slots[slot]  # written in place: nothing crosses the process boundary but labels
            else:
                slot = None
                out = _empty_shared((len(indices), 3, oh, ow))
            for k, i in enumerate(indices):
                try:
                    img, box = self._image_for(int(i), k, p, int(H[k]), int(W[k]))
                    resize_into(out[len(keep)], img, box, bool(p.flip[k]), norm=self.slot_norm if slot is not None else None)
                except (ValueError, OSError, SampleChecksumError) as e:
                    self._on_corrupt(int(i), e, skipped)
                    continue
                keep.append(k)
            images = None if slot is not None else out[: len(keep)]
            boxes = flips = None
        else:
            imgs, boxes_l = [], []
            for k, i in enumerate(indices):
                try:
                    img, box = self._image_for(int(i), k, p, int(H[k]), int(W[k]))
                except (ValueError, OSError, SampleChecksumError) as e:
                    self._on_corrupt(int(i), e, skipped)
                    continue
                imgs.append(img)
                boxes_l.append(box)
                keep.append(k)
            hc = max((im.shape[0] for im in imgs), default=1)
            wc = max((im.shape[1] for im in imgs), default=1)
            images = torch.zeros((len(imgs), hc, wc, 3), dtype=torch.uint8)
            for j, im in enumerate(imgs):
                images[j, : im.shape[0], : im.shape[1]].copy_(torch.from_numpy(np.ascontiguousarray(im)))
            boxes = torch.tensor(boxes_l, dtype=torch.float32).reshape(-1, 4)
            flips = torch.from_numpy(p.flip[keep].copy()) if keep else torch.zeros(0, dtype=torch.bool)
            slot = None
        kept = indices[keep]
        labels = self.labels[kept].astype(np.int64)
        # slot path: only small numpy arrays cross the pipe (pickled inline); a torch tensor would
        # travel as a shared-memory segment + fd handshake per tensor per batch (~0.4 ms CPU, more wall)
        wrap = (lambda a: a) if slot is not None else torch.from_numpy
        return Batch(
            images=images,
            labels=wrap(labels),
            indices=wrap(kept),
            boxes=boxes,
            flips=flips,
            skipped=skipped,
            slot=slot,
        )

    def _on_corrupt(self, i: int, e: Exception, skipped: list) -> None:
        """Apply the corrupt-sample policy to an undecodable sample or one whose bytes fail their crc32.
        A truncated or missing *shard* (ShardCorruptError) always raises."""
        where = self.describe(i)
        msg = str(e) if str(e).startswith(where) else f"{where}: {e}"
        if self.aug.corrupt == "error":
            raise CorruptSampleError(
                f"{'bad sample' if isinstance(e, SampleChecksumError) else 'cannot decode'} {msg}. Run `torchport data verify`, re-pack, or pass corrupt='skip' to drop and count such samples"
            ) from e
        skipped.append((i, msg))


class ShardDataset(BatchDataset):
    """Batches from a packed shard directory (see :mod:`torchport.data.format`).

    Args:
        root: shard directory (``index.json`` inside).
        verify: ``"none" | "quick" | "full" | "auto"`` -- checks done before any sample is read;
            ``"auto"`` = full sha256 when the shards total <= 4 GiB, else quick.
        **aug: :class:`AugmentConfig` fields (size, train, seed, where, corrupt ...).
    """

    def __init__(self, root: str | os.PathLike, *, verify: str = "auto", aug: AugmentConfig | None = None, **kw: Any) -> None:
        super().__init__(aug or AugmentConfig(**kw))
        if verify == "auto":
            quick = ShardSet.open(root, verify="quick")
            # in an object store a full check would download everything up front: quick it is
            verify = "full" if quick.total_bytes <= (4 << 30) and quick.remote is None else "none"
            self.shards = ShardSet.open(root, verify="full") if verify == "full" else quick
        else:
            self.shards = ShardSet.open(root, verify=verify)
        self.root = self.shards.root  # a Path, or the s3:// / obs:// URL
        self.mode = self.shards.mode
        self.classes = self.shards.classes
        self.labels = self.shards.labels

    @property
    def remote(self) -> bool:
        """True when the shards are in an object store."""
        return self.shards.remote is not None

    @property
    def chunk_sizes(self):
        """Samples per shard in index order (None if a shard's samples are not contiguous)."""
        col = self.shards._shard_col
        if len(col) and not bool(np.all(np.diff(col) >= 0)):
            return None
        return np.bincount(col, minlength=len(self.shards.manifest["shards"]))

    def plan(self, indices_of):
        if self.remote:
            self.shards.plan_readahead(indices_of())

    def _sizes(self, indices):
        self.shards.prefetch(indices)  # object store: the batch's blocks, fetched concurrently (no-op on disk)
        return self.shards.heights[indices], self.shards.widths[indices]

    def _fetch(self, i):
        if self.mode == "predecoded":
            return "pixels", self.shards.pixels(i)
        return "jpeg", self.shards.raw(i)

    def describe(self, i: int) -> str:
        return self.shards.describe(i)


class ImageFolderDataset(BatchDataset):
    """Batches straight from an ImageFolder (no packing), with the same decode + augment fast path.

    JPEG sizes come from the header (no decode); other formats are decoded by Pillow at full size.
    """

    def __init__(self, root: str | os.PathLike, *, aug: AugmentConfig | None = None, **kw: Any) -> None:
        super().__init__(aug or AugmentConfig(**kw))
        self.root = Path(root)
        self.classes, items = scan_image_folder(root)
        self.paths = [p for p, _ in items]
        self.labels = np.array([lab for _, lab in items], dtype=np.int64)
        self._cache: dict[int, Any] = {}
        self.mode = "folder"

    def _read(self, i: int) -> bytes:
        with open(self.paths[i], "rb") as f:
            return f.read()

    def _sizes(self, indices):
        H = np.zeros(len(indices), dtype=np.int64)
        W = np.zeros(len(indices), dtype=np.int64)
        self._cache = {}
        for k, i in enumerate(indices):
            try:
                data = self._read(int(i))
                if is_jpeg(data):
                    try:
                        H[k], W[k] = jpeg_size(data)
                        self._cache[int(i)] = ("jpeg", data)
                        continue
                    except ValueError:
                        pass
                img = decode_any(data)
                self._cache[int(i)] = ("pixels", img if img.ndim == 3 else np.repeat(img[:, :, None], 3, axis=2))
                H[k], W[k] = img.shape[:2]
            except (OSError, ValueError) as e:
                self._cache[int(i)] = ("error", e)
                H[k] = W[k] = 1
        return H, W

    def _fetch(self, i):
        kind, payload = self._cache.pop(i)
        if kind == "error":
            raise payload
        return kind, payload

    def describe(self, i: int) -> str:
        return f"file {self.paths[i]} (sample {i})"


class SubsetDataset(BatchDataset):
    """A view of ``base`` restricted to the sample indices ``ids`` (a train / held-out validation split).

    Index ``j`` here is sample ``ids[j]`` of ``base``; augmentation is seeded from ``j``. ``base`` keeps
    decoding; this view only maps indices, so shards and ImageFolders split the same way.
    """

    def __init__(self, base: BatchDataset, ids: Any, *, aug: AugmentConfig | None = None) -> None:
        super().__init__(aug or base.aug)
        self.base = base
        self.ids = np.asarray(ids, dtype=np.int64)
        self.labels = base.labels[self.ids]
        self.mode = base.mode
        self.classes = getattr(base, "classes", [])
        self.root = getattr(base, "root", None)

    def plan(self, indices_of):
        self.base.plan(lambda: self.ids[np.asarray(indices_of(), dtype=np.int64)])

    def _sizes(self, indices):
        return self.base._sizes(self.ids[np.asarray(indices, dtype=np.int64)])

    def _fetch(self, i):
        return self.base._fetch(int(self.ids[i]))

    def describe(self, i: int) -> str:
        return self.base.describe(int(self.ids[i]))
