"""The training-side loader: uint8 batches from workers -> normalised floats on the device.

Per batch, the path is:

1. a DataLoader worker builds a uint8 batch (:mod:`torchport.data.dataset`);
2. accelerators: the DataLoader pins it when the backend benefits (``target.backend.pin_memory``),
   the loader copies it with ``non_blocking=True`` and normalises it *on the device*
   (uint8 -> float/bf16/fp16 fused with ``(x/255 - mean) / std``); the next batch is staged
   before the current one is handed out, so the copy overlaps the step;
3. CPU: workers write straight into a ring of shared-memory slots mapped once by every process
   (no per-batch shared-memory segment, page faults or file-descriptor passing). For float32
   batches the workers also normalise (fused into their transpose + flip pass) and the batch
   handed out *is* the slot: the main process does no per-pixel work. When ``/dev/shm`` lacks
   room for the float ring (containers often give it 64 MB) the ring holds uint8 and the main
   process normalises into one of two preallocated buffers -- the same floats. Either way a
   batch stays valid until the next-but-one is requested; ``.clone()`` it to keep it longer, or
   pass ``reuse_buffers=False``.

Augmentation runs in workers (``augment="cpu"``: crop + antialiased resize on uint8) or on the
device (``augment="device"``: workers send whole images, one batched ``grid_sample`` crops them).
``"auto"`` picks ``device`` for predecoded shards on an accelerator (the CPU then only slices
memory maps) and ``cpu`` otherwise (JPEGs must be decoded on the CPU anyway, and crops shrink
what crosses the bus).

Example::

    loader = make_loader("shards", batch_size=256, train=True, image_size=224, seed=0)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:      # images: (B, 3, 224, 224) float on the device
            ...
"""

from __future__ import annotations

import dataclasses
import os
import warnings
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from torchport.data.augment import IMAGENET_MEAN, IMAGENET_STD, device_crop_resize, normalise_into
from torchport.data.dataset import AugmentConfig, Batch, BatchDataset, ImageFolderDataset, ShardDataset
from torchport.data.errors import SourceError
from torchport.data.format import is_shard_dir
from torchport.data.pack import split_dirs
from torchport.data.sampler import EpochBatchSampler
from torchport.storage import fs

__all__ = ["LoaderConfig", "Loader", "make_loader", "open_dataset", "CorruptSampleWarning"]

_DTYPES = ("float32", "bfloat16", "float16")


class CorruptSampleWarning(UserWarning):
    """A corrupt sample was skipped (``corrupt="skip"``); it is also listed in ``loader.stats``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoaderConfig:
    """Options of :func:`make_loader` (all keyword-only; unknown keys are errors).

    Args:
        batch_size: per-rank batch size.
        train: training augmentation + shuffling (True) or centre crops in order (False).
        image_size: output side.
        seed: shuffle + augmentation seed.
        num_workers: DataLoader worker processes (default: CPUs available, at most 8).
        rank, world_size: this process's slice (default: torch.distributed if initialised, else 0/1).
        drop_last: default ``train``.
        augment: ``"auto" | "cpu" | "device"`` (see module docstring).
        dtype: ``"float32" | "bfloat16" | "float16"`` of the delivered images.
        mean, std: per-channel normalisation (0..1 scale).
        corrupt: ``"error"`` or ``"skip"`` (skipped samples are counted and warned about).
        verify: shard checks before training (``"auto" | "full" | "quick" | "none"``).
        channels_last: deliver ``torch.channels_last`` images.
        reuse_buffers: CPU only -- normalise into two preallocated buffers.
        prefetch_factor: batches each worker prepares ahead.
        persistent_workers: keep workers between epochs.
        return_indices: yield ``(images, labels, indices)`` (for parity checks).
        order: ``"global"`` (one shuffle of all samples, ranks strided), ``"shards"`` (ranks take
            disjoint runs of shards; see :mod:`torchport.data.sampler`), ``"auto"`` (shards for data in
            an object store, global otherwise).
    """

    batch_size: int = 64
    train: bool = True
    image_size: int = 224
    seed: int = 0
    num_workers: int | None = None
    rank: int | None = None
    world_size: int | None = None
    drop_last: bool | None = None
    augment: str = "auto"
    dtype: str = "float32"
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    corrupt: str = "error"
    verify: str = "auto"
    channels_last: bool = False
    reuse_buffers: bool = True
    prefetch_factor: int = 2
    persistent_workers: bool = True
    return_indices: bool = False
    order: str = "auto"

    def __post_init__(self) -> None:
        if self.order not in ("auto", "global", "shards"):
            raise ValueError(f"order={self.order!r}: use 'auto', 'global' or 'shards'")
        if self.augment not in ("auto", "cpu", "device"):
            raise ValueError(f"augment={self.augment!r}: use 'auto', 'cpu' or 'device'")
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype={self.dtype!r}: use one of {', '.join(_DTYPES)}")


def _default_workers() -> int:
    """One worker per core of this process's CPU budget (the main process only normalises), at most 8."""
    from torchport.runtime.loader import cpu_budget

    return max(1, min(8, cpu_budget()))


