"""Deterministic, rank-split, resumable batch sampler.

The epoch's global order is :func:`torchport.data.rng.permutation` of ``(n, seed, epoch)``; rank
``r`` of ``w`` takes every ``w``-th element starting at ``r`` (as ``DistributedSampler``), padded
by wrapping around when ``drop_last`` is False. Each item it yields is ``(epoch, indices)`` so
workers need no shared state to know the epoch.

Shard-aware order (``order="shards"``, the default for data in an object store): the epoch's
order is a permutation of *chunks* (shards) with each chunk's samples shuffled inside it; rank ``r``
takes a **contiguous** slice of that order, so N ranks read disjoint shards (only the shards at
slice boundaries are shared) and consecutive batches read neighbouring bytes (read-ahead pays off);
inside its slice a rank mixes samples across windows of about two chunks. Every rank still sees
``n / world_size`` samples, each epoch is still a pure function of ``(seed, epoch)``.

Resuming: ``start`` skips the first batches of the epoch; the loader's ``state_dict`` records
how many batches were consumed, so a resumed run sees exactly the batches it would have seen.

Example::

    s = EpochBatchSampler(1000, 32, seed=0, shuffle=True, rank=0, world_size=2)
    s.set_epoch(3)
    for epoch, idx in s: ...
"""

from __future__ import annotations

import math

import numpy as np

from torchport.data.rng import hash64, permutation

__all__ = ["EpochBatchSampler"]


class EpochBatchSampler:
    """Yields ``(epoch, int64 index array)`` batches for one rank.

    Args:
        n: dataset size. batch_size: samples per batch.
        seed: shuffle seed. shuffle: shuffle (train) or keep order (eval).
        rank, world_size: this process's slice of every epoch.
        drop_last: drop the incomplete last batch (and trim to a multiple of world_size);
            when False the rank slices are padded by wrapping so every rank has the same count.
    """

    def __init__(
        self,
        n: int,
        batch_size: int,
        *,
        seed: int = 0,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = False,
        order: str = "global",
        chunk_sizes: np.ndarray | None = None,
    ) -> None:
        if n <= 0:
            raise ValueError("the dataset is empty")
        if batch_size <= 0:
            raise ValueError(f"batch_size={batch_size} must be positive")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        self.n, self.batch_size, self.seed, self.shuffle = n, batch_size, seed, shuffle
        self.rank, self.world_size, self.drop_last = rank, world_size, drop_last
        if order not in ("global", "shards"):
            raise ValueError(f"order={order!r}: use 'global' or 'shards'")
        if order == "shards" and (chunk_sizes is None or int(np.sum(chunk_sizes)) != n):
            raise ValueError("order='shards' needs chunk_sizes (samples per shard, in index order) that add up to n")
        self.order = order
        self.chunk_sizes = None if chunk_sizes is None else np.asarray(chunk_sizes, dtype=np.int64)
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch (and restart it from its first batch)."""
        self.epoch = int(epoch)
        self.start = 0

    def rank_indices(self, epoch: int | None = None) -> np.ndarray:
        """All indices this rank visits in ``epoch`` (default: current), in order."""
        e = self.epoch if epoch is None else epoch
        if self.order == "shards":
            return self._shard_rank_indices(e)
        order = permutation(self.n, self.seed, e) if self.shuffle else np.arange(self.n, dtype=np.int64)
        if self.drop_last:
            per = self.n // self.world_size
            order = order[: per * self.world_size]
        else:
            per = math.ceil(self.n / self.world_size)
            total = per * self.world_size
            if total > self.n:
                order = np.concatenate([order, np.resize(order, total - self.n)])
        return order[self.rank :: self.world_size]

    def _shard_rank_indices(self, e: int) -> np.ndarray:
        sizes = self.chunk_sizes
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        if self.shuffle:
            corder = np.argsort(hash64(self.seed, e, np.arange(len(sizes)), 1, stream=2)[:, 0], kind="stable")
            pieces = []
            for c in corder:
                idx = np.arange(starts[c], starts[c] + sizes[c], dtype=np.int64)
                pieces.append(idx[np.argsort(hash64(self.seed, e, idx, 1, stream=3)[:, 0], kind="stable")])
            order = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
        else:
            order = np.arange(self.n, dtype=np.int64)
        if self.drop_last:
            per = self.n // self.world_size
        else:
            per = math.ceil(self.n / self.world_size)
            if per * self.world_size > self.n:
                order = np.concatenate([order, np.resize(order, per * self.world_size - self.n)])
        mine = order[self.rank * per : (self.rank + 1) * per].copy()
        if self.shuffle and len(mine):
            window = max(self.batch_size, 2 * int(np.ceil(self.n / max(1, len(sizes)))))
            keys = hash64(self.seed, e, mine, 1, stream=4)[:, 0]
            for a in range(0, len(mine), window):
                seg = mine[a : a + window]
                mine[a : a + window] = seg[np.argsort(keys[a : a + window], kind="stable")]
        return mine

    def batches_per_epoch(self) -> int:
        """Number of batches this rank yields per full epoch."""
        per = self.n // self.world_size if self.drop_last else math.ceil(self.n / self.world_size)
        return per // self.batch_size if self.drop_last else math.ceil(per / self.batch_size)

    def __len__(self) -> int:
        return max(0, self.batches_per_epoch() - self.start)

    def __iter__(self):
        idx = self.rank_indices()
        nb = self.batches_per_epoch()
        epoch = self.epoch
        for b in range(self.start, nb):
            yield epoch, idx[b * self.batch_size : (b + 1) * self.batch_size]
