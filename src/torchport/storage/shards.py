"""Shard sets in an object store: streamed range reads through the node-local block cache, and upload.

Reading (:class:`RemoteShards`, used by :class:`torchport.data.format.ShardSet` for URLs):

* the manifest and ``index.npy`` are fetched once (the index is checked against the manifest's
  sha256 and cached locally under that hash);
* samples are served from fixed-size **blocks** of each shard (``TORCHPORT_STORAGE_BLOCK_MB``,
  default 8): a block is one ranged GET, cached on local disk (:class:`~torchport.storage.cache.BlockCache`,
  content-addressed by the shard's sha256), so nothing is downloaded whole and nothing twice;
* :meth:`RemoteShards.prefetch` fetches the blocks of a whole batch concurrently, and every miss
  schedules **read-ahead** of the following blocks in a small per-process thread pool
  (``TORCHPORT_STORAGE_READAHEAD`` blocks, default 2). "Following" is the reader's **plan** when it has
  one (:meth:`RemoteShards.plan`: the blocks this rank reads this epoch, in the order it reads them -- the
  loader sets it from its sampler), so read-ahead never leaves the rank's slice of the shards (the next
  shard in the index belongs to another rank, on another node); without a plan, the next blocks of the
  shard and, past its end, of the next shard.

Writing (:func:`upload_shard_dir`): shards first, then ``index.npy``/``labels.json``/``pack_report.json``,
and ``index.json`` **last** -- the manifest is the commit: until it exists, the prefix is not a shard
set, so an interrupted upload is never read as a complete one.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable


from torchport.errors import StorageError
from torchport.storage import store
from torchport.storage.cache import BlockCache

__all__ = ["RemoteShards", "load_manifest", "upload_shard_dir", "block_size"]


def block_size() -> int:
    """Cache block size in bytes (``TORCHPORT_STORAGE_BLOCK_MB``, default 8 MiB)."""
    return max(1 << 16, int(float(os.environ.get("TORCHPORT_STORAGE_BLOCK_MB") or 8) * (1 << 20)))


def load_manifest(url: str) -> dict[str, Any] | None:
    """The parsed ``index.json`` under ``url``, or None when there is none."""
    fs_url = store.join(url, "index.json")
    fs, p = store._path(fs_url)
    data = store.call(lambda: fs.cat_file(p), fs_url, what="read", missing_ok=True)
    if data is None:
        return None
    from torchport._parse import loads

    return loads(data, fmt="json", what=fs_url)     # from elsewhere: size and depth limits (a ValueError)


def load_index(url: str, manifest: dict[str, Any], cache: BlockCache) -> bytes:
    """The bytes of ``index.npy`` (cached locally under the manifest's sha256)."""
    want = manifest["index"]["sha256"]
    iurl = store.join(url, manifest["index"]["file"])
    return cache.read(f"index-{want}", lambda: store.read_bytes(iurl))


class RemoteShards:
    """Block-cached random access to the shard files of one shard set in a store.

    Args:
        url: the shard set prefix (``s3://bucket/ds/train``).
        manifest: its parsed ``index.json``.
        cache: the node's :class:`BlockCache` (default: configured from the environment).
    """

    def __init__(self, url: str, manifest: dict[str, Any], cache: BlockCache | None = None) -> None:
        self.url = url.rstrip("/")
        self.shards = manifest["shards"]
        self.cache = cache or BlockCache()
        self.block = block_size()
        self.readahead = int(os.environ.get("TORCHPORT_STORAGE_READAHEAD") or 2)
        self._pool: cf.ThreadPoolExecutor | None = None
        self._pool_pid = -1
        self._pending: set[str] = set()
        self._plock = threading.Lock()
        self._plan: list[tuple[int, int]] | None = None       # the blocks this reader will read, in order
        self._plan_pos: dict[tuple[int, int], int] = {}

    def plan(self, blocks: Iterable[tuple[int, int]] | None) -> None:
        """Bound the read-ahead by what this reader will read: ``blocks`` = ``(shard, block)`` in reading order
        (each once); a miss then reads ahead the next blocks of this list, and none outside it. None: no plan
        (read-ahead runs on through the shards in index order)."""
        self._plan = None if blocks is None else list(blocks)
        self._plan_pos = {} if self._plan is None else {k: i for i, k in enumerate(self._plan)}

    def __getstate__(self) -> dict[str, Any]:  # spawned workers: drop the threads and locks
        d = dict(self.__dict__)
        d.update(_pool=None, _pool_pid=-1, _pending=set(), _plock=None)
        return d

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)
        self._plock = threading.Lock()

    # -- blocks -----------------------------------------------------------------------------------------
    def shard_url(self, sid: int) -> str:
        return store.join(self.url, self.shards[sid]["file"])

    def _key(self, sid: int, b: int) -> str:
        sha = self.shards[sid].get("sha256") or hashlib.sha256(self.shard_url(sid).encode()).hexdigest()
        return f"{sha[:40]}-{self.block}-{b}"

    def _nblocks(self, sid: int) -> int:
        return max(1, -(-int(self.shards[sid]["bytes"]) // self.block))

    def _fetcher(self, sid: int, b: int):
        start = b * self.block
        end = min(int(self.shards[sid]["bytes"]), start + self.block)
        url = self.shard_url(sid)
        return lambda: store.read_range(url, start, end)

    def _ensure(self, sid: int, b: int) -> bool:
        return self.cache.ensure(self._key(sid, b), self._fetcher(sid, b))

    def _executor(self) -> cf.ThreadPoolExecutor:
        if self._pool is None or self._pool_pid != os.getpid():  # threads do not survive a fork
            self._pool = cf.ThreadPoolExecutor(max_workers=8, thread_name_prefix="torchport-readahead")
            self._pool_pid = os.getpid()
            self._pending = set()
            self._plock = threading.Lock()
        return self._pool

    def _schedule_readahead(self, sid: int, b: int) -> None:
        todo: list[tuple[int, int]] = []
        if self._plan is not None:   # the next blocks this reader will read (none past its slice)
            at = self._plan_pos.get((sid, b))
            todo = [] if at is None else self._plan[at + 1 : at + 1 + self.readahead]
        else:
            s, nb = sid, b
            for _ in range(self.readahead):
                nb += 1
                if nb >= self._nblocks(s):
                    s, nb = s + 1, 0  # the next shard
                    if s >= len(self.shards):
                        break
                todo.append((s, nb))
        pool = self._executor()
        for s, nb in todo:
            key = self._key(s, nb)
            with self._plock:
                if key in self._pending or self.cache.contains(key):
                    continue
                self._pending.add(key)
            pool.submit(self._readahead_one, s, nb, key)

    def _readahead_one(self, sid: int, b: int, key: str) -> None:
        try:
            self._ensure(sid, b)
        except Exception:  # noqa: BLE001 - read-ahead is best effort; the real read raises
            pass
        finally:
            with self._plock:
                self._pending.discard(key)

    def read(self, sid: int, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of shard ``sid`` (through the cache; a miss triggers read-ahead)."""
        out = []
        b0, b1 = start // self.block, max(start, end - 1) // self.block
        for b in range(b0, b1 + 1):
            lo = max(start, b * self.block) - b * self.block
            hi = min(end, (b + 1) * self.block) - b * self.block
            key = self._key(sid, b)
            if not self.cache.contains(key):
                self._schedule_readahead(sid, b)
            out.append(self.cache.read(key, self._fetcher(sid, b), lo, hi))
        data = out[0] if len(out) == 1 else b"".join(out)
        if len(data) != end - start:
            from torchport.data.errors import ShardCorruptError

            raise ShardCorruptError(f"shard {self.shards[sid]['file']} in {self.url}: needs bytes {start}..{end} but "
                                    f"got {len(data)} (object shorter than the manifest says); re-pack or re-upload it")
        return data

    def prefetch(self, spans: Iterable[tuple[int, int, int]]) -> int:
        """Fetch, concurrently, every missing block that the ``(shard, start, end)`` spans touch; returns how many."""
        need: dict[str, tuple[int, int]] = {}
        for sid, start, end in spans:
            for b in range(start // self.block, max(start, end - 1) // self.block + 1):
                key = self._key(sid, b)
                if key not in need and not self.cache.contains(key):
                    need[key] = (sid, b)
        if not need:
            return 0
        pool = self._executor()
        futures = [pool.submit(self._ensure, sid, b) for sid, b in need.values()]
        for f in futures:
            f.result()  # re-raises StorageError after the retry budget
        last = max(need.values(), key=(lambda k: self._plan_pos.get(k, -1)) if self._plan is not None else None)
        self._schedule_readahead(*last)
        return len(need)

    # -- whole-shard checks (verify) -----------------------------------------------------------------------
    def header(self, sid: int, nbytes: int) -> bytes:
        """The first ``nbytes`` of shard ``sid`` for the open-time header check: from the cache when its first
        block is there, else one ranged GET of just those bytes -- no block fetched, no read-ahead. (Through
        :meth:`read`, opening cost every node block 0 plus ``readahead`` blocks of *every* shard, 0.42x a
        small dataset per node, although a node reads only its slice: docs/cluster.md, the data table.)"""
        key = self._key(sid, 0)
        if self.cache.contains(key):
            return self.cache.read(key, self._fetcher(sid, 0), 0, nbytes)
        return store.read_range(self.shard_url(sid), 0, min(nbytes, int(self.shards[sid]["bytes"])))

    def size(self, sid: int) -> int | None:
        """Size of the shard object (None when it is missing)."""
        meta = store.info(self.shard_url(sid))
        return None if meta is None else int(meta["size"])

    def sha256(self, sid: int) -> str:
        """sha256 of the shard object, streamed block by block (through the cache)."""
        h = hashlib.sha256()
        n = int(self.shards[sid]["bytes"])
        for b in range(self._nblocks(sid)):
            start = b * self.block
            h.update(self.read(sid, start, min(n, start + self.block)))
        return h.hexdigest()


# -- upload ---------------------------------------------------------------------------------------------
def upload_shard_dir(local: str | os.PathLike, url: str, *, overwrite: bool = False, workers: int = 4) -> None:
    """Upload a packed shard directory to ``url``; ``index.json`` goes last (the commit).

    Raises:
        FileExistsError: ``url`` already holds a shard set and ``overwrite`` is False.
        StorageError: the upload failed (after retries); the manifest was not written.
    """
    local = Path(local)
    manifest_url = store.join(url, "index.json")
    if store.exists(manifest_url):
        if not overwrite:
            raise FileExistsError(f"{url} already holds a shard set; choose another destination or pass --overwrite")
        store.remove(manifest_url)  # un-commit first: a half-replaced set is never read as complete
    manifest = json.loads((local / "index.json").read_text())
    data_files = [s["file"] for s in manifest["shards"]]
    with cf.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for f in [pool.submit(store.put_file, local / name, store.join(url, name)) for name in data_files]:
            f.result()
    for name in (manifest["index"]["file"], "labels.json", "pack_report.json"):
        if (local / name).is_file():
            store.put_file(local / name, store.join(url, name))
    store.put_file(local / "index.json", manifest_url)
    if not store.exists(manifest_url):
        raise StorageError(f"uploaded {manifest_url} but it is not visible; check the endpoint's consistency settings")