def _dist_rank_world() -> tuple[int, int]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # pragma: no cover
        pass
    return 0, 1


def open_dataset(path: str | os.PathLike, *, train: bool, aug: AugmentConfig, verify: str = "auto") -> BatchDataset:
    """The batch dataset for ``path``: shards, a train/val split directory, or a raw ImageFolder.

    ``path`` may be a shard directory, a directory with ``train``/``val`` sub-directories (shards or
    ImageFolders), or one ImageFolder (read directly through the fast path, no packing needed).
    """
    if fs.remote(path):  # s3:// or obs://: shards streamed through the node's block cache
        return _open_remote_dataset(str(path).rstrip("/"), train=train, aug=aug, verify=verify)
    p = Path(path)
    if is_shard_dir(p):
        return ShardDataset(p, verify=verify, aug=aug)
    splits = split_dirs(p)
    if splits:
        want = "train" if train else ("val" if "val" in splits else "test")
        if want not in splits:
            raise SourceError(f"{p} has splits {splits} but no {want!r} split")
        return open_dataset(p / want, train=train, aug=aug, verify=verify)
    if not p.is_dir():
        raise SourceError(f"dataset path {p} does not exist or is not a directory")
    return ImageFolderDataset(p, aug=aug)


def _open_remote_dataset(url: str, *, train: bool, aug: AugmentConfig, verify: str) -> BatchDataset:
    """A shard set in an object store, or one with ``train``/``val``/``test`` shard sets under it."""
    from torchport.storage.store import join, listdir

    if is_shard_dir(url):
        return ShardDataset(url, verify=verify, aug=aug)
    splits = [s for s in ("train", "val", "test") if s in listdir(url) and is_shard_dir(join(url, s))]
    if not splits:
        raise SourceError(f"{url} holds no torchport shard set (no index.json, nor train/ or val/ ones); "
                          f"pack one there with `torchport data pack SRC {url}`")
    want = "train" if train else ("val" if "val" in splits else "test")
    if want not in splits:
        raise SourceError(f"{url} has splits {splits} but no {want!r} split")
    return ShardDataset(join(url, want), verify=verify, aug=aug)


@dataclasses.dataclass
class LoaderStats:
    """Counters since the loader was made: batches, images, and skipped corrupt samples."""

    batches: int = 0
    images: int = 0
    skipped: list = dataclasses.field(default_factory=list)


