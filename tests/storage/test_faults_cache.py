"""Transient faults (500/503/dropped connections/stalls) through a real proxy; the block cache under concurrency."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from torchport.data.synth import make_dataset

    root = tmp_path_factory.mktemp("synth")
    make_dataset(root, classes=3, train_per_class=16, val_per_class=2, size=40, seed=1)
    return root / "train"


def test_retries_are_counted_and_bounded(store_env, s3_server, monkeypatch):
    from torchport.errors import StorageError
    from torchport.storage import store
    from torchport.storage.faults import FaultProxy

    payload = os.urandom(50_000)
    store.write_bytes(store_env + "/blob", payload)
    with FaultProxy(s3_server, rate=0.3, stall_rate=0.03, stall_s=2.0, seed=7) as proxy:
        monkeypatch.setenv("TORCHPORT_STORAGE_ENDPOINT", proxy.url)
        monkeypatch.setenv("TORCHPORT_STORAGE_TIMEOUT_S", "0.5")
        store._CLIENTS.clear()
        before = store.STATS["retries"]
        for i in range(40):
            assert store.read_range(store_env + "/blob", i * 1000, i * 1000 + 777) == payload[i * 1000: i * 1000 + 777]
        assert proxy.faults >= 5
        assert {"500", "503", "drop", "reset"} <= set(proxy.counts)
        # every fault but a drop before the answer (which aiohttp may retry itself) went through our loop
        assert store.STATS["retries"] - before >= proxy.faults - proxy.counts["drop"]
        labels = set(store.STATS["retried_errors"])
        assert any("503" in x for x in labels) and any("500" in x for x in labels)
        assert "SocketTimeoutError" in labels or "ReadTimeoutError" in labels or proxy.counts["stall"] == 0
    # a store that fails every request: bounded attempts, then one clear error
    with FaultProxy(s3_server, rate=1.0, seed=0) as proxy:
        monkeypatch.setenv("TORCHPORT_STORAGE_ENDPOINT", proxy.url)
        monkeypatch.setenv("TORCHPORT_STORAGE_RETRIES", "4")
        store._CLIENTS.clear()
        with pytest.raises(StorageError, match=r"kept failing after 4 attempts"):
            store.read_bytes(store_env + "/blob")
        # 4 attempts (plus at most one transparent re-send per attempt for a dropped connection)
        assert 4 <= sum(proxy.counts.values()) <= 8 and proxy.counts["forwarded"] == 0


def test_loader_under_faults_delivers_every_sample_once(folder, store_env, s3_server, monkeypatch, tmp_path):
    """2 DataLoader workers, 10% injected faults: every index exactly once, same pixels as without faults."""
    from torchport.data.loader import make_loader
    from torchport.data.pack import pack
    from torchport.storage import store
    from torchport.storage.faults import FaultProxy

    monkeypatch.setenv("TORCHPORT_STORAGE_BLOCK_MB", "0.03125")  # 32 KiB blocks: many requests
    url = store_env + "/f"
    pack(folder, url, mode="jpeg", workers=1, shard_bytes=24 << 10)
    pack(folder, tmp_path / "local", mode="jpeg", workers=1, shard_bytes=24 << 10)
    kw = dict(batch_size=8, train=True, image_size=24, seed=5, num_workers=2, augment="cpu", order="shards")
    ref = list(make_loader(tmp_path / "local", **kw))
    with FaultProxy(s3_server, rate=0.1, seed=3) as proxy:
        monkeypatch.setenv("TORCHPORT_STORAGE_ENDPOINT", proxy.url)
        store._CLIENTS.clear()
        loader = make_loader(url, **kw)
        got = list(loader)
        assert proxy.faults > 0
    assert len(got) == len(ref) == 6
    for (xa, ya), (xb, yb) in zip(ref, got):
        assert (ya == yb).all() and bool((xa == xb).all())
    assert loader.stats.images == 48 and not loader.stats.skipped


def _reader(args):
    cache_dir, key, n = args
    from torchport.storage.cache import BlockCache

    c = BlockCache(cache_dir, limit_bytes=1 << 30)
    calls = []

    def fetch():
        calls.append(1)
        import time

        time.sleep(0.2)
        return bytes([7]) * n

    data = c.read(key, fetch, 10, 20)
    return len(calls), data


def test_cache_one_download_across_processes_and_lru_eviction(tmp_path):
    from torchport.storage.cache import BlockCache

    with mp.get_context("fork").Pool(4) as pool:
        res = pool.map(_reader, [(str(tmp_path / "c"), "abcdef", 1000)] * 4)
    assert sum(n for n, _ in res) == 1 and all(d == bytes([7]) * 10 for _, d in res)
    c = BlockCache(tmp_path / "c2", limit_bytes=3000)
    for i in range(5):
        c.ensure(f"k{i:02d}", lambda: b"x" * 1000)
        os.utime(c.path(f"k{i:02d}"), (i, i))  # k00 oldest
    c.read("k00", lambda: b"", 0, 1)  # a hit refreshes k00
    c.evict()
    assert c.usage() <= 3000
    assert c.contains("k00") and c.contains("k04") and not c.contains("k01")
    assert not list((tmp_path / "c2").rglob(".*.tmp-*"))
