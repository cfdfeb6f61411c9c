"""Shard-aware sample order: ranks read disjoint shards, every sample once per epoch, deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from torchport.data.sampler import EpochBatchSampler


@pytest.mark.parametrize("world", [1, 2, 3])
def test_ranks_read_disjoint_shards(world):
    sizes = np.array([40, 35, 50, 45, 30, 40, 60, 20])  # 8 shards, 320 samples
    shard_of = np.repeat(np.arange(len(sizes)), sizes)
    per_rank = []
    for r in range(world):
        s = EpochBatchSampler(len(shard_of), 8, seed=1, shuffle=True, rank=r, world_size=world, drop_last=True,
                              order="shards", chunk_sizes=sizes)
        s.set_epoch(3)
        idx = np.concatenate([b for _, b in s])
        assert len(idx) == len(set(idx.tolist())) == (320 // world) // 8 * 8
        again = EpochBatchSampler(len(shard_of), 8, seed=1, rank=r, world_size=world, drop_last=True, order="shards",
                                  chunk_sizes=sizes)
        again.set_epoch(3)
        assert (np.concatenate([b for _, b in again]) == idx).all()             # a pure function of (seed, epoch)
        per_rank.append(set(shard_of[idx].tolist()))
    for a in range(world):
        for b in range(a + 1, world):
            assert len(per_rank[a] & per_rank[b]) <= 1                          # only a boundary shard is shared
    if world == 1:
        assert per_rank[0] == set(range(8))
    s0 = EpochBatchSampler(320, 8, seed=1, order="shards", chunk_sizes=sizes)
    s0.set_epoch(4)
    first = next(iter(s0))[1]
    s0.set_epoch(5)
    assert not (next(iter(s0))[1] == first).all()                               # epochs differ
    # batches mix samples (not one shard in index order)
    assert len(set(shard_of[first].tolist())) >= 1 and not (np.diff(first) == 1).all()


def test_all_samples_once_without_drop_last():
    sizes = np.array([7, 9, 4])
    got = []
    for r in range(2):
        s = EpochBatchSampler(20, 4, seed=0, rank=r, world_size=2, drop_last=False, order="shards", chunk_sizes=sizes)
        got += np.concatenate([b for _, b in s]).tolist()
    assert sorted(got) == list(range(20))
    with pytest.raises(ValueError, match="chunk_sizes"):
        EpochBatchSampler(20, 4, order="shards", chunk_sizes=np.array([3]))