class Loader:
    """Iterable of ``(images, labels)`` on the target device, with ``set_epoch`` and resumable state.

    Build it with :func:`make_loader`. ``len(loader)`` is the number of batches left in the epoch.
    """

    def __init__(self, dataset: BatchDataset, cfg: LoaderConfig, target: Any) -> None:
        import torch

        self.dataset, self.cfg, self.target = dataset, cfg, target
        rank, world = _dist_rank_world()
        rank = cfg.rank if cfg.rank is not None else rank
        world = cfg.world_size if cfg.world_size is not None else world
        drop_last = cfg.train if cfg.drop_last is None else cfg.drop_last
        chunks = getattr(dataset, "chunk_sizes", None)
        order = cfg.order
        if order == "auto":
            order = "shards" if getattr(dataset, "remote", False) and chunks is not None else "global"
        if order == "shards" and chunks is None:
            from torchport.errors import ConfigError

            raise ConfigError("data order 'shards' needs a shard set (an ImageFolder has no shards); pack it with "
                              "`torchport data pack` or use order 'global'")
        self.sampler = EpochBatchSampler(
            len(dataset), cfg.batch_size, seed=cfg.seed, shuffle=cfg.train, rank=rank, world_size=world, drop_last=drop_last,
            order=order, chunk_sizes=chunks,
        )
        dataset.reading = self.sampler   # each epoch's rank slice bounds the store read-ahead (BatchDataset.plan)
        self.num_workers = _default_workers() if cfg.num_workers is None else cfg.num_workers
        self.stats = LoaderStats()
        self._consumed = 0
        self._dl = None
        self._buffers: list = []
        self._turn = 0
        self._slots = None
        self.device = target.device
        self.dtype = getattr(torch, cfg.dtype)
        mean = torch.tensor(cfg.mean, dtype=torch.float32).view(1, 3, 1, 1)
        std = torch.tensor(cfg.std, dtype=torch.float32).view(1, 3, 1, 1)
        self._scale = (1.0 / (255.0 * std)).to(self.device)
        self._bias = (-mean / std).to(self.device)
        self._scale_c = np.ascontiguousarray((1.0 / (255.0 * std)).numpy().ravel())  # (3,) float32
        self._bias_c = np.ascontiguousarray((-mean / std).numpy().ravel())
        self.pin = bool(target.backend.pin_memory) and bool(target.is_accelerator)

    # ------------------------------------------------------------------ epochs / state
    def set_epoch(self, epoch: int) -> None:
        """Select the epoch: its shuffle and every sample's augmentation follow from (seed, epoch, index)."""
        self.sampler.set_epoch(epoch)
        self._consumed = 0

    @property
    def epoch(self) -> int:
        """Current epoch."""
        return self.sampler.epoch

    def __len__(self) -> int:
        return len(self.sampler)

    def state_dict(self) -> dict[str, Any]:
        """Position to resume from: epoch and batches already delivered in it."""
        s = self.sampler
        return {
            "version": 1,
            "epoch": s.epoch,
            "batches_done": self._consumed,
            "seed": s.seed,
            "num_samples": s.n,
            "batch_size": s.batch_size,
            "world_size": s.world_size,
            "order": s.order,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iteration starts at the first batch not yet delivered.

        Raises:
            ValueError: the state comes from a different dataset size, batch size, seed or world size.
        """
        s = self.sampler
        for key, mine in (("num_samples", s.n), ("batch_size", s.batch_size), ("seed", s.seed), ("world_size", s.world_size)):
            if state.get(key) != mine:
                raise ValueError(
                    f"loader state has {key}={state.get(key)!r} but this loader has {mine!r}; "
                    "resume with the same dataset, batch size, seed and world size"
                )
        if state.get("order", "global") != s.order:
            raise ValueError(f"loader state has order={state.get('order', 'global')!r} but this loader has {s.order!r}; "
                             "resume with the same data order")
        s.epoch = int(state["epoch"])
        s.start = int(state["batches_done"])
        self._consumed = s.start

    # ------------------------------------------------------------------ iteration
    def _make_slots(self) -> None:
        """Shared-memory ring the workers write into (CPU targets, CPU augmentation, with workers).

        Slot ``c % K`` holds the ``c``-th batch requested. The DataLoader never has more than
        ``prefetch_factor * num_workers`` batches requested beyond the one being returned, and
        that one is normalised into the float buffers before the next request, so with
        ``K = prefetch_factor * num_workers + 2`` a slot is never written while it is read.
        """
        import torch

        self._slots = None
        self.dataset.slots = None
        self.dataset.slot_norm = None
        if self.target.is_accelerator or self.num_workers == 0 or self.dataset.aug.where != "cpu":
            return
        oh, ow = self.dataset.aug.out_hw
        k = self.cfg.prefetch_factor * self.num_workers + 2
        shape = (k, self.cfg.batch_size, 3, oh, ow)
        # float32 batches normalised by the workers when shared memory has room for them (4x the uint8 ring):
        # the consumer then hands out the slot itself -- no pass over 600 KB per image in the main process
        fused = self.dtype == torch.float32 and self.cfg.reuse_buffers and _shm_room(4 * int(np.prod(shape)))
        self._slots = torch.empty(shape, dtype=torch.float32 if fused else torch.uint8).share_memory_()
        self.dataset.slots = self._slots
        if fused:
            self.dataset.slot_norm = (self._scale_c, self._bias_c)

    def _dataloader(self):
        import torch

        from torchport.runtime.loader import quiet_worker

        persistent = self.cfg.persistent_workers and self.num_workers > 0
        if self._dl is None or not persistent:
            # fresh workers (first use, or non-persistent ones forked anew for every iteration) get
            # their own slot ring, so a still-running older iterator can never write into this one's
            self._make_slots()
        if self._dl is None:
            nw = self.num_workers
            self._dl = torch.utils.data.DataLoader(
                self.dataset,
                batch_size=None,
                sampler=_SlotSampler(self.sampler, self),
                num_workers=nw,
                pin_memory=self.pin,
                prefetch_factor=self.cfg.prefetch_factor if nw > 0 else None,
                persistent_workers=self.cfg.persistent_workers and nw > 0,
                collate_fn=_identity,
                worker_init_fn=quiet_worker if nw > 0 else None,   # Ctrl-C: one line from the main process
            )
        return self._dl

    def __iter__(self):
        import torch

        # torch's pin-memory thread starts with torch.set_num_threads(1): meant for itself, it also sets the
        # process-wide count that every thread reads when it first runs a parallel kernel -- the autograd
        # engine's device threads among them (on the emulated npu they run the backward's host kernels:
        # one thread instead of the machine's, and a different summation order than the same model on
        # CPU). The calling thread's own count can stay right meanwhile, so comparing it shows nothing;
        # the first batch proves the pin thread has started, and the count is put back then.
        threads = torch.get_num_threads()  # the calling thread's (read before the pin thread exists)
        restore = self.pin
        it = iter(self._dataloader())
        staged = None
        for raw in it:
            if restore:
                torch.set_num_threads(threads)
                restore = False
            ready = self._stage(raw)
            if not self.target.is_accelerator:  # CPU: nothing to overlap, hand it out now
                yield self._deliver(ready)
                continue
            if staged is not None:  # accelerator: the next batch's copy was queued first
                yield self._deliver(staged)
            staged = ready
        if staged is not None:
            yield self._deliver(staged)
        self.sampler.start = 0
        self._consumed = 0

    def close(self) -> None:
        """Stop the worker processes now (they persist between epochs) and wait for them to exit.

        Call it when done (the trainer does, before leaving the process group): left to the garbage
        collector at interpreter exit, workers and their queue feeder threads can be torn down in the
        wrong order and print ``QueueFeederThread`` tracebacks. Safe to call twice; the loader can be
        iterated again afterwards (with fresh workers).
        """
        dl, self._dl = self._dl, None
        iterator = getattr(dl, "_iterator", None) if dl is not None else None
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()
        if dl is not None:
            dl._iterator = None
        self.dataset.slots = None
        self._slots = None

    def _deliver(self, item):
        self._consumed += 1
        self.sampler.start = self._consumed
        return item

    def _note_skipped(self, batch: Batch) -> None:
        for idx, reason in batch.skipped:
            self.stats.skipped.append((idx, reason))
            warnings.warn(f"skipped corrupt sample: {reason}", CorruptSampleWarning, stacklevel=3)

    def _stage(self, batch: Batch):
        import torch

        self._note_skipped(batch)
        if isinstance(batch.labels, np.ndarray):  # slot-ring batches carry numpy labels / indices
            batch.labels, batch.indices = torch.from_numpy(batch.labels), torch.from_numpy(batch.indices)
        labels = batch.labels.to(self.device, non_blocking=self.pin)
        if batch.slot is not None:
            x = self._slots[batch.slot][: labels.shape[0]]
            images = x if x.dtype == self.dtype else self._normalize_cpu(x)  # float slots: normalised by the workers
        elif batch.boxes is not None:
            images = self._device_augment(batch)
        elif self.target.is_accelerator:
            x = batch.images.to(self.device, non_blocking=self.pin)
            images = self._normalize_device(x.to(torch.float32))
        else:
            images = self._normalize_cpu(batch.images)
        if self.cfg.channels_last:
            # .to(), not .contiguous(memory_format=...): the Ascend backend's contiguous() refuses every format but the default
            images = images.to(memory_format=torch.channels_last)
        self.stats.batches += 1
        self.stats.images += int(images.shape[0])
        if self.cfg.return_indices:
            return images, labels, batch.indices
        return images, labels

    def _normalize_device(self, y):
        """``y * scale + bias`` in place on float32 ``y``: a multiply, then an add, each rounded -- the same bytes as
        :func:`normalise_into` on the host. Not ``torch.addcmul``: its vectorised CPU kernels fuse the two into one
        FMA (one rounding; the scalar kernel does not), so a batch normalised on a device differed from the same
        batch normalised on CPU in the last bit of about half its pixels, and fp32 training on the emulated npu
        drifted from CPU training (issue 39). Two elementwise kernels round identically on every device."""
        return y.mul_(self._scale).add_(self._bias).to(self.dtype)

    def _normalize_cpu(self, x):
        import torch

        b = x.shape[0]
        if not self.cfg.reuse_buffers:
            out = torch.empty(x.shape, dtype=self.dtype)
        else:
            if not self._buffers or self._buffers[0].shape[1:] != x.shape[1:] or self._buffers[0].shape[0] < b:
                self._buffers = [torch.empty((max(b, self.cfg.batch_size),) + tuple(x.shape[1:]), dtype=self.dtype) for _ in range(2)]
            out = self._buffers[self._turn][:b]
            self._turn ^= 1
        if self.dtype == torch.float32:
            normalise_into(out.numpy(), x.numpy(), self._scale_c, self._bias_c)
            return out
        scale, bias = self._scale.to(self.dtype), self._bias.to(self.dtype)
        for i in range(0, b, 4):
            o = out[i : i + 4]
            o.copy_(x[i : i + 4])
            o.mul_(scale).add_(bias)
        return out

    def _device_augment(self, batch: Batch):
        import torch

        x = batch.images.to(self.device, non_blocking=self.pin)  # (B, Hc, Wc, 3) uint8
        x = x.permute(0, 3, 1, 2).to(torch.float32)
        boxes = batch.boxes.to(self.device, non_blocking=self.pin)
        flips = batch.flips.to(self.device, non_blocking=self.pin)
        y = device_crop_resize(x, boxes, flips, None, self.dataset.aug.out_hw)
        return self._normalize_device(y)


def _shm_room(nbytes: int) -> bool:
    """True when POSIX shared memory (``/dev/shm``) has at least twice ``nbytes`` free (unknown: False).

    Containers often give it 64 MB: a float32 slot ring (~230 MB at batch 64, 224 px) would die there with
    a bus error, so the loader falls back to the uint8 ring (a quarter of the size) and normalises itself.
    """
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return False
    return st.f_bavail * st.f_frsize >= 2 * nbytes


def _identity(x):
    return x


class _SlotSampler:
    """Wraps the batch sampler: each item becomes ``(epoch, indices, slot)`` (slot ring index)."""

    def __init__(self, sampler: EpochBatchSampler, loader: "Loader") -> None:
        # a weak reference: Loader -> DataLoader -> sampler -> Loader would be a cycle, freed only by
        # the cyclic GC, which may finalise the worker queues before the iterator can send workers
        # their stop signal (each worker then waits out a 5 s join timeout)
        self.sampler, self._loader = sampler, weakref.ref(loader)
        self.counter = 0

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self):
        for epoch, idx in self.sampler:
            loader = self._loader()
            slots = None if loader is None else loader._slots
            if slots is None:
                yield epoch, idx
            else:
                yield epoch, idx, self.counter % slots.shape[0]
                self.counter += 1


def make_loader(
    path: str | os.PathLike,
    *,
    batch_size: int,
    train: bool = True,
    image_size: int = 224,
    seed: int = 0,
    num_workers: int | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    target: Any = None,
    **options: Any,
) -> Loader:
    """Build the fast loader for a shard directory, a train/val directory, or a raw ImageFolder.

    Args:
        path: see :func:`open_dataset`.
        batch_size, train, image_size, seed, num_workers, rank, world_size: see :class:`LoaderConfig`.
        target: a :class:`torchport.runtime.device.Target` (default: ``torchport.runtime.device.current()``).
        **options: other :class:`LoaderConfig` fields (``augment``, ``dtype``, ``corrupt`` ...).

    Returns:
        A :class:`Loader`; call ``set_epoch(e)`` before each epoch.

    Example::

        train = make_loader(root, batch_size=128, train=True, image_size=64, seed=1, num_workers=2)
        val = make_loader(root, batch_size=256, train=False, image_size=64)
    """
    cfg = LoaderConfig(
        batch_size=batch_size,
        train=train,
        image_size=image_size,
        seed=seed,
        num_workers=num_workers,
        rank=rank,
        world_size=world_size,
        **options,
    )
    if target is None:
        from torchport.runtime.device import current

        target = current()
    where = cfg.augment
    aug = AugmentConfig(size=image_size, train=train, seed=seed, where="cpu", corrupt=cfg.corrupt)
    ds = open_dataset(path, train=train, aug=aug, verify=cfg.verify)
    from torchport.data.decode import native_status

    native_status()  # build / load the native fast path once here, before workers fork
    if where == "auto":
        where = "device" if (target.is_accelerator and getattr(ds, "mode", "") == "predecoded") else "cpu"
    if where != "cpu":
        ds.aug = dataclasses.replace(aug, where=where)
    return Loader(ds, cfg, target)
